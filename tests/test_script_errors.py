"""Every command-line tool answers bad input with one ``prog: error: ...`` line, never a traceback.

Each case runs the real script in a subprocess, as a user would, with input it must reject: an
unknown config, a missing file, a malformed file or a bad option value.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from feedstock.paths import REPO
from support.tools import tool_argv

# Longer than any one-line error plus argparse's usage lines, far shorter than a traceback or the
# ~3,000-character list of every config the unknown-config error used to print.
MAX_STDERR = 600


@dataclass(frozen=True)
class Case:
    command: str  # python -m feedstock <command>, or BUILD_LOCALLY
    args: tuple[str, ...]

    @property
    def prog(self) -> str:
        return "build-locally" if self.command == BUILD_LOCALLY else f"feedstock {self.command}".strip()

    def argv(self, args: list[str]) -> list[str]:
        if self.command == BUILD_LOCALLY:
            return [sys.executable, str(REPO / BUILD_LOCALLY), *args]
        return tool_argv(*self.command.split(), *args)


def _bad_files(root: Path) -> dict[str, Path]:
    """Malformed inputs, keyed by what is wrong with them."""
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "not-json": root / "outputs.json",
        "json-not-a-list": root / "object.json",
        "json-list-of-junk": root / "junk.json",
        "not-a-zip": root / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",
        "not-a-cache": root / "CMakeCache.txt",
        "empty-dir": root / "empty",
    }
    files["not-json"].write_text("{ this is not json\n")
    files["json-not-a-list"].write_text('{"name": "pytorch"}\n')
    files["json-list-of-junk"].write_text('[1, "two", {"name": "pytorch"}]\n')
    files["not-a-zip"].write_bytes(b"not a zip archive\n")
    files["not-a-cache"].write_bytes(b"\x00\xff binary \x00 garbage\n")
    files["empty-dir"].mkdir(exist_ok=True)
    return files


def _feedstock_with_bad_config(root: Path) -> Path:
    """A feedstock whose only config has a tab in it (configs.py rejects tabs)."""
    (root / ".ci_support").mkdir(parents=True)
    (root / ".ci_support" / "linux_64_.yaml").write_text("target_platform:\n\t- linux-64\n")
    (root / "recipe").symlink_to(REPO / "recipe")
    return root


BUILD_LOCALLY = "build-locally.py"  # conda-smithy's entry at the feedstock root, not a subcommand
BAD = "@bad@"  # replaced by the malformed-input directory at run time
MISSING = "/nonexistent/feedstock-test-input"

CASES: dict[str, Case | tuple[Case, pytest.MarkDecorator]] = {
    # solver_check.py
    "solver_check-unknown-config": Case("solver-check", ("--config", "nosuch")),
    "solver_check-missing-records": Case("solver-check", ("--records", MISSING)),
    "solver_check-malformed-records": Case("solver-check", ("--records", f"{BAD}/outputs.json")),
    "solver_check-records-not-a-list": Case("solver-check", ("--records", f"{BAD}/object.json")),
    "solver_check-records-of-junk": Case("solver-check", ("--records", f"{BAD}/junk.json")),
    "solver_check-missing-feedstock": Case("solver-check", ("--feedstock", MISSING)),
    "solver_check-bad-config-file": Case("solver-check", ("--feedstock", "@badfs@")),
    # render.py
    "render-unknown-config": Case("render", ("nosuch",)),
    "render-unknown-alias": Case("render", ("linux_64_cuda99.9",)),
    "render-missing-feedstock": Case("render", ("linux_64", "--feedstock", MISSING)),
    "render-bad-config-file": Case("render", ("linux_64", "--feedstock", "@badfs@")),
    # cfep03_bundle.py
    "cfep03-unknown-config": Case("cfep03-bundle", ("nosuch",)),
    "cfep03-missing-expected": Case("cfep03-bundle", ("--expected", MISSING)),
    "cfep03-malformed-expected": Case("cfep03-bundle", ("--expected", f"{BAD}/outputs.json")),
    "cfep03-expected-not-a-list": Case("cfep03-bundle", ("--expected", f"{BAD}/object.json")),
    "cfep03-expected-of-junk": Case("cfep03-bundle", ("--expected", f"{BAD}/junk.json")),
    "cfep03-bad-config-file": Case("cfep03-bundle", ("--feedstock", "@badfs@")),
    # check_patches.py
    "check_patches-missing-wheel": Case("check-patches", ("--wheel", MISSING + ".whl")),
    "check_patches-not-a-zip": Case(
        "check-patches", ("--wheel", f"{BAD}/torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl")
    ),
    # list_wheel_files.py
    "list_wheel_files-missing-wheel": Case("list-wheel-files", (MISSING + ".whl",)),
    "list_wheel_files-not-a-zip": Case(
        "list-wheel-files", (f"{BAD}/torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl",)
    ),
    "list_wheel_files-unwritable-output": Case(
        "list-wheel-files", ("@wheel@", "-o", f"{MISSING}/listing.txt")
    ),
    # upstream_versions.py
    "upstream_versions-missing-source": Case("upstream-versions", (MISSING,)),
    "upstream_versions-empty-source": Case("upstream-versions", (f"{BAD}/empty",)),
    "upstream_versions-missing-feedstock": Case(
        "upstream-versions", (f"{BAD}/empty", "--feedstock", MISSING)
    ),
    # bump_version.py
    "bump_version-malformed-version": Case("bump", ("2.15", "--offline")),
    "bump_version-unknown-platform": Case("bump", ("99.0.0", "--platforms", "nosuch")),
    "bump_version-nothing-cached": Case("bump", ("99.0.0", "--offline", "--cache", f"{BAD}/empty")),
    "bump_version-missing-feedstock": Case("bump", ("99.0.0", "--offline", "--feedstock", MISSING)),
    # bench_cache.py
    "bench_cache-missing-cache": Case("bench-cache", (MISSING,)),
    "bench_cache-malformed-cache": Case("bench-cache", (f"{BAD}/CMakeCache.txt",)),
    "bench_cache-bad-repeat": Case("bench-cache", ("--repeat", "many")),
    "bench_cache-zero-repeat": Case("bench-cache", ("--repeat", "0")),
    # bench_extra_python.py
    "bench_extra_python-unknown-python": Case("bench-extra-python", ("--pythons", "2.7,2.8")),
    # demo_megabuild.py
    "demo_megabuild-unknown-python": Case("demo-megabuild", ("--pythons", "2.7")),
    "demo_megabuild-unknown-config": Case("demo-megabuild", ("--config", "nosuch")),
    # run_cross_checks.py and the lint step it runs in its environment
    "run_cross_checks-missing-sources": Case("cross-check", ("--sources", MISSING)),
    "run_cross_checks-empty-sources": Case("cross-check", ("--sources", f"{BAD}/empty")),
    "run_cross_checks-unknown-source": Case("cross-check", ("--ref", "nosuch=1.0")),
    "run_cross_checks-ref-not-a-version": Case("cross-check", ("--ref", "conda=main")),
    "run_cross_checks-missing-python": Case("cross-check", ("--python", MISSING)),
    "smithy_lint-missing-pinning": Case("smithy-lint", ("--pinning", MISSING)),
    # rehearse.py: both refused before any download
    "rehearse-work-not-empty": Case("rehearse", ("--work", BAD)),
    "rehearse-not-enough-disk": Case("rehearse", ("--work", f"{BAD}/new", "--min-free-gb", "1000000")),
    # the command itself
    "feedstock-unknown-command": Case("", ("nosuch",)),
    # build-locally.py and build-all
    "build-locally-unknown-config": Case(BUILD_LOCALLY, ("nosuch",)),
    "build-locally-bad-flag": Case(BUILD_LOCALLY, ("--no-such-flag",)),
    "build_all-unknown-config": Case("build-all", ("nosuch",)),
    "build_all-missing-build-locally": Case("build-all", ("linux_64", "--build-locally", MISSING)),
}


def _params() -> list[object]:
    params: list[object] = []
    for key, value in CASES.items():
        case, marks = (value[0], [value[1]]) if isinstance(value, tuple) else (value, [])
        params.append(pytest.param(case, id=key, marks=marks))
    return params


def _wheel(root: Path) -> Path:
    wheel = root / "torch-2.13.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("torch/__init__.py", "")
    return wheel


@pytest.mark.parametrize("case", _params())
def test_bad_input_gives_one_error_line(case: Case, tmp_path: Path) -> None:
    bad = _bad_files(tmp_path / "bad")
    substitutions = {
        BAD: str(bad["empty-dir"].parent),
        "@badfs@": str(_feedstock_with_bad_config(tmp_path / "badfs")) if "@badfs@" in case.args else "",
        "@wheel@": str(_wheel(tmp_path)) if "@wheel@" in case.args else "",
    }
    args = []
    for arg in case.args:
        for placeholder, value in substitutions.items():
            arg = arg.replace(placeholder, value)
        args.append(arg)
    # cwd: an empty directory, so nothing relies on being run from the checkout
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    proc = subprocess.run(
        case.argv(args),
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
    )
    stderr = proc.stderr.strip()
    assert proc.returncode != 0, f"exit 0 for bad input; stdout: {proc.stdout[-500:]}"
    assert "Traceback" not in stderr, stderr
    last = stderr.splitlines()[-1] if stderr else ""
    assert re.match(rf"{re.escape(case.prog)}: error: \S", last), stderr
    assert len(stderr) < MAX_STDERR, stderr
    assert not (workdir.exists() and any(workdir.iterdir())), "bad input left files behind"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full on this system")
def test_a_full_disk_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    # /dev/full answers every write with ENOSPC, the error a rehearsal met on a full CI disk.
    from megabuild.errors import run_main

    def main(argv: object) -> int:
        with open("/dev/full", "wb") as out:
            out.write(b"x" * 65536)
        return 0

    assert run_main("feedstock rehearse", main, []) == 1
    err = capsys.readouterr().err
    assert err == "feedstock rehearse: error: No space left on device\n", err  # a write names no file

    def a_bug(argv: object) -> int:
        raise FileNotFoundError(2, "No such file or directory", "/nowhere")

    with pytest.raises(FileNotFoundError):  # only a full disk is the machine's state, not a bug
        run_main("feedstock rehearse", a_bug, [])
