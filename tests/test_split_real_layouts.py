"""The split of the real torch 2.13.0 layouts, checked by the recipe's own test commands.

For each layout (a listing of a real wheel in tests/data, see its README) the
tree is laid out as ``setup.py build`` leaves it (empty placeholder files,
executables executable) and taken through the steps of the build scripts with
the real spec and the real ``python -m megabuild split`` commands: ``stage``
(CUDA: nomagma, then a rebuilt linalg library staged as magma), ``verify``,
``install`` of libtorch and libtorch-cuda-linalg into a fake ``$PREFIX``,
``pip install .`` emulated, ``link-back``. Then every command of the rendered
``test:`` sections (recipe/meta.yaml with the matching .ci_support config) of
libtorch, libtorch-cuda-linalg and pytorch that only inspects files runs in
bash against the result, each in the prefix its package's test env would have.
Commands that need the real runtime (python, cmake, pytest, pip) are counted
and printed, not run.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest
from _split_util import DATA, REAL_SPEC, lay_out_placeholders, read_listing, run_cli, write
from feedstock.configs import list_configs, resolve_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config

PACKAGES = ("torch/", "functorch/", "torchgen/")
FILE_TESTS = ("test", "[")
# Files the repair step of upstream's wheel build copies into torch/lib
# (.ci/aarch64_linux/aarch64_wheel_ci_build.py: update_wheel) and a conda
# build never has. They are left out of the tree, not dropped by spec rules:
# a real build that produced one must fail the strict lib/ area.
AARCH64_WHEEL_REPAIR = {
    "torch/lib/libgfortran.so.*": "GNU Fortran runtime of the bundled NVPL LAPACK; conda has libgfortran",
    "torch/lib/libnvpl_*.so.*": "NVIDIA Performance Libraries (BLAS/LAPACK); conda links libblas/liblapack",
    "torch/lib/libarm_compute*.so": "Arm Compute Library for oneDNN (USE_MKLDNN_ACL, not set by build.sh)",
}
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


LAYOUTS = [
    Layout(
        "linux-64-cpu",
        "torch-2.13.0-cp311-linux_x86_64-files.tsv",
        "linux-64",
        "linux_64_cpu_generic",
        "3.11",
        cuda=False,
        shlib_ext=".so",
    ),
    Layout(
        "linux-64-cuda",
        "torch-2.13.0-cp312-linux_x86_64-cu130-files.tsv",
        "linux-64",
        "linux_64_cuda13.0_generic",  # the wheel is CUDA 13.0 too
        "3.12",
        cuda=True,
        shlib_ext=".so",
    ),
    Layout(
        "linux-aarch64-cuda",
        "torch-2.13.0-cp312-linux_aarch64-cu130-files.tsv",
        "linux-aarch64",
        "linux_aarch64_cuda12.6",  # the only aarch64 CUDA config; the file names do not depend on it
        "3.12",
        cuda=True,
        shlib_ext=".so",
        not_in_conda_build=AARCH64_WHEEL_REPAIR,
    ),
    Layout(
        "osx-arm64-cpu",
        "torch-2.13.0-cp312-macosx_arm64-files.tsv",
        "osx-arm64",
        "osx_arm64_py3.12",
        "3.12",
        cuda=False,
        shlib_ext=".dylib",
    ),
]


@cache
def rendered(alias: str) -> tuple[RenderedOutput, ...]:
    configs = resolve_configs(alias, list_configs(REPO))
    assert len(configs) == 1, f"{alias} selects {[c.name for c in configs]}"
    return tuple(render_config(configs[0].path, RECIPE))


def pick(outputs: tuple[RenderedOutput, ...], name: str, **variant: str) -> RenderedOutput:
    found = [
        o
        for o in outputs
        if o.name == name and all(o.variant.get(k, "").startswith(v) for k, v in variant.items())
    ]
    assert len(found) == 1, f"{name} {variant}: {len(found)} rendered outputs"
    return found[0]


def is_file_test(command: str) -> bool:
    """``test ...`` / ``[ ... ]`` and chains of them with && / ||, nothing else."""
    if "$(" in command or "`" in command:
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segment: list[str] = []
    segments = [segment]
    for token in lexer:
        if token in ("&&", "||"):
            segment = []
            segments.append(segment)
        elif token and set(token) <= set("();<>|&"):
            return False
        else:
            segment.append(token)
    return all(s and s[0] in FILE_TESTS and (s[0] != "[" or s[-1] == "]") for s in segments)


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


def emulate_pip_install(
    build_lib: Path, sp_dir: Path, rows: list[tuple[str, int, bool]], blanks: Path
) -> None:
    """What ``pip install .`` leaves in site-packages: the rest of the build tree, and
    again every file of torch/{lib,bin,share,include} (setup.py copies them from the
    source tree, where CMake installed all of them, into a new build/lib.*)."""
    sp_dir.mkdir(parents=True)
    for top in PACKAGES:
        os.rename(build_lib / top, sp_dir / top)
    lay_out_placeholders(sp_dir, [r for r in rows if not os.path.lexists(sp_dir / r[0])], blanks)


@pytest.mark.slow
@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.id)
def test_real_layout_split_passes_the_recipe_tests(layout: Layout, tmp_path: Path) -> None:
    rows = read_listing(DATA / layout.listing)
    left_out = {r for r in rows if any(fnmatch.fnmatch(r[0], g) for g in layout.not_in_conda_build)}
    rows = [r for r in rows if r[0].startswith(PACKAGES) and r not in left_out]
    assert {g for g in layout.not_in_conda_build if any(fnmatch.fnmatch(r[0], g) for r in left_out)} == set(
        layout.not_in_conda_build
    ), "an exclusion matches nothing in the listing"

    tag = layout.python.replace(".", "")
    build_lib = tmp_path / f"src/build/lib.{layout.target_platform}-cpython-{tag}"
    blanks = tmp_path / "blanks"
    lay_out_placeholders(build_lib, rows, blanks)
    tree, staging = build_lib / "torch", tmp_path / "src/_megabuild/staging"
    plat = ("--spec", REAL_SPEC, "--target-platform", layout.target_platform)
    cuda = ("--cuda",) if layout.cuda else ()

    # top level (build.sh: build_libtorch)
    split_cli("stage", *plat, "--tree", tree, "--staging", staging, *cuda, "--linalg-variant", "nomagma")
    if layout.cuda:
        # the magma pass relinks only libtorch_cuda_linalg
        write(tree / f"lib/libtorch_cuda_linalg{layout.shlib_ext}", b"magma", 0o755)
        split_cli(
            "stage", *plat, "--tree", tree, "--staging", staging, *cuda,
            "--linalg-variant", "magma", "--only", "libtorch-cuda-linalg",
        )  # fmt: skip
    split_cli("verify", *plat, "--staging", staging, *cuda)

    outputs = rendered(layout.config)
    results = CommandResults()
    prefix = tmp_path / "prefix"
    sp_dir = prefix / f"lib/python{layout.python}/site-packages"
    env = {
        "PATH": "/usr/bin:/bin",
        "PREFIX": str(prefix),
        "SP_DIR": str(sp_dir),
        "SHLIB_EXT": layout.shlib_ext,
        "PY_VER": layout.python,
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
        assert not [p for p in staging.iterdir() if p.name.startswith("libtorch-cuda-linalg")]

    # libtorch output (install_libtorch.sh)
    split_cli("install", "libtorch", *plat, "--staging", staging, "--prefix", prefix)
    ran["libtorch"] = run_tests(pick(outputs, "libtorch"), env, tmp_path, results)

    # pytorch output (build.sh: build_pytorch)
    emulate_pip_install(build_lib, sp_dir, rows, blanks)
    split_cli(
        "link-back", *plat, "--prefix", prefix, "--sp-dir", sp_dir,
        "--drop-libtorch-headers", "--python-tag", f"cpython-{tag}",
    )  # fmt: skip
    pytorch = pick(outputs, "pytorch", python=layout.python)
    ran["pytorch"] = run_tests(pytorch, env, tmp_path, results)

    print(
        f"\n{layout.id} ({layout.config}): {len(results.ran)} file checks ran, {len(results.failed)} failed"
    )
    print(f"  left out of the tree (wheel repair only): {sorted(r[0] for r in left_out)}")
    print(f"  {len(results.not_run)} commands need the real runtime, not run here:")
    for line in results.not_run:
        print(f"    {line}")
    assert not results.failed, "recipe test commands failed:\n" + "\n".join(results.failed)
    assert all(ran.values()), f"outputs without any file check: {ran}"

    # what the tests do not check but the split must guarantee
    torch_sp = sp_dir / "torch"
    py_lib = f"lib/libtorch_python{layout.shlib_ext}"
    assert (torch_sp / py_lib).is_file() and not (torch_sp / py_lib).is_symlink()
    assert (prefix / py_lib).is_symlink() and (prefix / py_lib).resolve() == (torch_sp / py_lib).resolve()
    assert os.path.realpath(torch_sp / f"lib/libtorch_cpu{layout.shlib_ext}") == str(
        (prefix / f"lib/libtorch_cpu{layout.shlib_ext}").resolve()
    )
    for dropped in (staging / "_dropped").rglob("*"):
        if dropped.is_dir():
            continue
        rel = dropped.relative_to(staging / "_dropped")
        assert not os.path.lexists(torch_sp / rel), f"dropped file back in site-packages: {rel}"
        assert not os.path.lexists(prefix / rel), f"dropped file in $PREFIX: {rel}"
    if layout.cuda:
        assert (prefix / "include/THC/THCAtomics.cuh").is_file()
        assert not (torch_sp / "include/THC").exists()


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
