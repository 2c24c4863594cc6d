"""python -m feedstock bump against small synthetic wheels, offline, in a copy of the feedstock.

The copy has the real recipe, split spec and .ci_support configs, with its version set to
9.1.0, one test patch, and a tests/data listing of a synthetic 9.1.0 osx-arm64 wheel. That wheel
holds the real osx-arm64 listing's files outside ``torch/include`` (every library, binary and
CMake file) and a few headers of each include dir, so the real split spec and the recipe's real
rendered file tests run on a realistic layout in seconds. A 9.2.0 wheel then adds a library,
removes a header, raises Requires-Python, changes the build backend, asks for a newer
typing-extensions and breaks the test patch's context; the script must name each one and exit 1.
The same wheel again as 9.2.0 is a bump that needs nothing (exit 0). Bad input is one line,
exit 2.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from feedstock.configs import list_configs
from feedstock.paths import REPO
from feedstock.split_check.listings import current_listing
from feedstock.split_check.platforms import BY_NAME
from feedstock.split_check.recipe import config_for, python_minor
from feedstock.split_check.wheels import baseline_wheel
from feedstock.wheel_files import Row, list_wheel, listing_text, read_listing
from support.tools import tool_argv

BUMP = tool_argv("bump")
OLD, NEW = "9.1.0", "9.2.0"
PIP_TAG = "macosx_14_0_arm64"
PROBE = "torch/utils/cpp_extension.py"  # the file the test patch changes
PROBE_TEXT = "first = 1\nsecond = 2\nthird = 3\n"
PATCH = f"""From: Feedstock Tests <tests@example.invalid>
Subject: [PATCH] Probe

---
diff --git a/{PROBE} b/{PROBE}
--- a/{PROBE}
+++ b/{PROBE}
@@ -1,3 +1,3 @@
 first = 1
-second = 2
+second = 22
 third = 3
--\x20
2.45.0
"""
NEW_LIBRARY = "torch/lib/libtorch_bump_probe.dylib"
HEADERS_PER_DIR = 3  # of each torch/include/<dir>: enough for the spec's required include rules


@dataclass
class Wheel:
    """What a synthetic torch wheel declares and holds."""

    version: str
    rows: list[Row]
    requires_python: str = ">=3.10"
    generator: str = "scikit-build-core 1.1.0"
    requires_dist: list[str] = field(default_factory=list)
    texts: dict[str, str] = field(default_factory=lambda: {PROBE: PROBE_TEXT})
    pip_tag: str = PIP_TAG

    @property
    def name(self) -> str:
        return f"torch-{self.version}-cp312-cp312-{self.pip_tag}.whl"

    def metadata(self) -> str:
        lines = ["Metadata-Version: 2.4", "Name: torch", f"Version: {self.version}"]
        lines += [f"Classifier: Programming Language :: Python :: 3.{n}" for n in range(10, 15)]
        lines.append(f"Requires-Python: {self.requires_python}")
        lines += [f"Requires-Dist: {r}" for r in self.requires_dist]
        return "\n".join(lines) + "\n"

    def write(self, cache: Path) -> Path:
        path = cache / self.pip_tag / self.name
        path.parent.mkdir(parents=True, exist_ok=True)
        dist_info = f"torch-{self.version}.dist-info"
        # a CPU build: no local version such as +cu130 (scripts read the variant from here)
        texts = {"torch/version.py": f"__version__ = '{self.version}'\ncuda = None\n", **self.texts}
        with zipfile.ZipFile(path, "w") as archive:
            for row in self.rows:
                info = zipfile.ZipInfo(row.path)
                info.external_attr = (0o100755 if row.executable else 0o100644) << 16
                archive.writestr(info, texts.get(row.path, ""))
            archive.writestr(f"{dist_info}/METADATA", self.metadata())
            wheel = f"Wheel-Version: 1.0\nGenerator: {self.generator}\nRoot-Is-Purelib: false\n"
            archive.writestr(f"{dist_info}/WHEEL", wheel + f"Tag: cp312-cp312-{self.pip_tag}\n")
        return path


def real_rows(listing_tag: str = "macosx_arm64") -> list[Row]:
    """A real listing without most headers (see the module docstring)."""
    listing = sorted((REPO / "tests" / "data").glob(f"torch-*-cp312-{listing_tag}-files.tsv"))[-1]
    rows = read_listing(listing)
    kept: list[Row] = []
    headers_in: dict[str, int] = {}
    for row in rows:
        parts = row.path.split("/")
        if parts[:2] != ["torch", "include"]:
            kept.append(row)
        elif row.path.endswith(("torch/csrc/api/include/torch/torch.h", "include/omp.h")):
            kept.append(row)  # the recipe's tests look for these two
        elif len(parts) > 3 and headers_in.get(parts[2], 0) < HEADERS_PER_DIR:
            headers_in[parts[2]] = headers_in.get(parts[2], 0) + 1
            kept.append(row)
    kept += [
        Row(path, 0, False) for path in (PROBE, "torch/version.py") if path not in {r.path for r in kept}
    ]
    return sorted(kept, key=lambda r: r.path)


def make_feedstock(root: Path, old_wheel: Path) -> Path:
    """A copy of the feedstock at version 9.1.0 with one patch and the old wheel's listing."""
    shutil.copytree(REPO / "recipe", root / "recipe", ignore=shutil.ignore_patterns("__pycache__", "patches"))
    shutil.copytree(REPO / ".ci_support", root / ".ci_support")
    shutil.copy(REPO / "conda-forge.yml", root / "conda-forge.yml")
    meta = root / "recipe" / "meta.yaml"
    text = re.sub(r'(\{% set version = ")[^"]+(" %\})', rf"\g<1>{OLD}\g<2>", meta.read_text())
    meta.write_text(text)
    (root / "recipe" / "patches").mkdir()
    (root / "recipe" / "patches" / "0001-Probe.patch").write_text(PATCH)
    data = root / "tests" / "data"
    data.mkdir(parents=True)
    (data / f"torch-{OLD}-cp312-macosx_arm64-files.tsv").write_text(listing_text(list_wheel(old_wheel)))
    return root


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BUMP, *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=cwd,
    )


@dataclass(frozen=True)
class Setup:
    feedstock: Path
    cache: Path
    rows: list[Row]

    def check(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(NEW, "--offline", "--platforms", "osx-arm64", "--cache", self.cache,
                   "--feedstock", self.feedstock, *args)  # fmt: skip


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    return {
        str(p.relative_to(root)): (stat.S_IMODE(p.stat().st_mode), p.read_bytes())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    """The feedstock copy and a cache with the old wheel (the bump's baseline)."""
    root = tmp_path_factory.mktemp("bump")
    rows = real_rows()
    cache = root / "cache"
    old = Wheel(OLD, rows).write(cache)
    return Setup(make_feedstock(root / "feedstock", old), cache, rows)


@pytest.fixture(scope="module")
def changed(base: Setup) -> subprocess.CompletedProcess[str]:
    """A 9.2.0 that needs a person for six reasons."""
    header = next(r.path for r in base.rows if r.path.startswith("torch/include/ATen/"))
    rows = [r for r in base.rows if r.path != header] + [Row(NEW_LIBRARY, 10, True)]
    wheel = Wheel(
        NEW,
        sorted(rows, key=lambda r: r.path),
        requires_python=">=3.11",
        generator="setuptools (80.9.0)",
        requires_dist=["typing-extensions>=4.99.0", 'optree>=0.13.0; extra == "optree"'],
        texts={PROBE: PROBE_TEXT.replace("third = 3", "third = 333")},
    )
    path = wheel.write(base.cache)
    before = snapshot(base.feedstock / "tests" / "data")
    try:
        res = base.check()
    finally:
        path.unlink()  # the cache holds one 9.2.0 wheel per test
    assert snapshot(base.feedstock / "tests" / "data") == before, (
        "tests/data written without --write-listings"
    )
    return res


def actions(report: str, section: str) -> list[str]:
    """The ACTION lines of one section of the text report."""
    found = re.search(rf"^== {re.escape(section)} ==\n((?:  .*\n)*)", report + "\n", re.M)
    lines = found.group(1).splitlines() if found else []
    return [line.split("ACTION", 1)[1].strip() for line in lines if line.startswith("  ACTION")]


def test_changed_version_exits_1(changed: subprocess.CompletedProcess[str]) -> None:
    assert changed.returncode == 1, changed.stdout + changed.stderr
    assert changed.stderr == ""
    assert changed.stdout.rstrip().endswith("need a person (exit 1)")


def test_names_the_new_library_and_its_missing_rule(changed: subprocess.CompletedProcess[str]) -> None:
    [line] = [a for a in actions(changed.stdout, "listings") if "new library" in a]
    assert NEW_LIBRARY in line and "no rule matches in a strict area" in line
    [split] = actions(changed.stdout, "split")
    assert "split stage" in split and "libtorch_bump_probe" in split, split


def test_names_the_removed_header(changed: subprocess.CompletedProcess[str], base: Setup) -> None:
    header = next(r.path for r in base.rows if r.path.startswith("torch/include/ATen/"))
    assert f"osx-arm64: header gone: {header}" in changed.stdout


def test_names_the_python_range_change(changed: subprocess.CompletedProcess[str]) -> None:
    [line] = actions(changed.stdout, "python")
    assert "requires Python >=3.11 (torch 9.1.0: >=3.10): the 3.10 variants must go" in line
    assert "osx-arm64 x1" in line  # the configs that build 3.10, counted per platform


def test_names_the_build_backend_change(changed: subprocess.CompletedProcess[str]) -> None:
    [line] = actions(changed.stdout, "build backend")
    assert "Generator setuptools (80.9.0) (torch 9.1.0: scikit-build-core 1.1.0)" in line
    assert "the build backend changed; the pytorch output's host has scikit-build-core" in line


def test_names_the_requirement_the_recipe_pins_lower(changed: subprocess.CompletedProcess[str]) -> None:
    [line] = actions(changed.stdout, "dependencies")
    assert line.startswith("osx-arm64: typing-extensions: upstream >=4.99.0, pytorch run has >=")
    assert "optree" not in changed.stdout  # an extra, not a run requirement


def test_names_the_patch_that_no_longer_applies(changed: subprocess.CompletedProcess[str]) -> None:
    [line] = actions(changed.stdout, "patches")
    assert line.startswith(f"0001-Probe.patch: {PROBE}: Hunk #1 FAILED at 1"), line


def test_leaves_the_sha256_to_the_bot_or_a_person(changed: subprocess.CompletedProcess[str]) -> None:
    url = f"https://github.com/pytorch/pytorch/releases/download/v{NEW}/pytorch-v{NEW}.tar.gz"
    assert re.search(
        rf"^  info +left to the bot or a person: .*sha256 of {re.escape(url)}", changed.stdout, re.M
    )


def test_an_unchanged_wheel_needs_nobody(base: Setup) -> None:
    """The old wheel again as 9.2.0: patches apply, the split and the rendered tests pass."""
    path = Wheel(NEW, base.rows).write(base.cache)
    try:
        res = base.check("--json")
    finally:
        path.unlink()
    assert res.returncode == 0, res.stdout + res.stderr
    report = json.loads(res.stdout)
    assert report["exit_code"] == 0
    levels = {(f["section"], f["level"]) for f in report["findings"]}
    assert ("split", "ok") in levels and ("patches", "ok") in levels and ("python", "ok") in levels
    assert not [f for f in report["findings"] if f["level"] == "action"]


def test_write_listings_writes_the_new_listing(base: Setup, tmp_path: Path) -> None:
    feedstock = shutil.copytree(base.feedstock, tmp_path / "feedstock", symlinks=True)
    path = Wheel(NEW, base.rows).write(base.cache)
    try:
        res = run(NEW, "--offline", "--platforms", "osx-arm64", "--cache", base.cache,
                  "--feedstock", feedstock, "--write-listings")  # fmt: skip
    finally:
        path.unlink()
    assert res.returncode == 0, res.stdout + res.stderr
    written = feedstock / "tests" / "data" / f"torch-{NEW}-cp312-macosx_arm64-files.tsv"
    assert f"wrote tests/data/{written.name}" in res.stdout
    assert [r.path for r in read_listing(written)] == sorted(r.path for r in base.rows)
    assert not [p for p in written.parent.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("2.15", "--platforms", "osx-arm64"), "malformed version '2.15': expected X.Y.Z"),
        (("9.0.0", "--platforms", "osx-arm64"), "version 9.0.0 is older than the recipe's 9.1.0"),
        ((NEW, "--platforms", "linux-65"), "unknown platform(s) linux-65"),
        (("9.9.9", "--platforms", "osx-arm64"), "no cached torch 9.9.9 wheel for any of macosx_14_0_arm64"),
    ],
    ids=["malformed", "older", "unknown-platform", "nothing-cached"],
)
def test_bad_input_is_one_line_and_exit_2(base: Setup, args: tuple[str, ...], message: str) -> None:
    res = run(*args, "--offline", "--cache", base.cache, "--feedstock", base.feedstock)
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stdout == ""
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("feedstock bump: error: "), res.stderr
    assert message in res.stderr


def test_not_a_feedstock_is_bad_input(tmp_path: Path) -> None:
    res = run(NEW, "--offline", "--feedstock", tmp_path)
    assert res.returncode == 2
    assert res.stderr.startswith("feedstock bump: error: not a feedstock: cannot read"), res.stderr


def _pip_env(**settings: str) -> dict[str, str]:
    """This machine's pip settings gone (no config file, no PIP_*), ``settings`` instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return env | {"PIP_CONFIG_FILE": os.devnull, "PIP_RETRIES": "1", **settings}


def test_unknown_version_on_the_index(base: Setup, tmp_path: Path) -> None:
    """A real pip and an index (a local find-links dir) that has torch, but not the version asked."""
    links = Wheel(NEW, base.rows[:3]).write(tmp_path / "links").parent
    res = subprocess.run(
        [*BUMP, "9.9.0", "--platforms", "osx-arm64", "--cache",
         str(tmp_path / "cache"), "--feedstock", str(base.feedstock)],
        capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path,
        env=_pip_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links)),
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr == (
        "feedstock bump: error: unknown version: no torch 9.9.0 wheel on the index "
        f"(the newest there: {NEW})\n"
    )
    assert not os.listdir(tmp_path / "cache" / PIP_TAG)


def test_a_release_candidate_says_what_it_could_not_check(base: Setup, tmp_path: Path) -> None:
    """rc wheels are never on PyPI: an index without the rc is no reason to stop; the report names
    what went unchecked, the rc's source tarball, and checks the pytorch_rc label."""
    links = Wheel(NEW, base.rows[:3]).write(tmp_path / "links").parent
    res = subprocess.run(
        [*BUMP, "9.2.0rc1", "--platforms", "osx-arm64", "--cache",
         str(tmp_path / "cache"), "--feedstock", str(base.feedstock)],
        capture_output=True, text=True, check=False, timeout=300, cwd=tmp_path,
        env=_pip_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links)),
    )  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "download.pytorch.org/whl/test" in res.stdout and "patches, split" in res.stdout, res.stdout
    assert "pytorch-v9.2.0-rc1.tar.gz" in res.stdout, res.stdout
    assert "ok     an rc version builds only for conda-forge pytorch_rc" in res.stdout


def test_no_network_is_one_line(tmp_path: Path) -> None:
    """pip pointed at a port nobody listens on: one line, exit 2, nothing downloaded."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = _pip_env(PIP_INDEX_URL=f"http://127.0.0.1:{port}/simple")
    res = subprocess.run(
        [*BUMP, NEW, "--platforms", "osx-arm64", "--cache", str(tmp_path / "cache")],
        capture_output=True, text=True, check=False, timeout=120, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.startswith("feedstock bump: error: no network: "), res.stderr
    assert res.stderr.count("\n") == 1
    assert not os.listdir(tmp_path / "cache" / PIP_TAG)


def test_a_pip_constraint_that_caps_torch_is_named(base: Setup, tmp_path: Path) -> None:
    """The index (a local find-links dir) has the new wheel; a pip constraint caps torch below it.
    pip's own reason comes through, not "no network"."""
    links = Wheel(NEW, base.rows[:3]).write(tmp_path / "links").parent
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"torch<={OLD}\n")
    env = _pip_env(PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_CONSTRAINT=str(constraints))
    res = subprocess.run(
        [*BUMP, NEW, "--platforms", "osx-arm64", "--cache", str(tmp_path / "cache"),
         "--feedstock", str(base.feedstock)],
        capture_output=True, text=True, check=False, timeout=300, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"feedstock bump: error: pip refused torch {NEW}: "), res.stderr
    assert f"The user requested (constraint) torch<={OLD}" in res.stderr
    assert "no network" not in res.stderr
    assert not os.listdir(tmp_path / "cache" / PIP_TAG)


def test_a_wheel_is_split_with_the_config_of_the_nearest_cuda() -> None:
    """2.15.0's linux wheels are CUDA 13.2: the CUDA 13.0 config's tests answer them, not 12.6's."""
    configs = list_configs(REPO)
    chosen = config_for(configs, "linux-64", "13.2", "3.12")
    assert chosen is not None and chosen.get("cuda_compiler_version") == ["13.0"]
    assert chosen.get("blas_impl") == ["generic"]
    cpu = config_for(configs, "osx-arm64", None, "3.12")
    # macOS is a megabuild too: its one osx-arm64 config builds 3.12 among every other Python
    assert cpu is not None and "3.12" in [python_minor(v) for v in cpu.get("python")]


def test_listings_ahead_of_the_recipe_are_compared_with(tmp_path: Path) -> None:
    """While a bump is under way tests/data may hold newer listings than the recipe's version."""
    platform = BY_NAME["linux-64"]
    for version in ("2.9.0", "2.10.1"):
        (tmp_path / f"torch-{version}-cp312-linux_x86_64-cu130-files.tsv").write_text(
            "path\tsize\texecutable\n"
        )
    (tmp_path / "torch-2.11.0-cp312-linux_aarch64-cu130-files.tsv").write_text("")
    assert (
        current_listing(tmp_path, "2.9.0", platform)
        == tmp_path / "torch-2.9.0-cp312-linux_x86_64-cu130-files.tsv"
    )
    newest = current_listing(tmp_path, "2.8.0", platform)
    assert newest == tmp_path / "torch-2.10.1-cp312-linux_x86_64-cu130-files.tsv"  # numeric, not text order
    assert current_listing(tmp_path, "2.9.0", BY_NAME["osx-arm64"]) is None


def test_the_baseline_is_the_recipes_version_else_the_newest_older_one(tmp_path: Path) -> None:
    """Generator and Requires-Python "before" come from a cached wheel of the version before."""
    platform = BY_NAME["osx-arm64"]
    (tmp_path / PIP_TAG).mkdir()
    for version in ("2.9.0", "2.10.1", "2.11.0"):
        (tmp_path / PIP_TAG / f"torch-{version}-cp312-cp312-{PIP_TAG}.whl").touch()
    named = {v: tmp_path / PIP_TAG / f"torch-{v}-cp312-cp312-{PIP_TAG}.whl" for v in ("2.9.0", "2.10.1")}
    assert baseline_wheel(tmp_path, platform, "2.9.0", "2.11.0", ["3.12"]) == named["2.9.0"]
    assert baseline_wheel(tmp_path, platform, "2.8.0", "2.11.0", ["3.12"]) == named["2.10.1"]
    assert baseline_wheel(tmp_path, platform, "2.8.0", "2.9.0", ["3.12"]) is None


def test_a_windows_wheel_is_split_as_bld_bat_does(base: Setup, tmp_path: Path) -> None:
    """win-64: the build's pipeline as bld.bat runs it: stage, verify, install into conda's
    Library/, the pytorch wheel as its wheel.exclude leaves it, no magma pass and no link-back;
    the rendered ``if [not] exist`` tests run. Then a new DLL in torch/lib that no rule takes is
    named."""
    rows = real_rows("win_amd64")
    feedstock = shutil.copytree(base.feedstock, tmp_path / "feedstock", symlinks=True)
    old = Wheel(OLD, rows, pip_tag="win_amd64").write(tmp_path / "cache")
    data = feedstock / "tests" / "data"
    (data / f"torch-{OLD}-cp312-win_amd64-files.tsv").write_text(listing_text(list_wheel(old)))

    def check(new_rows: list[Row]) -> subprocess.CompletedProcess[str]:
        path = Wheel(NEW, sorted(new_rows, key=lambda r: r.path), pip_tag="win_amd64").write(
            tmp_path / "cache"
        )
        try:
            return run(NEW, "--offline", "--platforms", "win-64", "--cache", tmp_path / "cache",
                       "--feedstock", feedstock)  # fmt: skip
        finally:
            path.unlink()

    same = check(rows)
    assert same.returncode == 0, same.stdout + same.stderr
    split = re.search(r"^  ok     win-64 \(win_64_cpu, Python 3.12\): (.*)$", same.stdout, re.M)
    assert split, same.stdout
    ran = re.search(r"(\d+) file checks of the rendered tests ran, 0 failed", split.group(1))
    assert ran and int(ran.group(1)) >= 10, split.group(1)
    left_out = re.search(r"; not for win-64: ([^;]*);", split.group(1))
    assert left_out and "split link-back (pytorch)" in left_out.group(1), split.group(1)
    assert "magma relink" in left_out.group(1) and "split install (libtorch-cuda-linalg)" in left_out.group(1)

    probe = check([*rows, Row("torch/lib/torch_bump_probe.dll", 10, True)])
    assert probe.returncode == 1, probe.stdout + probe.stderr
    [action] = actions(probe.stdout, "split")
    assert "win-64" in action and "torch_bump_probe.dll" in action, action
