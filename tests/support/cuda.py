"""The real CUDA 13 toolchain for the tests, and the recipe's CUDA architecture list.

``.ci/provision-cuda-toolchain.sh`` downloads NVIDIA's CUDA 13.0 wheels into the wheel cache and
unpacks them (``feedstock.conda_build_standin.cuda_toolchain``); ``.ci/run`` sets
``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN=1``,
so in CI a real-nvcc test fails instead of skipping. Elsewhere it skips with one line.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from feedstock.conda_build_standin import cuda_toolchain
from feedstock.conda_build_standin.cuda_toolchain import REQUIRE_ENV, Toolchain
from feedstock.paths import RECIPE

from support.build_sh import source_build_sh


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def toolchain_or_skip() -> Toolchain:
    """The provisioned CUDA 13.0 toolchain, or skip (fail under ``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN``)."""
    found = cuda_toolchain.find()
    if found is not None:
        return found
    reason = (
        f"no CUDA {cuda_toolchain.CUDA_VERSION} toolchain at {cuda_toolchain.toolchain_dir()} "
        "(run .ci/provision-cuda-toolchain.sh)"
    )
    if required():
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


# ------------------------------------------------------------------------------------------------
# the recipe's architecture list, as the tests read and plant it: read by running build.sh (whose
# environment comes from `megabuild env`), planted where the recipe defines it (megabuild.buildenv)
# ------------------------------------------------------------------------------------------------


def recipe_cuda_arch_list(
    cuda_version: str, target_platform: str, tmp_path: Path, recipe_dir: Path = RECIPE
) -> str:
    """``TORCH_CUDA_ARCH_LIST`` as the recipe's ``build.sh`` in ``recipe_dir`` exports it."""
    env, _ = source_build_sh(
        tmp_path, recipe_dir, cuda_compiler_version=cuda_version, target_platform=target_platform
    )
    return env["TORCH_CUDA_ARCH_LIST"]


def plant_cuda_arch_list(
    recipe_copy: Path, cuda_version: str, target_platform: str, arch_list: str, tmp_path: Path
) -> None:
    """Make the recipe copy in ``recipe_copy`` ask for ``arch_list`` for that CUDA version and platform."""
    old = recipe_cuda_arch_list(cuda_version, target_platform, tmp_path / "before", recipe_copy)
    table = recipe_copy / "megabuild" / "buildenv" / "cuda.py"
    text = table.read_text()
    key = f'("{cuda_version}", "{target_platform}"): '
    entry = f'{key}"{old}"'
    assert text.count(entry) == 1, f"{entry} is not written exactly once in {table}"
    table.write_text(text.replace(entry, f'{key}"{arch_list}"'))
    now = recipe_cuda_arch_list(cuda_version, target_platform, tmp_path / "after", recipe_copy)
    assert now == arch_list, (now, arch_list)


# ------------------------------------------------------------------------------------------------
# what a list asks nvcc for, and what a library holds
# ------------------------------------------------------------------------------------------------


def expected_device_code(arch_list: str) -> tuple[set[str], set[str]]:
    """(cubin architectures, PTX architectures) a ``TORCH_CUDA_ARCH_LIST`` asks for:
    ``7.5;12.0+PTX`` -> ({sm_75, sm_120}, {sm_120})."""
    cubins, ptx = set(), set()
    for entry in re.split(r"[;\s]+", arch_list.strip()):
        arch, plus, _ = entry.partition("+PTX")
        sm = "sm_" + arch.replace(".", "")
        cubins.add(sm)
        if plus:
            ptx.add(sm)
    return cubins, ptx


def device_code(cuobjdump: Path, library: Path) -> tuple[set[str], set[str]]:
    """(cubin architectures, PTX architectures) in ``library``'s fatbins (``cuobjdump``)."""
    proc = subprocess.run(
        [str(cuobjdump), "--list-elf", "--list-ptx", str(library)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    cubins = set(re.findall(r"ELF file\s+\d+: \S+\.(sm_\w+?)\.cubin", proc.stdout))
    ptx = set(re.findall(r"PTX file\s+\d+: \S+\.(sm_\w+?)\.ptx", proc.stdout))
    return cubins, ptx
