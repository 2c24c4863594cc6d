"""The package tests' binary gates judged by upstream's real 2.14.1 binaries, with cuobjdump.

Each upstream wheel the CI provisions is laid out as the recipe's packages would hold it after a
conda build (``support.wheel_binaries`` splits it with the recipe's own split; ``support.real_gates``
writes the real bytes, upstream's build root rewritten to a conda-build work dir of the same
length, and the ``conda-meta`` records ``--package`` reads). Then the ``check-binaries`` commands
of the matching config's rendered test sections run on them as conda-build runs them, through the
one runner of rendered test commands, with what the wheel takes from outside a conda environment
explained by ``tests/data/binary-check-upstream-wheels.json``. Each gate also meets a defect
planted in a real binary and must name it.

cuobjdump reads every fatbin (about 25 s a library), so these tests run in the rehearsal step
(``-mrehearsal``, .ci/run), where they must not skip: the wheels (``FEEDSTOCK_REQUIRE_REAL_WHEELS``)
and the CUDA toolchain (``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN``) are provisioned there.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cuda_toolchain import Toolchain
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config
from feedstock.split_check.platforms import BY_NAME
from feedstock.test_commands import CommandResult, run_command
from megabuild.binaries import cuda_arch
from megabuild.buildenv.cuda import cuda_arch_list
from megabuild.model import LIBTORCH, LINALG, PYTORCH
from support.cuda import toolchain_or_skip
from support.real_gates import (
    DATA,
    build_roots,
    conda_work_root,
    materialize,
    plant_cubin,
    plant_runpath,
    write_record,
)
from support.wheel_binaries import VERSION, SplitWheel, cached_wheel, split_wheel

pytestmark = pytest.mark.rehearsal
CUDA_LIBRARY = "lib/libtorch_cuda.so"
CPU_LIBRARY = "lib/libtorch_cpu.so"


@dataclass(frozen=True)
class Layout:
    split: SplitWheel
    outputs: dict[str, RenderedOutput]  # the config's rendered outputs the gates run in
    toolchain: Toolchain


def _config(keys: dict[str, str]) -> Path:
    """The one ``.ci_support`` config with these values (first of each list)."""
    found = [
        c.path for c in list_configs(REPO) if all(c.values.get(k, [None])[0] == v for k, v in keys.items())
    ]
    assert len(found) == 1, (keys, found)
    return found[0]


@cache
def _rendered(config: Path) -> dict[str, RenderedOutput]:
    """libtorch, the linalg library (magma) and the Python 3.12 pytorch of ``config``."""
    out: dict[str, RenderedOutput] = {}
    for output in render_config(config, RECIPE):
        python = output.variant.get("python", "")
        if output.name == PYTORCH and not python.startswith("3.12"):
            continue
        if output.name == LINALG and output.variant.get("with_magma", "true") != "true":
            continue
        out.setdefault(output.name, output)
    return out


def _lay_out(subdir: str, config: dict[str, str], work: Path) -> Layout:
    toolchain = toolchain_or_skip()
    split = split_wheel(cached_wheel(subdir), BY_NAME[subdir], work)
    outputs = _rendered(_config(config))
    for name, output in outputs.items():
        files = split.packages.get(name, ())
        materialize(split, files, subdir)
        write_record(split.prefix, name, VERSION, output.build_string, files)
    return Layout(split, outputs, toolchain)


@pytest.fixture(scope="module")
def linux_cuda(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    keys = {"target_platform": "linux-64", "cuda_compiler_version": "13.0", "blas_impl": "mkl"}
    work = tmp_path_factory.mktemp("linux-64")
    yield _lay_out("linux-64", keys, work)
    shutil.rmtree(work, ignore_errors=True)  # gigabytes; the rehearsal runs next on the same disk


def _run(command: str, layout: Layout, cwd: Path) -> CommandResult:
    """A rendered test command as conda-build runs it: ``$PREFIX`` set, the recipe's megabuild
    importable (the test files), cuobjdump on PATH (the test requirement cuda-cuobjdump). The one
    difference: conda-build tests on the target platform, where check-binaries takes it as its
    default; here it is named (linux-aarch64's binaries are judged on linux-64)."""
    if "--target-platform" not in command:
        command += f" --target-platform {layout.split.platform.subdir}"
    bindir = Path(sys.executable).parent
    env = {
        "PREFIX": str(layout.split.prefix),
        "PATH": os.pathsep.join([str(layout.toolchain.nvcc.parent), str(bindir), "/usr/bin", "/bin"]),
        "PYTHONPATH": str(RECIPE),
        "HOME": str(cwd),
    }
    return run_command(command, env, cwd, explained=DATA, bash_options=("-e",), timeout=900)


def _gates(output: RenderedOutput) -> list[str]:
    return [c for c in output.test.get("commands", []) if "-m megabuild check-binaries " in c]


def test_the_build_root_becomes_a_conda_work_dir_of_the_same_length() -> None:
    for subdir in ("linux-64", "osx-arm64", "win-64"):
        for root in build_roots(subdir):
            work = conda_work_root(root)
            assert (
                len(work) == len(root)
                and b"_1764000000" in work
                and work.endswith(root[-1:] + b"work" + root[-1:])
            )


@pytest.mark.parametrize("name", [LIBTORCH, LINALG, PYTORCH])
def test_the_rendered_gates_pass_the_real_linux_cuda_build(
    linux_cuda: Layout, name: str, tmp_path: Path
) -> None:
    gates = _gates(linux_cuda.outputs[name])
    assert len(gates) == 1, gates
    ran = _run(gates[0], linux_cuda, tmp_path)
    print(ran.command, ran.stdout, ran.stderr, sep="\n")
    assert ran.returncode == 0, ran.output
    assert " 0 finding(s)" in ran.stderr
    if name == LIBTORCH:  # the fatbin was listed: the architecture check ran
        assert "--cuda-version 13.0" in ran.command


def _copy(layout: Layout, rel: str, work: Path) -> Path:
    """A prefix of its own holding a copy of one real, rewritten file, the other files of its
    directory hard-linked beside it (what it loads)."""
    dest = work / "prefix" / rel
    dest.parent.mkdir(parents=True)
    for sibling in (layout.split.prefix / rel).parent.iterdir():
        if sibling.is_file() and not sibling.is_symlink() and sibling.name != dest.name:
            os.link(sibling, dest.parent / sibling.name)
    shutil.copyfile(layout.split.prefix / rel, dest)
    return dest


def _check(layout: Layout, prefix: Path, rel: str, *extra: str) -> CommandResult:
    command = f"python -m megabuild check-binaries --prefix {prefix} --path {rel} --target-platform linux-64"
    return _run(" ".join([command, *extra]), layout, prefix.parent)


def test_a_runpath_into_the_work_dir_fails(linux_cuda: Layout, tmp_path: Path) -> None:
    library = _copy(linux_cuda, CPU_LIBRARY, tmp_path)
    work = conda_work_root(build_roots("linux-64")[0]) + b"build/lib"
    clean = _check(linux_cuda, library.parents[1], CPU_LIBRARY)
    assert clean.returncode == 0, clean.stdout
    plant_runpath(library, work)
    ran = _check(linux_cuda, library.parents[1], CPU_LIBRARY)
    assert ran.returncode == 1
    assert f"runpath: {CPU_LIBRARY}: {work.decode()} leaves the prefix" in ran.stdout.splitlines()


def test_a_cubin_of_an_architecture_nobody_asked_for_fails(linux_cuda: Layout, tmp_path: Path) -> None:
    library = _copy(linux_cuda, CUDA_LIBRARY, tmp_path)
    plant_cubin(library, linux_cuda.toolchain.nvcc, 70)
    ran = _check(linux_cuda, library.parents[1], CUDA_LIBRARY, "--cuda-version 13.0")
    assert ran.returncode == 1
    assert ran.stdout.splitlines() == [
        f"cuda-arch: {CUDA_LIBRARY}: sm_70 cubins, neither listed nor added by PyTorch"
    ]


@pytest.fixture(scope="module")
def linux_cuda_listing(linux_cuda: Layout) -> cuda_arch.Archs:
    tool = str(linux_cuda.toolchain.nvcc.parent / "cuobjdump")
    return cuda_arch.parse_listings(*cuda_arch.listings(tool, linux_cuda.split.prefix / CUDA_LIBRARY))


def test_the_architectures_pytorch_adds_are_known_and_no_others(linux_cuda_listing: cuda_arch.Archs) -> None:
    recipe = cuda_arch.parse_arch_list(cuda_arch_list("13.0", "linux-64"))
    added = cuda_arch.added_archs(recipe, "13.0")
    assert linux_cuda_listing.cubins - recipe.cubins == added & linux_cuda_listing.cubins
    assert {"sm_89", "sm_103"} <= linux_cuda_listing.cubins
    # what upstream's wheel lacks against the recipe's list: PTX (data: the wheel ships none)
    lines = [f.detail for f in cuda_arch.compare(CUDA_LIBRARY, recipe, linux_cuda_listing, "13.0")]
    assert lines == ["no PTX for sm_120 (+PTX)"]


@pytest.mark.parametrize(
    ("arch_list", "cuda", "expected"),
    [
        # a listed architecture the build lacks
        ("7.5;8.0;8.6;8.7;9.0;10.0;12.0", "13.0", ["no sm_87 cubins"]),
        # without 8.6 listed, PyTorch adds no sm_89: both are findings
        (
            "7.5;8.0;9.0;10.0;12.0",
            "13.0",
            [
                "sm_86 cubins, neither listed nor added by PyTorch",
                "sm_89 cubins, neither listed nor added by PyTorch",
            ],
        ),
        # before CUDA 12.9 Codegen.cmake adds no sm_103 / sm_121a
        (
            "7.5;8.0;8.6;9.0;10.0;12.0",
            "12.8",
            [
                "sm_103 cubins, neither listed nor added by PyTorch",
                "sm_121a cubins, neither listed nor added by PyTorch",
            ],
        ),
    ],
)
def test_the_architecture_check_fails_a_wrong_list(
    linux_cuda_listing: cuda_arch.Archs, arch_list: str, cuda: str, expected: list[str]
) -> None:
    wanted = cuda_arch.parse_arch_list(arch_list)
    found = cuda_arch.compare(CUDA_LIBRARY, wanted, linux_cuda_listing, cuda)
    assert [f.detail for f in found] == expected


def test_the_tegra_configs_libtorch_gate_runs_to_its_end(tmp_path: Path) -> None:
    """The Tegra config's rendered libtorch gate, on the real aarch64 libraries: the arm variant
    reaches the architecture check, which judges the wheel (an SBSA build, upstream has no Tegra
    one) against Tegra's list; every other check passes."""
    keys = {"target_platform": "linux-aarch64", "arm_variant_type": "tegra"}
    layout = _lay_out("linux-aarch64", keys, tmp_path)
    (gate,) = _gates(layout.outputs[LIBTORCH])
    assert "--arm-variant tegra" in gate
    ran = _run(gate, layout, tmp_path)
    print(ran.command, ran.stdout, ran.stderr, sep="\n")
    assert f"check-binaries: {len(layout.split.packages[LIBTORCH])} files of libtorch:" in ran.stderr
    assert ran.returncode == 1
    expected = json.loads(DATA.read_text(encoding="utf-8"))["tegra"]["findings"]
    assert ran.stdout.splitlines() == expected
