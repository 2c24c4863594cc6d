#!/usr/bin/env python
"""Rehearse the recipe on real binaries: an upstream torch wheel through the recipe's own pipeline.

    python -m feedstock rehearse                 # 2.14.1, linux-64 CUDA 13.0 (MKL) config
    python -m feedstock rehearse --version 2.15.0 --work /tmp/rehearsal   # keeps its work dir

Downloads the torch wheel for linux-64 (PyPI's is the CUDA 13.0 build) and every wheel its
METADATA pins for Linux into the shared wheel cache; runs recipe/megabuild's PIPELINE on the
wheel's files in place of `pip install .` (with the recipe's patches where the wheel holds the
patched file); writes real .conda packages with the rendered recipe's metadata; installs pytorch
and pytorch-gpu with py-rattler into a fresh env (stand-ins for every other conda package; the
CUDA runtime wheels' libraries laid out in $PREFIX/lib; the pure-Python dependencies and triton
installed with pip after the solve); runs there every rendered test command that can run without a
GPU, the binary checks and a smoke test; compares with the upstream wheel in a plain venv.
What it proves and what not: docs/rehearsal.md. Exit status 1 when anything failed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.model import LIBTORCH, LINALG, PYTORCH, PYTORCH_GPU
from megabuild.pipeline.description import Phase

from feedstock import patch_check
from feedstock.channel import index_record, stand_in_records
from feedstock.configs import list_configs, resolve_configs
from feedstock.errors import FeedstockError
from feedstock.paths import RECIPE, REPO
from feedstock.rehearsal import checks, compare, cuda_layout, wheels
from feedstock.rehearsal.linking import link_files
from feedstock.rehearsal.patches import patched_members
from feedstock.rehearsal.tree import DerivedWheel, run_pip
from feedstock.render import RenderedOutput, render_config
from feedstock.split_check.layout import Layout, conda_rows
from feedstock.split_check.platforms import BY_NAME
from feedstock.split_check.python_builds import PythonBuild
from feedstock.split_check.recipe import pick
from feedstock.split_check.report import Finding, Level
from feedstock.split_check.split_run import Run, run_findings
from feedstock.split_check.split_spec import SplitSpec
from feedstock.split_check.tree_build import Places, SplitStepFailed, files_under, packed

PROG = "feedstock rehearse"

# The most the work dir held in one run of 2.14.1 (7.9 GB: the CUDA runtime files 3.4, the env 2.3,
# the packages 1.2), with room for inductor's cache and a larger next release.
MIN_FREE_GB = 10

CONFIG = "linux_64_cuda13.0_mkl"  # upstream's x86_64 wheels link MKL statically: the MKL config
CUDA = "13.0"
PY = wheels.PYTHON


def _say(line: str) -> None:
    print(line, flush=True)


def _outputs(config: str) -> tuple[Path, list[RenderedOutput]]:
    found = resolve_configs(config, list_configs(REPO))
    if len(found) != 1:
        raise FeedstockError(f"config {config}: {len(found)} matches, expected one")
    return found[0].path, render_config(found[0].path, RECIPE)


def _rendered_patches(config: Path, recipe: Path) -> list[Path]:
    """The patches the config's render selects (``source.patches``, selectors applied), in the
    recipe's order: what conda-build applies to the source of this config."""
    from feedstock.conda_build_standin.conda_build import render

    _, top, _ = render(config, recipe)
    return [recipe / str(p) for p in (top.get("source") or {}).get("patches") or []]


def _package(out: RenderedOutput, root: Path, files: list[str]) -> Any:
    from feedstock.conda_build_standin.packaging import Package

    return Package(index_record(out), root, sorted(files))


def split(
    args: argparse.Namespace, downloads: wheels.Downloads, work: Path
) -> tuple[Layout, Places, list[str], list[Finding]]:
    """The split procedure (``feedstock.split_check.split_run``) on the wheel the build would have packed:
    the recipe's PIPELINE with its rendered file tests and the one-package-per-file check (the
    report's lines, and the procedure's findings)."""
    from feedstock.conda_build_standin.prefix import pick_python

    config, outputs = _outputs(args.config)
    patches = _rendered_patches(config, args.recipe)
    replaced, fates = patched_members(downloads.torch, patches)
    lines = [f"patch {fate.line()}" for fate in fates]
    platform = BY_NAME["linux-64"]
    source = DerivedWheel(downloads.torch, pick_python(PY).executable, replaced)
    spec = SplitSpec(args.recipe / "split_spec.json", platform.subdir)
    rows = conda_rows(platform, source.listed())
    layout = Layout(platform, source, rows, PythonBuild(PY), True, args.config, tuple(outputs), spec)
    places = Places(work / "split", layout)
    t0 = time.monotonic()
    try:
        results = Run(layout, places, say=_say).all_scripts()
    except SplitStepFailed as exc:
        raise FeedstockError(f"the split stopped: {exc}") from None
    lines.append(f"pipeline: {time.monotonic() - t0:.0f}s")
    findings = run_findings(layout, places, results)
    return layout, places, lines + [_finding_line(f) for f in findings], findings


def _finding_line(finding: Finding) -> str:
    return f"{'FAIL split' if finding.level is Level.ACTION else 'split'}: {finding.text}"


def build_packages(layout: Layout, places: Places, work: Path) -> list[Any]:
    """One .conda per rendered output, from what the split procedure left (``packed``): libtorch
    and linalg from their conda-meta records (each linalg variant from its own prefix), pytorch
    from the rest of its prefix; pytorch-gpu empty."""
    from feedstock.conda_build_standin.packaging import package_from_prefix

    try:
        packs = packed(layout, places)
    except MegabuildError as exc:  # a package's conda-meta record is missing or unreadable
        raise FeedstockError(str(exc)) from None
    pkgs = []
    for pack in packs:
        python = layout.python if pack.run.phase is Phase.PYTORCH else None
        out = pick(layout.outputs, pack.run.phase.output, python=python, linalg=pack.run.linalg_variant)
        if out is None:
            raise FeedstockError(f"no one rendered {pack.run.phase.output} for {pack.run} in {layout.config}")
        root = work / "pkgs" / out.dist
        if pack.run.phase is Phase.PYTORCH:  # conda-build's post-processing: relative links, RPATHs
            pkgs.append(package_from_prefix(index_record(out), pack.root, pack.files, root))
            continue
        link_files(pack.root, pack.files, root)  # a directory of its own: build_conda writes info/
        pkgs.append(_package(out, root, list(pack.files)))
    gpu = work / "pkgs" / PYTORCH_GPU
    gpu.mkdir(parents=True, exist_ok=True)
    empty = pick(layout.outputs, PYTORCH_GPU)
    if empty is None:
        raise FeedstockError(f"no one rendered {PYTORCH_GPU} in {layout.config}")
    pkgs.append(_package(empty, gpu, []))
    return pkgs


def make_env(
    pkgs: list[Any], downloads: wheels.Downloads, work: Path
) -> tuple[Path, dict[str, str], list[str]]:
    """Channel (our packages + stand-ins), solve, install; then NVIDIA's libraries and pip's deps."""
    from feedstock.conda_build_standin import channel
    from feedstock.conda_build_standin.packaging import (
        build_conda,
        empty_package,
        numpy_package,
        python_package,
    )
    from feedstock.conda_build_standin.prefix import pick_python

    chan = work / "channel"
    cpython = pick_python(PY)
    python = python_package(cpython, work / "stand-ins")
    for executable in sorted((python.root / "bin").glob("python*")):
        if executable.is_file() and not executable.is_symlink():
            conda_python_rpath(executable, cpython.root / "lib")
    real = [python, numpy_package(cpython, work / "stand-ins")]
    # the harness's stub libmagma (tests/fixture/libmagma), as in the end-to-end run: the magma
    # variant's test looks for $PREFIX/lib/libmagma.so (upstream's linalg library has MAGMA inside)
    from feedstock.conda_build_standin.conda_build import MAGMA_FIXTURE
    from feedstock.conda_build_standin.packaging import magma_packages

    real += list(magma_packages(MAGMA_FIXTURE, work / "stand-ins", dict(os.environ)))
    for pkg in pkgs:
        build_conda(pkg, chan)
    for rec in stand_in_records([p.record for p in pkgs], "linux-64", []):
        if rec["name"] not in ("python", "numpy", "libmagma", "libmagma-devel"):
            build_conda(empty_package(rec, work / "stand-ins"), chan)
    for pkg in real:
        build_conda(pkg, chan)
    channel.index(chan)
    prefix = work / "env"
    solved = channel.create_env(
        chan, [PYTORCH, PYTORCH_GPU, f"python {PY}.*"], prefix, work / "rattler-cache", {"__cuda": CUDA}
    )
    lines = [f"solved: {', '.join(f'{k}={v}' for k, v in sorted(solved.items()) if k in _OURS)}"]
    nvidia = [w for w in downloads.runtime_wheels() if w.name.startswith("nvidia_")]
    nbytes = cuda_layout.lay_out(nvidia, work / "cuda-files")
    link_cuda(work, prefix)
    lines.append(
        f"CUDA runtime wheels in $PREFIX/lib and {cuda_layout.TARGET_DIR}: "
        f"{len(nvidia)} wheels, {nbytes / 2**30:.1f} GiB"
    )
    pure = [w for w in downloads.runtime_wheels() if not w.name.startswith(("nvidia_", "cuda_"))]
    pip_after_the_solve(prefix / "bin" / "python", pure)
    lines.append(f"pip after the solve: {', '.join(w.name.split('-')[0] for w in pure)}")
    return prefix, solved, lines


def pip_after_the_solve(python: Path, wheels: Sequence[Path]) -> None:
    """pip into the env (``python``: its interpreter), then the pure-Python wheels and triton, which
    have no conda stand-ins; pip failing (a full disk) is a ``PipError``, one line."""
    run_pip(python, ["ensurepip", "--default-pip"])
    run_pip(python, ["pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                     *map(str, wheels)])  # fmt: skip


_OURS = (LIBTORCH, LINALG, PYTORCH, PYTORCH_GPU)


def conda_python_rpath(executable: Path, original_lib: Path) -> None:
    """conda-forge's python carries DT_RPATH ``$ORIGIN/../lib`` (conda-build links with
    --disable-new-dtags): upstream's libraries, whose own DT_RPATH names only ``$ORIGIN`` and
    ``../../nvidia/...``, find ``$PREFIX/lib`` through it. The pyenv build in the stand-in has a
    RUNPATH to its own lib dir; give the stand-in's copy conda's RPATH (and keep that dir)."""
    copy = executable.with_name(executable.name + ".copy")
    shutil.copy2(executable, copy)  # never write through a hard link to pyenv's binary
    subprocess.run(
        ["patchelf", "--force-rpath", "--set-rpath", f"$ORIGIN/../lib:{original_lib}", str(copy)],
        check=True,
        capture_output=True,
    )
    copy.replace(executable)


def test_env(prefix: Path, home: Path) -> dict[str, str]:
    from feedstock.conda_build_standin.compiler_activation import activation_env, install_binutils

    install_binutils(prefix, "linux-64")
    install_cuobjdump(prefix)
    act = activation_env(
        "linux-64",
        prefix=prefix,
        build_prefix=prefix,
        src_dir=home,
        pkg_name=PYTORCH,
        pkg_version="0",
        cuda=True,
    )
    return {
        **act,
        "PATH": f"{prefix / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PREFIX": str(prefix),
        "SP_DIR": str(prefix / f"lib/python{PY}/site-packages"),
        "PY_VER": PY,
        "SHLIB_EXT": ".so",
        "PYTHON": str(prefix / "bin" / "python"),
        "CMAKE_GENERATOR": "Ninja",
        "PATH_TOOLS": "",
        # inductor's cache (by default /tmp/torchinductor_<user>, kept forever) in the work dir:
        # removed with it, and no run reuses another's compiled kernels
        "TORCHINDUCTOR_CACHE_DIR": str(home / "torchinductor"),
    } | {"PATH": f"{prefix / 'bin'}:{_tool_path()}:/usr/bin:/bin"}


def install_cuobjdump(prefix: Path) -> None:
    """The test sections' ``cuda-cuobjdump`` (libtorch's binary check lists its fatbin): the
    harness's CUDA 13 toolchain has it, put where conda's package does (``$PREFIX/bin``)."""
    from feedstock.conda_build_standin import cuda_toolchain

    tool = prefix / "bin" / "cuobjdump"
    toolchain = cuda_toolchain.find()
    if toolchain is not None and not tool.exists():
        tool.symlink_to(toolchain.cuobjdump)


def _tool_path() -> str:
    dirs = []
    for tool in ("cmake", "ninja", "gcc", "g++", "patch"):
        found = shutil.which(tool)
        if found:
            dirs.append(str(Path(found).resolve().parent))
    return ":".join(dict.fromkeys(dirs))


def link_cuda(work: Path, prefix: Path) -> None:
    """The CUDA files laid out once, linked into an env as conda links a package's files."""
    link_files(work / "cuda-files", files_under(work / "cuda-files"), prefix)


def output_env(out: RenderedOutput, main: Path, work: Path) -> Path:
    """The env an output's tests run in, as conda-build makes one per output: the output and its
    dependencies only (libtorch's test checks that no libtorch_python is in $PREFIX/lib, which
    pytorch's link-back adds). pytorch and pytorch-gpu share the main env (pytorch-gpu is empty)."""
    from feedstock.conda_build_standin import channel
    from feedstock.conda_build_standin.recipe_tests import own_output_requires

    if out.name in (PYTORCH, PYTORCH_GPU):
        return main
    prefix = work / f"env-{out.name}-{out.build_string}"
    # the test requirements that are this recipe's own outputs (the other ones: stand-ins on PATH)
    own = own_output_requires(out.test)
    channel.create_env(work / "channel", [f"{out.name} =={out.version} {out.build_string}", *own], prefix,
                       work / "rattler-cache", {"__cuda": CUDA})  # fmt: skip
    link_cuda(work, prefix)
    return prefix


def run_checks(prefix: Path, pkgs: list[Any], layout: Layout, work: Path) -> list[checks.Outcome]:
    (work / "home").mkdir(exist_ok=True)
    wanted = {p.dist for p in pkgs}
    outcomes: list[checks.Outcome] = []
    for out in layout.outputs:
        if out.dist not in wanted or not out.test:
            continue
        env = test_env(output_env(out, prefix, work), work / "home")
        outcomes += checks.rendered_tests(f"{out.name}-{out.build_string}", out.test, env, work)
    return outcomes


def _enough_disk(work: Path, need_gb: float) -> None:
    """Stop before the first byte when the disk cannot hold a run (not half-way, gigabytes in)."""
    existing = next(p for p in (work, *work.parents) if p.exists())
    free = shutil.disk_usage(existing).free / 1e9
    if free < need_gb:
        raise FeedstockError(
            f"{existing} has {free:.1f} GB free; the rehearsal needs about {need_gb:g} GB (--min-free-gb)"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--version", default=patch_check.TORCH_VERSION, help="upstream torch version (default %(default)s)"
    )
    parser.add_argument(
        "--config", default=CONFIG, help="the .ci_support config whose metadata the packages get"
    )
    parser.add_argument(
        "--recipe", type=Path, default=RECIPE, help="recipe dir (a planted copy in the tests)"
    )
    parser.add_argument("--work", type=Path, help="work dir (default: a temporary one, removed)")
    parser.add_argument("--offline", action="store_true", help="use the wheel cache only; fail if it misses")
    parser.add_argument("--no-compare", action="store_true", help="skip the plain-pip venv comparison")
    parser.add_argument(
        "--min-free-gb", type=float, default=MIN_FREE_GB, metavar="GB",
        help="free disk the work dir needs before the run starts (default %(default)s)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    t_all = time.monotonic()
    cache = patch_check.cache_dir()
    extras = ["nvcc"]  # the test sections' cuda-nvcc_linux-64, as the wheel's own toolkit pin
    if args.work is not None and args.work.exists() and any(args.work.iterdir()):
        raise FeedstockError(f"work dir {args.work} is not empty")
    _enough_disk(args.work or Path(tempfile.gettempdir()), args.min_free_gb)
    downloads = (
        wheels.cached(args.version, cache) if args.offline else wheels.download(args.version, cache, extras)
    )
    if downloads is None:
        raise FeedstockError(f"no cached wheels of torch {args.version} in {cache} (run without --offline)")
    work = args.work or Path(tempfile.mkdtemp(prefix="rehearsal-"))
    work.mkdir(parents=True, exist_ok=True)
    report: list[str] = [f"torch {args.version}: {downloads.torch.name}; config {args.config}"]
    try:
        layout, places, lines, findings = split(args, downloads, work)
        report += lines
        split_actions = [f for f in findings if f.level is Level.ACTION]
        pkgs = build_packages(layout, places, work)
        t0 = time.monotonic()
        prefix, _solved, lines = make_env(pkgs, downloads, work)
        report += [*lines, f"env: {time.monotonic() - t0:.0f}s"]
        outcomes = run_checks(prefix, pkgs, layout, work)
        env = test_env(prefix, work / "home")
        smoke = checks.smoke_test(prefix / "bin" / "python", env, work)
        outcomes += [
            checks.Outcome(
                f"smoke: {k}",
                bool(v[0]) if k != "cuda" else True,
                float(v[1]),
                str(v[2]) if k != "cuda" else f"cuda available: {v[0]}, CUDA {v[2]}",
            )
            for k, v in smoke.items()
        ]
        report += [o.line() for o in outcomes]
        _say("\n".join(o.line() for o in outcomes))
        if not args.no_compare:
            from feedstock.conda_build_standin.prefix import pick_python

            report += compare.report(prefix, downloads, work, smoke, env, pick_python(PY).executable)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    failed = [o for o in outcomes if o.ok is False]
    report.append(
        f"rehearsal: {time.monotonic() - t_all:.0f}s; {len(outcomes)} checks, {len(failed)} failed, "
        f"{sum(o.ok is None for o in outcomes)} not run; the split: {len(split_actions)} ACTION"
    )
    print("\n".join(report), flush=True)
    return 1 if failed or split_actions else 0
