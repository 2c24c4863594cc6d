"""The miniature's stand-in of ``cmake/Codegen.cmake``'s ``_BUILD_FOR_ADDITIONAL_ARCHS`` (what
RowwiseScaledMM.cu gets on top of ``TORCH_CUDA_ARCH_LIST``), configured by CMake without a compiler:
PyTorch 2.14's rules for each base architecture and CUDA version, and the recipe's binary check
expecting, for every CUDA list of the recipe, exactly the cubins the rules add.

What the built libraries hold (the added cubins, TORCH_INTERNAL_ASSERT's messages) is read by the
end-to-end tests from their builds (``tests/support/minitorch_traits.py``).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from megabuild.binaries.cuda_arch import added_archs, parse_arch_list
from megabuild.buildenv import cuda as cuda_lists
from support.minitorch_traits import ROWWISE_ADDED_CUBINS

MINITORCH = Path(__file__).parent / "fixture" / "minitorch"
ROWWISE = MINITORCH / "aten" / "src" / "ATen" / "native" / "cuda" / "RowwiseScaledMM.cu"

# a project without languages: the miniature's utils.cmake and Codegen.cmake with each case's nvcc
# version and list, RowwiseScaledMM.cu's COMPILE_FLAGS written out one case a line
PROJECT = """
cmake_minimum_required(VERSION 3.18)
project(codegen_rules NONE)
include("{minitorch}/cmake/public/utils.cmake")
include("${{CMAKE_CURRENT_LIST_DIR}}/cases.cmake")
set(lines "")
foreach(case IN LISTS CASES)
  set(CMAKE_CUDA_COMPILER_VERSION "${{${{case}}_NVCC}}")
  set(CUDA_VERSION "${{${{case}}_CUDA}}")
  set(TORCH_CUDA_ARCH_LIST "${{${{case}}_LIST}}")
  include("{minitorch}/cmake/Codegen.cmake")
  get_source_file_property(flags "{rowwise}" COMPILE_FLAGS)
  string(APPEND lines "${{flags}}\\n")
endforeach()
file(WRITE "${{CMAKE_BINARY_DIR}}/flags.txt" "${{lines}}")
"""

# (nvcc's full version, the list) -> the -gencode archs Codegen.cmake adds, by 2.14's rules
CASES = {
    ("13.0.88", "7.5;8.0;8.6;9.0;10.0;12.0+PTX"): {"89", "90a", "100a", "103f", "120a", "121a"},
    ("13.0.88", "8.0;8.7;9.0;10.0;11.0;12.0+PTX"): {"90a", "100a", "103f", "110a", "120a", "121a"},
    ("12.9.86", "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"): {"89", "90a", "100a", "103f", "120a", "121a"},
    # 103f and 121a need CUDA 12.9, 110a 13.0 (and compute_110 in the list)
    ("12.8.93", "8.6;9.0;10.0;11.0;12.0"): {"89", "90a", "100a", "120a"},
    ("12.6.85", "5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX"): {"89", "90a"},
    # only the base architecture counts: 8.7 is not 8.6, 8.9 itself adds nothing
    ("12.9.86", "8.7+PTX"): set(),
    ("12.9.86", "8.9;12.0"): {"120a", "121a"},
    # the whole function is for CUDA 12.0 and later
    ("11.8.89", "8.6;9.0"): set(),
}


def _added_by_codegen(cases: list[tuple[str, str]], tmp_path: Path) -> list[set[str]]:
    """The archs Codegen.cmake adds to RowwiseScaledMM.cu for each (nvcc version, list)."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake not on PATH")
    src, build = tmp_path / "src", tmp_path / "build"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(PROJECT.format(minitorch=MINITORCH, rowwise=ROWWISE))
    names = [f"case{i}" for i in range(len(cases))]
    lines = [f'set(CASES "{";".join(names)}")']
    for name, (nvcc, arch_list) in zip(names, cases):
        cuda = ".".join(nvcc.split(".")[:2])  # cuda.cmake: the toolkit's major.minor
        lines += [
            f'set({name}_NVCC "{nvcc}")',
            f'set({name}_CUDA "{cuda}")',
            f'set({name}_LIST "{arch_list}")',
        ]
    (src / "cases.cmake").write_text("\n".join(lines) + "\n")
    proc = subprocess.run(["cmake", "-S", src, "-B", build], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    added = []
    for line in (build / "flags.txt").read_text().splitlines():
        tokens = line.split()
        assert tokens[0::2] == ["-gencode"] * (len(tokens) // 2), line
        pairs = [t.removeprefix("arch=compute_").split(",code=sm_") for t in tokens[1::2]]
        assert all(virtual == real for virtual, real in pairs), line
        added.append({virtual for virtual, _ in pairs})
    assert len(added) == len(cases)
    return added


def test_codegen_adds_upstreams_architectures_to_rowwise_scaled_mm(tmp_path: Path) -> None:
    cases = list(CASES)
    assert _added_by_codegen(cases, tmp_path) == [CASES[c] for c in cases]


def _recipe_lists() -> list[tuple[str, str]]:
    """Every CUDA list of the recipe with its CUDA version."""
    lists = [(version, arch_list) for (version, _), arch_list in cuda_lists.ARCH_LISTS.items()]
    return lists + list(cuda_lists.TEGRA_ARCH_LISTS.items())


def test_the_binary_check_expects_what_codegen_adds_for_every_recipe_list(tmp_path: Path) -> None:
    """The check's table of what PyTorch adds (megabuild.binaries.cuda_arch) against the miniature's
    Codegen.cmake, as cuobjdump names the cubins (103f: sm_103)."""
    lists = _recipe_lists()
    added = _added_by_codegen([(f"{version}.0", arch_list) for version, arch_list in lists], tmp_path)
    for (version, arch_list), archs in zip(lists, added):
        listed = {f"sm_{arch.removesuffix('f')}" for arch in archs}
        assert listed <= set(ROWWISE_ADDED_CUBINS), (version, arch_list, listed)
        assert added_archs(parse_arch_list(arch_list), version) == listed, (version, arch_list)
