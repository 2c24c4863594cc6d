#!/usr/bin/env python3
"""Build the real ``recipe/`` with the real conda-build, offline, and hold the harness to it.

    python -m feedstock real-build --work DIR [--config cpu|cuda ...]

Runs in the cross-check environment (``run_cross_checks.py`` calls it beside render, rerender and
lint; it needs conda-build, which the main suite never does). For each config:

1. the stand-in channel (:func:`feedstock.conda_build_standin.stand_ins.make_channel`) for every requirement
the
   rendered recipe names;
2. a copy of ``recipe/`` changed only where the real thing cannot exist here (:data:`CHANGES`,
   each made by :func:`prepare_recipe`), and the config with its ``python`` list cut to two
   Pythons (:func:`feedstock.conda_build_standin.conda_build.restrict_pythons`);
3. ``conda-build`` (``conda_build_offline.py``) over it: solves, every script, post-processing,
   ``.conda`` writing and the test phase;
4. the harness (:func:`feedstock.conda_build_standin.conda_build.run_config`) over the same config and
Pythons, and
   :func:`feedstock.package_compare.compare` of the two package sets.

Exits 1 when a build fails or the comparison finds a difference that is not a known one
(``feedstock.package_compare.KNOWN``).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from megabuild.model import LIBTORCH, LINALG, PYTORCH

from feedstock.conda_build_standin.cpythons import CPython, find_cpythons, find_freethreaded
from feedstock.errors import FeedstockError, UsageError
from feedstock.package_compare import KNOWN, PackageView, compare, view_from_dir
from feedstock.paths import RECIPE, TESTS

PROG = "feedstock real-build"

# build-locally.py's aliases of the two configs (the names a rerender gives them change with its keys)
CONFIGS = {"cpu": "linux_64_cpu_generic", "cuda": "linux_64_cuda13.0_generic"}
MEGABUILD_PYTHON = "3.12"
LICENSE_FILES = ("LICENSE", "NOTICE")  # meta.yaml's about/license_file
OFFLINE = "feedstock.cross_checks.conda_build_offline"  # run with -m in the cross-check venv
EXPLAINED = TESTS / "data" / "binary-check-harness.json"
# test commands of the rendered recipe left out here: (a text the command contains, why)
LEFT_OUT_TESTS: tuple[tuple[str, str], ...] = (
    ("megabuild upstream-tests run", "runs upstream's test files, which the miniature does not have"),
    (
        "include/torch/csrc/api/include/torch/torch.h",
        "the miniature installs its header as include/torch/torch.h",
    ),
    (
        "cmake --build cmake_test/build",
        "compiles cmake_test/main.cpp, whose ATen/Parallel.h the miniature lacks (the configures run)",
    ),
    ("torch.tensor(", "the miniature has no tensors"),
    ("torch.ones(3, requires_grad", "the miniature has no autograd"),
    ("torch.distributed", "the miniature has no torch.distributed"),
    ("torch.backends.cudnn", "the miniature links no cuDNN"),
    ("torch.utils.cpp_extension", "the miniature has no torch.utils.cpp_extension"),
)
# what prepare_recipe changes in the copy of recipe/ (reported with every run)
CHANGES = (
    "source: LICENSE and NOTICE added to the miniature's tarball (about/license_file; upstream has them)",
    "source: url -> the miniature (tests/fixture/minitorch) as a tarball, sha256 its own",
    "source: patches -> only those the miniature carries the context of "
    "(feedstock.conda_build_standin.source.MIRRORED_PATCHES)",
    "test: commands in LEFT_OUT_TESTS removed",
    "build.sh, install_*.sh: a first line writing the script's environment to a file (record_env)",
    "test: `megabuild check-binaries` given --explained (as feedstock.conda_build_standin.recipe_tests does)",
)


def say(message: str) -> None:
    print(f"real_build: {message}", flush=True)


def pick_pythons() -> list[CPython]:
    """The megabuild Python and one other: the free-threaded one when provisioned, else the newest."""
    found = {c.tag: c for c in find_cpythons()}
    if MEGABUILD_PYTHON not in found:
        raise FeedstockError(f"no CPython {MEGABUILD_PYTHON} here (the megabuild Python)")
    other = find_freethreaded()
    if other is None:
        others = [c for t, c in found.items() if t != MEGABUILD_PYTHON]
        if not others:
            raise FeedstockError("no second CPython here")
        other = others[-1]
    return [found[MEGABUILD_PYTHON], other]


def make_tarball(dest: Path) -> tuple[Path, str]:
    """The miniature as a release tarball (``pytorch-v<version>/...``, reproducible); its sha256."""
    from feedstock.conda_build_standin.source import FIXTURE

    tarball = dest / "pytorch-miniature.tar.gz"
    dest.mkdir(parents=True, exist_ok=True)

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        parts = Path(info.name).parts
        if "__pycache__" in parts or "build" in parts[1:2] or info.name.endswith(".egg-info"):
            return None
        info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
        return info

    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(FIXTURE, arcname="pytorch-miniature", filter=clean)
        for name in LICENSE_FILES:  # about/license_file: upstream's tarball has them at its root
            text = f"{name} of the miniature PyTorch (stand-in for upstream's {name})\n".encode()
            info = tarfile.TarInfo(f"pytorch-miniature/{name}")
            info.size, info.mode = len(text), 0o644
            tar.addfile(info, io.BytesIO(text))
    return tarball, hashlib.sha256(tarball.read_bytes()).hexdigest()


# added by real_build.py: the environment this script saw, and the host's python record (its name)
ENV_DUMP = (
    '{{ env -0; printf "HOST_PYTHON=%s\\0" '
    '"$(cd "$PREFIX/conda-meta" 2>/dev/null && ls python-[0-9]*.json 2>/dev/null)"; }}'
    ' > "{dir}/$(date +%s%N).env"'
)
SCRIPTS = ("build.sh", "install_libtorch.sh", "install_linalg.sh")


def record_env(recipe: Path, env_dir: Path) -> None:
    """Each script of the copy first writes its environment into ``env_dir`` (one file per run)."""
    env_dir.mkdir(parents=True, exist_ok=True)
    for name in SCRIPTS:
        script = recipe / name
        first, _, rest = script.read_text().partition("\n")
        script.write_text(f"{first}\n{ENV_DUMP.format(dir=env_dir)}\n{rest}")


def read_envs(env_dir: Path) -> list[tuple[str, dict[str, str]]]:
    """(label, environment) of each script run, in the order they ran (``pytorch-3.13`` & co.)."""
    runs = []
    for path in sorted(env_dir.glob("*.env"), key=lambda p: int(p.stem)):
        env = dict(item.split("=", 1) for item in path.read_text().split("\0") if "=" in item)
        label = env.get("PKG_NAME", "?")
        if label == PYTORCH:  # conda-build exports no `python`, and its SP_DIR may be another's
            label += "-" + host_python(env)
        if "with_magma" in env and label == LINALG:
            label += f"-magma={env['with_magma']}"
        runs.append((label, env))
    return runs


def host_python(env: Mapping[str, str]) -> str:
    """``3.13`` / ``3.13t`` from the host's python record name (``python-3.13.5-h0_cp313t.json``);
    the harness's host env has none: its ``SP_DIR`` (``lib/python3.13t/site-packages``) tells."""
    record = env.get("HOST_PYTHON", "")
    if record.startswith("python-"):
        _, version, build = record.removesuffix(".json").split("-", 2)
        return ".".join(version.split(".")[:2]) + ("t" if build.endswith("t") else "")
    return Path(env.get("SP_DIR", "python?")).parent.name.removeprefix("python")


def _left_out(stripped: str, line: str, mirrored: Sequence[str]) -> bool:
    """A patch the miniature lacks the context of, or a test command of LEFT_OUT_TESTS."""
    if stripped.startswith("- patches/") and stripped.split()[1].split("/")[1] not in mirrored:
        return True
    return any(text in line for text, _ in LEFT_OUT_TESTS)


def prepare_recipe(dest: Path, tarball: Path, sha256: str) -> Path:
    """A copy of ``recipe/`` with :data:`CHANGES` made; returns its directory."""
    from feedstock.conda_build_standin.source import MIRRORED_PATCHES

    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(RECIPE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(EXPLAINED, dest / "megabuild" / EXPLAINED.name)
    lines = []
    for line in (dest / "meta.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped.startswith("url: https://github.com/pytorch/pytorch/"):
            line = f"{line[: line.index('url:')]}url: {tarball.as_uri()}"
        elif stripped.startswith("sha256:") and len(stripped.split()) == 2:
            line = f"{line[: line.index('sha256:')]}sha256: {sha256}"
        elif _left_out(stripped, line, MIRRORED_PATCHES):
            continue
        elif "megabuild check-binaries" in line and stripped.startswith("- "):
            body, sep, selector = line.partition("  # [")
            line = f"{body} --explained megabuild/{EXPLAINED.name}" + (f"  # [{selector}" if sep else "")
        lines.append(line)
    (dest / "meta.yaml").write_text("\n".join(lines) + "\n")
    return dest


def external_specs(config: Path) -> list[str]:
    """Every requirement the rendered recipe names that is not one of its own outputs."""
    from feedstock.conda_build_standin.conda_build import render

    outputs, top, _ = render(config)
    ours = {o.name for o in outputs} | {LINALG, LIBTORCH, PYTORCH}
    specs = [str(s) for env in ("build", "host") for s in (top.get("requirements") or {}).get(env) or []]
    for out in outputs:
        for env in ("build", "host", "run", "run_constrained"):
            specs += [str(s) for s in out.requirements.get(env) or [] if env != "run_constrained"]
        specs += list(out.depends) + [str(s) for s in (out.test or {}).get("requires") or []]
    return [s for s in dict.fromkeys(specs) if s.split()[0] not in ours]


def conda_build_env(work: Path) -> dict[str, str]:
    condarc = work / "condarc"
    condarc.write_text(
        f"channels: []\nsolver: classic\npkgs_dirs:\n  - {work / 'pkgs'}\nauto_update_conda: false\n"
    )
    keep = ("PATH", "HOME", "LANG", "TERM", "FEEDSTOCK_FREETHREADED_PYTHON", "FEEDSTOCK_CUDA_TOOLCHAIN")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "CONDARC": str(condarc),
            "CONDA_PKGS_DIRS": str(work / "pkgs"),
            "CONDA_SOLVER": "classic",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
        }
    )
    return env


def run_conda_build(
    recipe: Path, config: Path, channel: Path, croot: Path, log: Path, cuda: str | None = None
) -> int:
    cmd = [
        sys.executable,
        "-m",
        OFFLINE,
        "build",
        str(recipe),
        "-m",
        str(config),
        "--override-channels",
        "-c",
        channel.as_uri(),
        "--croot",
        str(croot),
        "--no-anaconda-upload",
        "--error-overlinking",
    ]
    say(f"conda-build: {' '.join(cmd[1:])} (log {log})")
    with log.open("w") as fh:
        env = conda_build_env(croot.parent)
        if cuda is not None:  # the test envs of a CUDA build need __cuda (pytorch depends on it); no GPU here
            env["CONDA_OVERRIDE_CUDA"] = cuda
        return subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=False).returncode


def build_config(name: str, work: Path, pythons: Sequence[CPython]) -> dict[str, object]:
    from feedstock.conda_build_standin import cuda_toolchain
    from feedstock.conda_build_standin.conda_build import find_config, restrict_pythons, variant_value
    from feedstock.conda_build_standin.stand_ins import make_channel

    t0 = time.monotonic()
    work.mkdir(parents=True, exist_ok=True)
    config, tags, _ = restrict_pythons(
        find_config(CONFIGS[name]), [c.tag for c in pythons], work / "config.yaml"
    )
    toolchain = cuda_toolchain.find() if name == "cuda" else None
    if name == "cuda" and toolchain is None:
        raise FeedstockError(
            f"no CUDA toolchain here ({cuda_toolchain.TOOLCHAIN_ENV}): the cuda config needs one"
        )
    pairs = [(c, variant_value(c.tag)) for c in pythons if c.tag in tags]
    values = {str(v) for v in __import__("yaml").safe_load(config.read_text())["python"]}
    pairs = [
        (c, next(v for v in values if v.split(".*")[0] == c.short and v.endswith("t") == c.freethreaded))
        for c, _ in pairs
    ]
    channel = work / "channel"
    for stale in (channel, work / "pkgs"):  # conda's package cache is keyed by file name
        if stale.exists():
            shutil.rmtree(stale)
    say(f"{name}: making the stand-in channel ({', '.join(tags)})")
    make_channel(
        channel, work / "stand-ins", pairs, external_specs(config), cache=work / "cache", toolchain=toolchain
    )
    tarball, sha = make_tarball(work / "source")
    recipe = prepare_recipe(work / "recipe", tarball, sha)
    croot, envs = work / "croot", work / "envs"
    for stale in (croot, envs):
        if stale.exists():
            shutil.rmtree(stale)
    record_env(recipe, envs / "conda-build")
    cuda = cuda_toolchain.CUDA_VERSION if toolchain is not None else None
    code = run_conda_build(recipe, config, channel, croot, work / "conda-build.log", cuda)
    seconds = round(time.monotonic() - t0)
    say(f"{name}: conda-build exit {code} in {seconds} s")
    result: dict[str, object] = {
        "config": CONFIGS[name],
        "pythons": tags,
        "conda_build_exit": code,
        "conda_build_seconds": seconds,
    }
    result.update(hold_the_harness(name, work, pythons, recipe, croot, envs))
    return result


def conda_views(files: Sequence[Path], where: Path) -> list[PackageView]:
    """The views of ``.conda`` files (extracted under ``where``)."""
    from conda_package_handling import api as cph
    from megabuild.binaries.elf import read_elf_file

    def elf(path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
        info = read_elf_file(path)
        return info.search_path, info.needed

    views = []
    for conda in files:
        dest = where / conda.name.removesuffix(".conda")
        if dest.exists():
            shutil.rmtree(dest)
        cph.extract(str(conda), dest_dir=str(dest))
        views.append(view_from_dir(dest, elf))
    return views


def hold_the_harness(
    name: str, work: Path, pythons: Sequence[CPython], recipe: Path, croot: Path, envs: Path
) -> dict[str, object]:
    """Run the harness over the same config, Pythons and Python order; compare with conda-build."""
    from feedstock.conda_build_standin.conda_build import run_config

    real_envs = read_envs(envs / "conda-build")
    order = ",".join(label.split("-", 1)[1] for label, _ in real_envs if label.startswith("pytorch-"))
    if sorted(order.split(",")) != sorted(c.tag for c in pythons):  # conda-build stopped early
        order = ""
    linalg = [label for label, _ in real_envs if label.startswith("libtorch-cuda-linalg-")]
    magma_first = linalg[0].endswith("magma=true") if linalg else None  # conda-build's order, too
    harness_recipe = work / "harness-recipe"
    if harness_recipe.exists():
        shutil.rmtree(harness_recipe)
    shutil.copytree(recipe, harness_recipe)
    record_env(harness_recipe, envs / "harness")
    t0 = time.monotonic()
    run = run_config(
        CONFIGS[name],
        work / "harness",
        pythons=pythons,
        recipe_dir=harness_recipe,
        python_order=order or "megabuild-last",
        magma_first=magma_first,
        log=lambda m: say(f"harness: {m}"),
    )
    built = sorted([*(croot / "linux-64").glob("*.conda"), *(croot / "broken").glob("*.conda")])
    ours = conda_views(
        [p.conda_file for p in run.packages.values() if p.conda_file], work / "views" / "harness"
    )
    theirs = conda_views(built, work / "views" / "conda-build")
    unexplained, explained = compare(ours, theirs, KNOWN, (read_envs(envs / "harness"), real_envs))
    for diff, known in explained:
        say(f"{name}: known: {diff} ({known.reason})")
    for diff in unexplained:
        say(f"{name}: DIFFERENCE: {diff}")
    return {
        "harness_seconds": round(time.monotonic() - t0),
        "packages": len(theirs),
        "differences": len(unexplained),
        "known_differences": len(explained),
    }


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="default: cpu and cuda")
    ns = p.parse_args(argv)
    if shutil.which("conda-build", path=str(Path(sys.executable).parent)) is None:
        raise UsageError(f"{sys.executable} has no conda-build next to it: run this in the cross-check venv")
    pythons = pick_pythons()
    results = {}
    for name in ns.config or ["cpu", "cuda"]:
        try:
            results[name] = build_config(name, ns.work.resolve() / name, pythons)
        except FeedstockError as exc:  # the other config still runs; this one fails the check
            say(f"{name}: FAILED: {exc}")
            results[name] = {
                "config": CONFIGS[name],
                "error": str(exc),
                "conda_build_exit": -1,
                "differences": -1,
            }
    print(json.dumps(results, indent=1))
    return 0 if all(r["conda_build_exit"] == 0 and r["differences"] == 0 for r in results.values()) else 1
