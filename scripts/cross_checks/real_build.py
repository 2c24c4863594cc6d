#!/usr/bin/env python3
"""Build the real ``recipe/`` with the real conda-build, offline, and hold the harness to it.

    python scripts/cross_checks/real_build.py --work DIR [--config cpu|cuda ...]

Runs in the cross-check environment (``run_cross_checks.py`` calls it beside render, rerender and
lint; it needs conda-build, which the main suite never does). For each config:

1. the stand-in channel (:func:`harness.stand_ins.make_channel`) for every requirement the
   rendered recipe names;
2. a copy of ``recipe/`` changed only where the real thing cannot exist here (:data:`CHANGES`,
   each made by :func:`prepare_recipe`), and the config with its ``python`` list cut to two
   Pythons (:func:`harness.conda_build.restrict_pythons`);
3. ``conda-build`` (``conda_build_offline.py``) over it: solves, every script, post-processing,
   ``.conda`` writing and the test phase;
4. the harness (:func:`harness.conda_build.run_config`) over the same config and Pythons, and
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
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[2] / "recipe")]

from feedstock.errors import FeedstockError, UsageError, run_main
from feedstock.paths import RECIPE, REPO, TESTS
from harness.pythons import CPython, find_cpythons, find_freethreaded

CONFIGS = {
    "cpu": "linux_64_blas_implgenericc_compiler_version14c_stdlib_version2.17cuda_compiler_versionNonecxx_compiler_version14.yaml",
    "cuda": "linux_64_blas_implgenericc_compiler_version14c_stdlib_version2.28cuda_compiler_version13.0cxx_compiler_version14.yaml",
}
MEGABUILD_PYTHON = "3.12"
LICENSE_FILES = ("LICENSE", "NOTICE")  # meta.yaml's about/license_file
OFFLINE = Path(__file__).resolve().parent / "conda_build_offline.py"
EXPLAINED = TESTS / "data" / "binary-check-harness.json"
# test commands of the rendered recipe left out here: (a text the command contains, why)
LEFT_OUT_TESTS: tuple[tuple[str, str], ...] = (
    ("megabuild upstream-tests run", "runs upstream's test files, which the miniature does not have"),
)
# what prepare_recipe changes in the copy of recipe/ (reported with every run)
CHANGES = (
    "source: LICENSE and NOTICE added to the miniature's tarball (about/license_file; upstream has them)",
    "source: url -> the miniature (tests/fixture/minitorch) as a tarball, sha256 its own",
    "source: patches -> only those the miniature carries the context of (harness.source.MIRRORED_PATCHES)",
    "test: commands in LEFT_OUT_TESTS removed",
    "test: `megabuild check-binaries` given --explained (the harness's stand-ins, as harness.recipe_tests does)",
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
    from harness.source import FIXTURE

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


def prepare_recipe(dest: Path, tarball: Path, sha256: str) -> Path:
    """A copy of ``recipe/`` with :data:`CHANGES` made; returns its directory."""
    from harness.source import MIRRORED_PATCHES

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
        elif stripped.startswith("- patches/") and stripped.split()[1].split("/")[1] not in MIRRORED_PATCHES:
            continue
        elif any(text in line for text, _ in LEFT_OUT_TESTS):
            continue
        elif "megabuild check-binaries" in line:
            body, sep, selector = line.partition("  # [")
            line = f"{body} --explained megabuild/{EXPLAINED.name}" + (f"  # [{selector}" if sep else "")
        lines.append(line)
    (dest / "meta.yaml").write_text("\n".join(lines) + "\n")
    return dest


def external_specs(config: Path) -> list[str]:
    """Every requirement the rendered recipe names that is not one of its own outputs."""
    from harness.conda_build import render

    outputs, top, _ = render(config)
    ours = {o.name for o in outputs} | {"libtorch-cuda-linalg", "libtorch", "pytorch"}
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


def run_conda_build(recipe: Path, config: Path, channel: Path, croot: Path, log: Path) -> int:
    cmd = [
        sys.executable,
        str(OFFLINE),
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
        return subprocess.run(
            cmd, env=conda_build_env(croot.parent), stdout=fh, stderr=subprocess.STDOUT, check=False
        ).returncode


def build_config(name: str, work: Path, pythons: Sequence[CPython]) -> dict[str, object]:
    from harness import cuda_toolchain
    from harness.conda_build import find_config, restrict_pythons, variant_value
    from harness.stand_ins import make_channel

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
    croot = work / "croot"
    if croot.exists():
        shutil.rmtree(croot)
    code = run_conda_build(recipe, config, channel, croot, work / "conda-build.log")
    result: dict[str, object] = {
        "config": CONFIGS[name],
        "pythons": tags,
        "conda_build_exit": code,
        "seconds": round(time.monotonic() - t0),
    }
    say(f"{name}: conda-build exit {code} in {result['seconds']} s")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--config", action="append", choices=sorted(CONFIGS), help="default: cpu and cuda")
    ns = p.parse_args(argv)
    if shutil.which("conda-build", path=str(Path(sys.executable).parent)) is None:
        raise UsageError(f"{sys.executable} has no conda-build next to it: run this in the cross-check venv")
    pythons = pick_pythons()
    results = {}
    for name in ns.config or ["cpu", "cuda"]:
        results[name] = build_config(name, ns.work.resolve() / name, pythons)
    print(json.dumps(results, indent=1))
    return 0 if all(r["conda_build_exit"] == 0 for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(run_main("real_build.py", main))
