"""The cuDSS patch against the real cudss.h of cuDSS 0.8 (pip's nvidia-cudss-cu12).

The lines the patch adds must compile against the 0.8 API, the lines it
removes must not (otherwise the patch would be unnecessary). Only the headers
of the wheel are kept in the cache (``~/.cache/pytorch-feedstock/cudss-0.8``);
two stub headers stand in for the CUDA runtime types cudss.h refers to.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest
from feedstock import patch_check
from feedstock.paths import REPO as ROOT

CUDSS_WHEEL = "nvidia-cudss-cu12==0.8.0.10"
PATCH = next((ROOT / "recipe" / "patches").glob("*-cuDSS-0.8-*.patch"))

STUB_CUDA_RUNTIME = "#pragma once\ntypedef struct CUstream_st* cudaStream_t;\n"
STUB_LIBRARY_TYPES = """#pragma once
typedef enum cudaDataType_t {
  CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_C_32F = 4, CUDA_C_64F = 5,
  CUDA_R_32I = 10, CUDA_R_64I = 24
} cudaDataType_t;
typedef enum libraryPropertyType_t { MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
"""

# Stand-ins for what surrounds the patched lines in _apply_sparse_csr_linear_solve().
HARNESS = """#include <cstdint>
#include <type_traits>
#include <cudss.h>
#define TORCH_CUDSS_CHECK(expr) (void)(expr)
struct FakeTensor {
  int64_t size(int) const { return 1; }
  int64_t _nnz() const { return 1; }
  template <typename T> T* data_ptr() const { return nullptr; }
};
template <typename scalar_t>
void solve(const FakeTensor& values, const FakeTensor& b, const FakeTensor& x,
           const FakeTensor& A, const FakeTensor& crow, int* rowOffsets, int* colIndices) {
  cudssMatrix_t b_mt, x_mt, A_mt;
%s
}
template void solve<float>(const FakeTensor&, const FakeTensor&, const FakeTensor&,
                           const FakeTensor&, const FakeTensor&, int*, int*);
template void solve<double>(const FakeTensor&, const FakeTensor&, const FakeTensor&,
                            const FakeTensor&, const FakeTensor&, int*, int*);
"""


@pytest.fixture(scope="module")
def cudss_include() -> Path:
    cache = patch_check.cache_dir().parent / "cudss-0.8"
    include = cache / "include"
    if not (include / "cudss.h").exists():
        with tempfile.TemporaryDirectory() as tmp:
            try:
                patch_check.pip_download(CUDSS_WHEEL, "manylinux_2_17_x86_64", "3.12", Path(tmp), timeout=900)
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
                pytest.skip(f"{CUDSS_WHEEL} not reachable on PyPI: {exc}")
            wheel = next(Path(tmp).glob("*.whl"))
            include.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(wheel) as zf:
                for name in zf.namelist():
                    if "/include/" in name and name.endswith(".h"):
                        (include / Path(name).name).write_bytes(zf.read(name))
    (cache / "stub").mkdir(exist_ok=True)
    (cache / "stub" / "cuda_runtime.h").write_text(STUB_CUDA_RUNTIME)
    (cache / "stub" / "library_types.h").write_text(STUB_LIBRARY_TYPES)
    assert "CUDSS_VERSION_MINOR 8" in (include / "cudss.h").read_text()
    return include


def hunk_sides() -> tuple[str, str]:
    """(old, new) body of the patch's hunk: leading context plus the removed/added lines."""
    (diff,) = patch_check.split_patch(PATCH.read_text(encoding="utf-8"))
    (hunk,) = diff.hunks()
    lead = []
    for line in hunk:
        if not line.startswith(" "):
            break
        lead.append(line[1:])
    old = lead + [line[1:] for line in hunk if line.startswith("-")]
    new = lead + [line[1:] for line in hunk if line.startswith("+")]
    return "\n".join(old), "\n".join(new)


def compile_body(include: Path, body: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    cxx = shutil.which("g++") or shutil.which("clang++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    src = tmp_path / "cudss_calls.cpp"
    src.write_text(HARNESS % body)
    return subprocess.run(
        [cxx, "-std=c++17", "-fsyntax-only", f"-I{include.parent / 'stub'}", f"-I{include}", str(src)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_patched_calls_compile_against_cudss_0_8(cudss_include: Path, tmp_path: Path):
    _, new = hunk_sides()
    proc = compile_body(cudss_include, new, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_unpatched_calls_do_not(cudss_include: Path, tmp_path: Path):
    old, _ = hunk_sides()
    proc = compile_body(cudss_include, old, tmp_path)
    assert proc.returncode != 0
    assert "cudssDataType_t" in proc.stderr, proc.stderr
