"""The split of the real torch 2.14.1 layouts, checked by the recipe's own test commands.

For each layout (a listing of a real wheel in tests/data, see its README) the
tree is laid out as the top level's ``pip install .`` leaves it (scikit-build-core
installs the wheel tree into site-packages: the split works on ``$SP_DIR/torch``;
empty placeholder files, executables executable) and taken through the steps of
the build scripts with the real spec and the real ``python -m megabuild split``
commands: ``stage`` (CUDA: nomagma, then a rebuilt linalg library staged as
magma), ``verify``, ``install`` of libtorch and libtorch-cuda-linalg into a fake
``$PREFIX``, the pytorch output's ``pip install .`` emulated (the whole wheel tree
again), ``link-back``. Then every command of the rendered ``test:`` sections
(recipe/meta.yaml with the matching .ci_support config) of libtorch,
libtorch-cuda-linalg and pytorch that only inspects files runs in bash against
the result, each in the prefix its package's test env would have. Commands that
need the real runtime (python, cmake, pytest, pip) are counted and printed, not
run. Last, every file of the listing must be in exactly one package (or
dropped), with no byte packaged twice.
"""

from __future__ import annotations

import fnmatch
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from _split_util import DATA, REAL_SPEC, lay_out_placeholders, read_listing, run_cli, write
from feedstock.bump.split_run import is_file_test, staged_files
from feedstock.configs import list_configs, resolve_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config
from feedstock.wincmd import conda_test_env as win_env
from feedstock.wincmd import file_test as win_file_test
from megabuild.pipeline.wheel_settings import libtorch_excludes
from megabuild.split.spec import compile_patterns, load_spec

PACKAGES = ("torch/", "functorch/", "torchgen/")
# Files the repair step of upstream's wheel build copies into torch/lib
# (.ci/aarch64_linux/aarch64_wheel_ci_build.py: update_wheel) and a conda
# build never has. They are left out of the tree, not dropped by spec rules:
# a real build that produced one must fail the strict lib/ area.
AARCH64_WHEEL_REPAIR = {
    "torch/lib/libgfortran.so.*": "GNU Fortran runtime of the bundled NVPL LAPACK; conda has libgfortran",
    "torch/lib/libnvpl_*.so.*": "NVIDIA Performance Libraries (BLAS/LAPACK); conda links libblas/liblapack",
    "torch/lib/libarm_compute*.so": "Arm Compute Library for oneDNN (USE_MKLDNN_ACL, not set by build.sh)",
}
# PyPI has no linux CPU wheel of 2.14.1 (the CPU wheels are on download.pytorch.org only,
# not reachable here). The linux-64 CPU layout is therefore DERIVED, not real: the real
# linux-64 CUDA 13.0 listing without the files by which torch 2.13.0's real CPU wheel
# differed from its CUDA wheel (besides the CPU wheel's BUILD_TEST=1 test files).
CUDA_ONLY_FILES = {
    "torch/lib/libc10_cuda.so": "CUDA library",
    "torch/lib/libcaffe2_nvrtc.so": "CUDA library",
    "torch/lib/libtorch_cuda.so": "CUDA library",
    "torch/lib/libtorch_cuda_linalg.so": "CUDA library",
    "torch/lib/libtorch_nvshmem.so": "CUDA library (USE_NVSHMEM)",
    "torch/include/THC/*": "CUDA-only legacy headers",
    "torch/include/ATen/cuda/CUDAConfig.h": "generated for CUDA builds only",
    "torch/include/c10/cuda/impl/cuda_cmake_macros.h": "generated for CUDA builds only",
    "torch/include/tensorpipe/channel/cuda_*/*": "tensorpipe's CUDA channels",
    "torch/include/tensorpipe/common/cuda_buffer.h": "tensorpipe's CUDA headers",
    "torch/include/tensorpipe/config_cuda.h": "tensorpipe's CUDA headers",
    "torch/include/tensorpipe/tensorpipe_cuda.h": "tensorpipe's CUDA headers",
}
# Listings in tests/data that are no layout here yet, each with the reason: never silently skipped.
PENDING: dict[str, str] = {}
# Files of other packages that a test env contains and the rendered tests look at.
STAND_INS = {
    ("libtorch-cuda-linalg", "true"): ["lib/libmagma{ext}"],  # libmagma, run dep of the magma variant
}


@dataclass(frozen=True)
class Layout:
    id: str
    listing: str  # file in tests/data
    target_platform: str
    config: str  # .ci_support alias (scripts/render.py)
    python: str
    cuda: bool
    shlib_ext: str
    not_in_conda_build: dict[str, str] = field(default_factory=dict)  # glob -> why
    derived_without: dict[str, str] = field(default_factory=dict)  # glob -> why (derived layouts only)


LAYOUTS = [
    Layout(
        "linux-64-cuda",
        "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv",
        "linux-64",
        "linux_64_cuda13.0_generic",  # the wheel is CUDA 13.0 too
        "3.12",
        cuda=True,
        shlib_ext=".so",
    ),
    Layout(
        "linux-aarch64-cuda",
        "torch-2.14.1-cp312-linux_aarch64-cu130-files.tsv",
        "linux-aarch64",
        "linux_aarch64_cuda13.0",  # the wheel is CUDA 13.0 (sbsa) too
        "3.12",
        cuda=True,
        shlib_ext=".so",
        not_in_conda_build=AARCH64_WHEEL_REPAIR,
    ),
    Layout(
        "osx-arm64-cpu",
        "torch-2.14.1-cp312-macosx_arm64-files.tsv",
        "osx-arm64",
        "osx_arm64_py3.12",
        "3.12",
        cuda=False,
        shlib_ext=".dylib",
    ),
    # the free-threaded wheels (cp314t): the same files as cp312's but for the _C suffix
    Layout(
        "linux-64-cuda-cp314t",
        "torch-2.14.1-cp314t-linux_x86_64-cu130-files.tsv",
        "linux-64",
        "linux_64_cuda13.0_generic",
        "3.14t",
        cuda=True,
        shlib_ext=".so",
    ),
    Layout(
        "osx-arm64-cpu-cp314t",
        "torch-2.14.1-cp314t-macosx_arm64-files.tsv",
        "osx-arm64",
        "osx_arm64",  # the one osx-arm64 config (megabuild: every Python)
        "3.14t",
        cuda=False,
        shlib_ext=".dylib",
    ),
    Layout(
        "osx-arm64-cpu-cp314",  # the GIL build of 3.14, next to cp314t
        "torch-2.14.1-cp314-macosx_arm64-files.tsv",
        "osx-arm64",
        "osx_arm64",
        "3.14",
        cuda=False,
        shlib_ext=".dylib",
    ),
    Layout(
        "linux-64-cpu-derived",  # NOT a real wheel: see CUDA_ONLY_FILES
        "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv",
        "linux-64",
        "linux_64_cpu_generic",
        "3.12",
        cuda=False,
        shlib_ext=".so",
        derived_without=CUDA_ONLY_FILES,
    ),
]


def python_variant(python: str) -> str:
    """The config's ``python`` value for a layout's Python: ``3.14t`` is ``3.14.* *_cp314t``,
    matched exactly (``3.14`` alone would also select it); ``3.12`` is a prefix."""
    if not python.endswith("t"):
        return python
    short = python[:-1]
    return f"{short}.* *_cp{short.replace('.', '')}t"


def python_dirs(python: str) -> tuple[str, str]:
    """(conda-build's ``PY_VER``, the pyc cache tag) of a layout's Python: ``3.14`` and
    ``cpython-314`` for 3.14t too (its bytecode is the GIL build's, in its own site-packages)."""
    short = python.removesuffix("t")
    return short, f"cpython-{short.replace('.', '')}"


@cache
def rendered(alias: str) -> tuple[RenderedOutput, ...]:
    configs = resolve_configs(alias, list_configs(REPO))
    assert len(configs) == 1, f"{alias} selects {[c.name for c in configs]}"
    return tuple(render_config(configs[0].path, RECIPE))


def pick(outputs: tuple[RenderedOutput, ...], name: str, **variant: str) -> RenderedOutput:
    found = [
        o
        for o in outputs
        if o.name == name
        and all(
            (o.variant.get(k, "") == v) if " " in v else o.variant.get(k, "").startswith(v)
            for k, v in variant.items()
        )
    ]
    assert len(found) == 1, f"{name} {variant}: {len(found)} rendered outputs"
    return found[0]


@dataclass
class CommandResults:
    ran: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)


def run_tests(output: RenderedOutput, env: dict[str, str], cwd: Path, results: CommandResults) -> int:
    """Run the output's file checks; return how many ran."""
    magma = output.variant.get("with_magma")
    label = output.name if magma is None else f"{output.name}[with_magma={magma}]"
    count = 0
    results.not_run += [f"{label}: import {name}" for name in output.test.get("imports", [])]
    for command in output.test.get("commands", []):
        if not is_file_test(command):
            results.not_run.append(f"{label}: {command}")
            continue
        res = subprocess.run(
            ["bash", "-eu", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, check=False
        )
        count += 1
        results.ran.append(f"{label}: {command}")
        if res.returncode != 0:
            results.failed.append(f"{label}: {command} (exit {res.returncode}) {res.stderr.strip()}")
    return count


def split_cli(*args: str | Path) -> None:
    res = run_cli(*args)
    assert res.returncode == 0, f"split {args[0]}: {res.stderr}"


def layout_rows(layout: Layout) -> tuple[list[tuple[str, int, bool]], list[str]]:
    """The listing's rows a conda build of *layout* has, and the paths left out."""
    rows = read_listing(DATA / layout.listing)
    out: list[str] = []
    for globs in (layout.not_in_conda_build, layout.derived_without):
        hit = {g: [r[0] for r in rows if fnmatch.fnmatch(r[0], g)] for g in globs}
        assert all(hit.values()), (
            f"{layout.id}: a glob matches nothing: {[g for g, h in hit.items() if not h]}"
        )
        gone = {path for paths in hit.values() for path in paths}
        rows = [r for r in rows if r[0] not in gone]
        out += sorted(gone)
    return [r for r in rows if r[0].startswith(PACKAGES)], out


def stage_top_level(layout: Layout, tree: Path, staging: Path, plat: tuple[str | Path, ...]) -> None:
    """build.sh's build_libtorch: stage, the magma pass (CUDA), verify."""
    cuda = ("--cuda",) if layout.cuda else ()
    split_cli("stage", *plat, "--tree", tree, "--staging", staging, *cuda, "--linalg-variant", "nomagma")
    if layout.cuda:
        # the magma pass relinks only libtorch_cuda_linalg
        write(tree / f"lib/libtorch_cuda_linalg{layout.shlib_ext}", b"magma", 0o755)
        split_cli(
            "stage", *plat, "--tree", tree, "--staging", staging, *cuda,
            "--linalg-variant", "magma", "--only", "libtorch-cuda-linalg",
        )  # fmt: skip
    split_cli("verify", *plat, "--staging", staging, *cuda)


def owners(
    rows: list[tuple[str, int, bool]],
    staged: dict[str, set[str]],
    prefix: Path,
    sp_dir: Path,
    place: Callable[[str], str | None] = lambda rel: rel,
) -> dict[str, list[str]]:
    """For every listed file, where its bytes ended up: the packages holding it, or ``_dropped``.
    libtorch's and linalg's files count where ``split install`` put them in ``$PREFIX``;
    pytorch's are the real files left in site-packages (its symlinks into ``$PREFIX`` hold
    no bytes). The two linalg variants are alternatives and count once. *place* is where
    ``split install`` put a staged path in the prefix (Windows: ``Library/...``)."""
    found: dict[str, list[str]] = {}
    linalg = {
        rel for name, files in staged.items() if name.startswith("libtorch-cuda-linalg") for rel in files
    }
    for path, _size, _x in rows:
        rel = path.removeprefix("torch/")
        held = []
        placed = place(rel)
        if rel in staged.get("libtorch", set()) and placed and os.path.lexists(prefix / placed):
            held.append("libtorch")
        if rel in linalg and os.path.lexists(prefix / rel):
            held.append("libtorch-cuda-linalg")
        if (sp_dir / path).is_file() and not (sp_dir / path).is_symlink():
            held.append("pytorch")
        if rel in staged.get("_dropped", set()):
            held.append("_dropped")
        found[path] = held
    return found


def summarize(rows: list[tuple[str, int, bool]], found: dict[str, list[str]]) -> str:
    """``output: files / MB`` per package, ``torch/`` only (the table in docs/testing.md)."""
    count: dict[str, list[int]] = {}
    for path, size, _x in rows:
        if path.startswith("torch/"):
            for name in found[path]:
                entry = count.setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += size
    return ", ".join(f"{name} {n:,} / {b / 1e6:,.0f} MB" for name, (n, b) in sorted(count.items()))


def check_one_copy(rows: list[tuple[str, int, bool]], found: dict[str, list[str]], sp_dir: Path) -> None:
    """Every listed file in exactly one package, no byte twice, no dangling link back."""
    size = {path: sz for path, sz, _x in rows}
    twice = {path: held for path, held in found.items() if len(held) > 1}
    nowhere = sorted(path for path, held in found.items() if not held)
    assert not nowhere, f"{len(nowhere)} files in no package: {nowhere[:10]}"
    assert not twice, f"{sum(size[p] for p in twice):,} bytes packaged twice: {sorted(twice.items())[:10]}"
    dangling = [p for p in (sp_dir / "torch").rglob("*") if p.is_symlink() and not p.exists()]
    assert not dangling, f"dangling links in site-packages: {dangling[:10]}"


def report_and_check(
    layout: Layout,
    rows: list[tuple[str, int, bool]],
    found: dict[str, list[str]],
    tests: tuple[CommandResults, dict[str, int]],
    sp_dir: Path,
    note: str,
) -> None:
    """Print what ran, per package and what was not run; fail on a failed check, an output
    without checks, a file in no or two packages."""
    results, ran = tests
    size = {path: sz for path, sz, _x in rows}
    twice = sum(size[p] for p, held in found.items() if len(held) > 1)
    print(
        f"\n{layout.id} ({layout.config}): {len(results.ran)} file checks ran, {len(results.failed)} failed"
    )
    print(f"  per package, torch/ only: {summarize(rows, found)}; bytes packaged twice: {twice:,}")
    print(f"  {note}")
    print(f"  {len(results.not_run)} commands need the real runtime (or Windows), not run here:")
    for line in results.not_run:
        print(f"    {line}")
    assert not results.failed, "recipe test commands failed:\n" + "\n".join(results.failed)
    assert all(ran.values()), f"outputs without any file check: {ran}"
    check_one_copy(rows, found, sp_dir)


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.id)
def test_real_layout_split_passes_the_recipe_tests(layout: Layout, tmp_path: Path) -> None:
    rows, left_out = layout_rows(layout)
    py_ver, cache_tag = python_dirs(layout.python)
    blanks = tmp_path / "blanks"
    # the top level's `pip install .` (scikit-build-core): the wheel tree in its own site-packages
    top_sp = tmp_path / f"top/lib/python{layout.python}/site-packages"
    lay_out_placeholders(top_sp, rows, blanks)
    tree, staging = top_sp / "torch", tmp_path / "staging"
    plat = ("--spec", REAL_SPEC, "--target-platform", layout.target_platform)
    stage_top_level(layout, tree, staging, plat)
    staged = staged_files(staging)

    outputs = rendered(layout.config)
    results = CommandResults()
    prefix = tmp_path / "prefix"
    sp_dir = prefix / f"lib/python{layout.python}/site-packages"
    env = {
        "PATH": "/usr/bin:/bin",
        "PREFIX": str(prefix),
        "SP_DIR": str(sp_dir),
        "SHLIB_EXT": layout.shlib_ext,
        "PY_VER": py_ver,
    }
    ran: dict[str, int] = {}

    def prepare(where: Path, output: RenderedOutput) -> None:
        for path in STAND_INS.get((output.name, output.variant.get("with_magma", "")), []):
            write(where / path.format(ext=layout.shlib_ext), b"stand-in", 0o755)

    # libtorch-cuda-linalg outputs (install_linalg.sh), each tested in its own env
    if layout.cuda:
        for magma, variant in (("true", "magma"), ("false", "nomagma")):
            where = tmp_path / f"prefix-linalg-{variant}"
            output = pick(outputs, "libtorch-cuda-linalg", with_magma=magma)
            split_cli(
                "install", f"libtorch-cuda-linalg-{variant}", *plat, "--staging", staging, "--prefix", where
            )
            prepare(where, output)
            ran[f"linalg-{variant}"] = run_tests(output, dict(env, PREFIX=str(where)), tmp_path, results)
        # the test env of libtorch (and everything after) has one linalg variant
        os.rename(tmp_path / "prefix-linalg-nomagma", prefix)
    else:
        assert not [o for o in outputs if o.name == "libtorch-cuda-linalg"]
        assert not [name for name in staged if name.startswith("libtorch-cuda-linalg")]

    # libtorch output (install_libtorch.sh)
    split_cli("install", "libtorch", *plat, "--staging", staging, "--prefix", prefix)
    ran["libtorch"] = run_tests(pick(outputs, "libtorch"), env, tmp_path, results)

    # pytorch output (build.sh: build_pytorch): its own `pip install .` installs the whole
    # wheel tree again, into this env's site-packages; then link-back
    lay_out_placeholders(sp_dir, rows, blanks)
    split_cli(
        "link-back", *plat, "--prefix", prefix, "--sp-dir", sp_dir,
        "--drop-libtorch-headers", "--python-tag", cache_tag,
    )  # fmt: skip
    pytorch = pick(outputs, "pytorch", python=python_variant(layout.python))
    ran["pytorch"] = run_tests(pytorch, env, tmp_path, results)

    found = owners(rows, staged, prefix, sp_dir)
    left = f"left out of the tree ({len(left_out)}): {left_out if len(left_out) < 20 else left_out[:20]}"
    report_and_check(layout, rows, found, (results, ran), sp_dir, left)

    # what the tests do not check but the split must guarantee
    torch_sp = sp_dir / "torch"
    py_lib = f"lib/libtorch_python{layout.shlib_ext}"
    assert (torch_sp / py_lib).is_file() and not (torch_sp / py_lib).is_symlink()
    assert (prefix / py_lib).is_symlink() and (prefix / py_lib).resolve() == (torch_sp / py_lib).resolve()
    assert os.path.realpath(torch_sp / f"lib/libtorch_cpu{layout.shlib_ext}") == str(
        (prefix / f"lib/libtorch_cpu{layout.shlib_ext}").resolve()
    )
    for rel in staged.get("_dropped", set()):
        assert not os.path.lexists(torch_sp / rel), f"dropped file back in site-packages: {rel}"
        assert not os.path.lexists(prefix / rel), f"dropped file in $PREFIX: {rel}"
    if layout.cuda:
        assert (prefix / "include/THC/THCAtomics.cuh").is_file()
        assert not (torch_sp / "include/THC").exists()


# Windows (win-64): the real win_amd64 CPU wheel (MKL, as the feedstock's only Windows BLAS).
# No link-back: libtorch's files go to conda's Library layout, the pytorch wheel leaves them out.
WIN_LAYOUT = Layout(
    "win-64-cpu",
    "torch-2.14.1-cp312-win_amd64-files.tsv",
    "win-64",
    "win_64_cpu",
    "3.12",
    cuda=False,
    shlib_ext=".dll",
)
WIN_LAYOUTS = [
    WIN_LAYOUT,
    Layout(
        "win-64-cpu-cp314t",
        "torch-2.14.1-cp314t-win_amd64-files.tsv",
        "win-64",
        "win_64_cpu",
        "3.14t",
        cuda=False,
        shlib_ext=".dll",
    ),
]


def run_win_tests(output: RenderedOutput, env: dict[str, str], results: CommandResults) -> int:
    """Run the output's ``if [not] exist`` checks translated for bash; return how many ran."""
    count = 0
    results.not_run += [f"{output.name}: import {name}" for name in output.test.get("imports", [])]
    for command in output.test.get("commands", []):
        argv = win_file_test(command, env)
        if argv is None:
            results.not_run.append(f"{output.name}: {command}")
            continue
        count += 1
        results.ran.append(f"{output.name}: {command}")
        if subprocess.run(argv, check=False).returncode != 0:
            results.failed.append(f"{output.name}: {command} ({' '.join(argv)})")
    return count


def win_pytorch_wheel(rows: list[tuple[str, int, bool]]) -> tuple[list[tuple[str, int, bool]], set[str]]:
    """The pytorch output's wheel (build/steps.py: pip install . with the per-Python
    ``wheel.exclude``): (its rows, the wheel paths the spec's excludes left out). Upstream's own
    pyproject.toml excludes are not applied (no source tree here)."""
    excluded = compile_patterns(libtorch_excludes(load_spec(REAL_SPEC, WIN_LAYOUT.target_platform)))
    kept = [row for row in rows if not excluded.match(row[0])]
    return kept, {row[0] for row in rows if excluded.match(row[0])}


@pytest.mark.slow
@pytest.mark.parametrize("layout", WIN_LAYOUTS, ids=lambda layout: layout.id)
def test_real_win_layout_split_passes_the_recipe_tests(layout: Layout, tmp_path: Path) -> None:
    rows, _left_out = layout_rows(layout)
    blanks = tmp_path / "blanks"
    top_sp = tmp_path / "top/Lib/site-packages"  # the top level's pip install . (bld.bat)
    lay_out_placeholders(top_sp, rows, blanks)
    plat = ("--spec", REAL_SPEC, "--target-platform", layout.target_platform)
    stage_top_level(layout, top_sp / "torch", tmp_path / "staging", plat)
    staged = staged_files(tmp_path / "staging")
    assert set(staged) == {"libtorch", "_dropped"}, sorted(staged)

    outputs = rendered(layout.config)
    results = CommandResults()
    prefix = tmp_path / "prefix"
    env = win_env(prefix, python_dirs(layout.python)[0])
    sp_dir = Path(env["SP_DIR"])
    split_cli(
        "install", "libtorch", *plat, "--staging", tmp_path / "staging", "--prefix", prefix
    )  # install_libtorch.bat
    ran = {"libtorch": run_win_tests(pick(outputs, "libtorch"), env, results)}

    # the pytorch output: pip install . with the per-Python wheel.exclude, no link-back on Windows
    wheel, excluded = win_pytorch_wheel(rows)
    moved_out = {f"torch/{rel}" for name in ("libtorch", "_dropped") for rel in staged[name]}
    assert excluded == moved_out, (
        sorted(excluded ^ moved_out)[:10],
        "wheel.exclude != what the split moved out",
    )
    lay_out_placeholders(sp_dir, wheel, blanks)
    ran["pytorch"] = run_win_tests(
        pick(outputs, "pytorch", python=python_variant(layout.python)), env, results
    )

    spec = load_spec(REAL_SPEC, layout.target_platform)
    found = owners(rows, staged, prefix, sp_dir, spec.install_path)
    report_and_check(layout, rows, found, (results, ran), sp_dir, "(no link-back on Windows)")

    # conda's Windows layout, and nothing of libtorch's left where a unix prefix has it
    assert sorted(p.name for p in prefix.iterdir()) == ["Lib", "Library"]
    assert sorted(p.name for p in (prefix / "Library").iterdir()) == ["bin", "include", "lib", "share"]
    assert (prefix / "Library/bin/torch_cpu.dll").is_file() and (
        prefix / "Library/lib/torch_cpu.lib"
    ).is_file()
    torch_sp = sp_dir / "torch"
    assert sorted(p.name for p in (torch_sp / "lib").glob("*.dll")) == ["torch_python.dll"]
    assert not (torch_sp / "share").exists() and not (torch_sp / "bin").exists()
    assert not any(p.is_symlink() for p in torch_sp.rglob("*"))
    for rel in staged["_dropped"]:
        assert not os.path.lexists(torch_sp / rel), f"dropped file in site-packages: {rel}"
        assert not list(prefix.rglob(Path(rel).name)), f"dropped file in the prefix: {rel}"


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("if not exist %LIBRARY_BIN%\\c10.dll exit 1", ["test", "-e", "/p/Library/bin/c10.dll"]),
        (
            "if exist %SP_DIR%\\torch\\include\\torch exit 1",
            ["test", "!", "-e", "/p/Lib/site-packages/torch/include/torch"],
        ),
        ("if not exist %CONDA_PREFIX%\\x exit 1", None),
        ("cmake -S cmake_test -B cmake_test/build -GNinja %CMAKE_ARGS%", None),
        ("if not exist %LIBRARY_BIN%\\c10.dll (exit 1)", None),
    ],
)
def test_win_file_checks_are_translated(command: str, argv: list[str] | None) -> None:
    assert win_file_test(command, win_env(Path("/p"), "3.12")) == argv


@pytest.mark.parametrize("config", ["win_64_cpu", "win_64_cuda12.9", "win_64_cuda13.0"])
def test_win_libtorch_file_tests_name_files_the_spec_installs(config: str) -> None:
    """Every ``if not exist`` of libtorch's Windows tests (CUDA configs too, which no wheel
    listing covers) names a place ``split install`` fills from a file the spec gives libtorch."""
    spec = load_spec(REAL_SPEC, "win-64")
    prefix = Path("/p")
    env = win_env(prefix, "3.12")
    wanted = [argv[-1] for c in pick(rendered(config), "libtorch").test.get("commands", [])
              if (argv := win_file_test(c, env)) is not None and argv[1] == "-e"]  # fmt: skip
    assert wanted
    unknown = []
    for path in wanted:
        placed = Path(path).relative_to(prefix).as_posix()
        sources = [
            f"{root.base}/{placed[len(root.dest) + 1 :]}".lstrip("/")
            for root in spec.install_roots
            if placed.startswith(f"{root.dest}/")
        ]
        if not any(spec.install_path(s) == placed and spec.classify(s).output == "libtorch" for s in sources):
            unknown.append(placed)
    assert not unknown, f"{config}: libtorch tests expect files no libtorch rule installs: {unknown}"


def test_every_listing_is_a_layout_or_pending() -> None:
    """tests/data holds listings of the recipe's version only, each split here or pending with a reason."""
    version = rendered(LAYOUTS[0].config)[0].version
    listings = {p.name for p in DATA.glob("*-files.tsv")}
    layouts = {layout.listing for layout in [*LAYOUTS, *WIN_LAYOUTS]}
    assert all(name.startswith(f"torch-{version}-") for name in listings), (version, sorted(listings))
    assert layouts | set(PENDING) == listings
    assert not layouts & set(PENDING)


@pytest.mark.parametrize(
    ("command", "file_only"),
    [
        ("test -f $PREFIX/lib/libc10${SHLIB_EXT}", True),
        ("test -d $SP_DIR/torch/include && test ! -L $SP_DIR/torch/include", True),
        ('[ -f "$PREFIX/x" ] || test -e $PREFIX/y', True),
        ("[ -f $PREFIX/x", False),
        ("test -f x; rm -rf y", False),
        ("test -f $(which python)", False),
        ("test -f x | cat", False),
        ("python -c 'import torch'", False),
        ("cmake --build cmake_test/build", False),
    ],
)
def test_file_checks_are_recognised(command: str, file_only: bool) -> None:
    assert is_file_test(command) is file_only
