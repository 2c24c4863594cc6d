"""The environment PyTorch 2.14's EnvVarForwarding.cmake writes into the cache on every configure.

The trap first (real scikit-build-core, the fixture's EnvVarForwarding-like module): one
``CMAKE_*`` variable exported in a later step and not in the first flips the cache and every
object compiles again. Then the guard: the pytorch step compares its forwarded environment with
the top level's record and refuses, in one line, before anything is built.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree
from megabuild.errors import MegabuildError
from megabuild.pipeline import forwarded_env

TOP = {"USE_CUDA": "0", "BLAS": "MKL", "CMAKE_ARGS": "-DX=1", "MAX_JOBS": "8", "HOME": "/h", "PY_VER": "3.12"}


def test_forwarded_is_the_cmake_rule_plus_passthrough() -> None:
    got = forwarded_env.forwarded(
        TOP | {"TORCH_CUDA_ARCH_LIST": "8.0", "FOO_EXITCODE": "0", "CUDA_HOME": "/c"}
    )
    assert set(got) == {"USE_CUDA", "BLAS", "CMAKE_ARGS", "MAX_JOBS", "TORCH_CUDA_ARCH_LIST", "FOO_EXITCODE"}


def test_the_same_environment_passes_and_a_python_dependent_one_is_not_compared(tmp_path: Path) -> None:
    record = tmp_path / "forwarded-env.json"
    forwarded_env.record(record, TOP)
    assert json.loads(record.read_text())["USE_CUDA"] == "0"
    assert forwarded_env.check_same_as_top_level(record, TOP | {"PY_VER": "3.10", "SP_DIR": "/x"}) == 4


@pytest.mark.parametrize(
    ("change", "named"),
    [({"CMAKE_CXX_COMPILER_LAUNCHER": "sccache"}, "LAUNCHER='sccache' (unset at the top level)"),
     ({"USE_CUDA": "1"}, "USE_CUDA='1' (top level: '0')"),
     ({"MAX_JOBS": None}, "MAX_JOBS unset (top level: '8')")],
)  # fmt: skip
def test_a_different_environment_is_refused_naming_the_variable(
    tmp_path: Path, change: dict[str, str | None], named: str
) -> None:
    record = tmp_path / "forwarded-env.json"
    forwarded_env.record(record, TOP)
    env = {k: v for k, v in (TOP | change).items() if v is not None}
    with pytest.raises(MegabuildError, match="EnvVarForwarding") as err:
        forwarded_env.check_same_as_top_level(record, env)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_a_missing_or_broken_record_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(MegabuildError, match="is missing"):
        forwarded_env.load(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("[1]")
    with pytest.raises(MegabuildError, match="not a JSON object"):
        forwarded_env.load(tmp_path / "bad.json")


@pytest.mark.slow
def test_one_forwarded_variable_more_recompiles_everything(
    tmp_path: Path, cpythons: list[CPython], pip_wheel_cache: Path
) -> None:
    """The trap the guard exists for, on the real backend: same Python, same tree, one CMAKE_*
    variable more in the second step's environment (here compile flags)."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None or not cpythons:
        pytest.skip("cmake, ninja and a CPython are needed")
    tree = SkbuildTree.create(tmp_path, CONDA_FORGE_SKBUILD, pip_wheel_cache)
    tree.host_env(cpythons[-1])
    tree.pip_install()
    history = ninja.LogHistory()
    history.ran(tree.build)
    tree.pip_install()
    same = [o for o in history.ran(tree.build) if ninja.kind(o) == "compile"]
    tree.extra_env = {"CMAKE_CXX_FLAGS": "-DMEGABUILD_PROBE=1"}
    tree.pip_install()
    flipped = [o for o in history.ran(tree.build) if ninja.kind(o) == "compile"]
    print(f"\nsame environment: {len(same)} compiles; one CMAKE_* more: {len(flipped)} compiles")
    assert same == []  # empty.cpp would be, were it rewritten by every configure (patch 0012)
    assert {"c10", "torch_cpu", "torch_python"} <= set(ninja.by_target(flipped)), flipped
