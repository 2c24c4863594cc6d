"""The CUDA architectures of a fatbin against TORCH_CUDA_ARCH_LIST (a library compiled here with
NVIDIA's nvcc from PyPI, listed by its cuobjdump), and torch.__config__.show() against the variant.

The toolchain is the one ``feedstock.conda_build_standin.cuda_toolchain`` unpacks
(``FEEDSTOCK_CUDA_TOOLCHAIN`` or
``~/.cache/pytorch-feedstock/cuda-toolchain/13.0.88``); without it the nvcc test skips with one
line, and fails under ``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN=1``.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from megabuild.binaries import cuda_arch, torch_config
from megabuild.binaries.findings import Finding
from megabuild.errors import MegabuildError
from megabuild.model import LINALG, LinalgVariant
from support.megabuild_cli import run_megabuild

KERNEL = "__global__ void k(float *x) { x[threadIdx.x] *= 2; }\nvoid launch(float *x) { k<<<1, 32>>>(x); }\n"
# sm_75, sm_80 and sm_90 cubins, PTX for compute_80, and an arch-specific sm_90a cubin (as single
# kernels of libtorch_cuda ask for with -gencode arch=compute_90a)
GENCODE = (
    "arch=compute_75,code=sm_75",
    "arch=compute_80,code=[sm_80,compute_80]",
    "arch=compute_90,code=sm_90",
    "arch=compute_90a,code=sm_90a",
)


def toolchain_bin() -> Path:
    root = os.environ.get("FEEDSTOCK_CUDA_TOOLCHAIN") or str(
        Path.home() / ".cache/pytorch-feedstock/cuda-toolchain/13.0.88"
    )
    found = Path(root) / "nvidia/cu13/bin"
    if (found / "nvcc").is_file() and (found / "cuobjdump").is_file():
        return found
    reason = (
        f"no CUDA 13 toolchain from PyPI's wheels at {root} (.ci/provision-cuda-toolchain.sh provisions it)"
    )
    if os.environ.get("FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN", "") not in ("", "0"):
        pytest.fail(f"FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def cuda_prefix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tools = toolchain_bin()
    work = tmp_path_factory.mktemp("cuda")
    (work / "k.cu").write_text(KERNEL)
    flags = [f"-gencode={g}" for g in GENCODE]
    subprocess.run(
        [str(tools / "nvcc"), "-c", "-Xcompiler", "-fPIC", *flags, "k.cu", "-o", "k.o"], cwd=work, check=True
    )
    (work / "env/lib").mkdir(parents=True)
    subprocess.run(
        ["gcc", "-shared", "-nostdlib", "-o", "env/lib/libtorch_cuda.so", "k.o"], cwd=work, check=True
    )
    return work / "env", tools / "cuobjdump"


def test_the_fatbin_holds_what_was_asked(cuda_prefix: tuple[Path, Path]) -> None:
    prefix, cuobjdump = cuda_prefix
    found = cuda_arch.parse_listings(*cuda_arch.listings(str(cuobjdump), prefix / "lib/libtorch_cuda.so"))
    assert found == cuda_arch.Archs(frozenset({"sm_75", "sm_80", "sm_90", "sm_90a"}), frozenset({"sm_80"}))
    wanted = cuda_arch.parse_arch_list("7.5;8.0+PTX;9.0;10.0")
    assert cuda_arch.compare("lib/libtorch_cuda.so", wanted, found, "13.0") == [
        Finding("cuda-arch", "lib/libtorch_cuda.so", "no sm_100 cubins")
    ]


@pytest.mark.parametrize(
    ("arch_list", "lines"),
    [
        ("7.5;8.0+PTX;9.0", []),  # sm_90a: an arch-specific variant of 9.0, no architecture of its own
        ("7.5;8.0;9.0", ["cuda-arch: lib/libtorch_cuda.so: PTX for sm_80, not asked for"]),
        (
            "7.5;8.6;12.0+PTX",
            [
                "cuda-arch: lib/libtorch_cuda.so: no sm_120 cubins",
                "cuda-arch: lib/libtorch_cuda.so: no sm_86 cubins",
                "cuda-arch: lib/libtorch_cuda.so: sm_80 cubins, neither listed nor added by PyTorch",
                "cuda-arch: lib/libtorch_cuda.so: sm_90 cubins, neither listed nor added by PyTorch",
                "cuda-arch: lib/libtorch_cuda.so: sm_90a cubins, neither listed nor added by PyTorch",
                "cuda-arch: lib/libtorch_cuda.so: no PTX for sm_120 (+PTX)",
                "cuda-arch: lib/libtorch_cuda.so: PTX for sm_80, not asked for",
            ],
        ),
    ],
)
def test_the_command_line(cuda_prefix: tuple[Path, Path], arch_list: str, lines: list[str]) -> None:
    prefix, cuobjdump = cuda_prefix
    where = ["--prefix", prefix, "--path", "lib/libtorch_cuda.so", "--target-platform", "linux-64"]
    listed = ("--cuda-arch-list", arch_list, "--cuda-version", "13.0", "--cuobjdump", cuobjdump)
    done = run_megabuild("check-binaries", *where, *listed)
    assert done.stdout.splitlines() == lines, done.stderr
    assert done.returncode == (1 if lines else 0)


def test_arch_list_parsing() -> None:
    assert cuda_arch.parse_arch_list("7.5;8.0;8.6;9.0;10.0;12.0+PTX") == cuda_arch.Archs(
        frozenset({"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}), frozenset({"sm_120"})
    )
    with pytest.raises(MegabuildError, match="not like"):
        cuda_arch.parse_arch_list("sm_90")


# -- torch.__config__.show() ---------------------------------------------------------------------

SHOW = """PyTorch built with:
  - GCC 14.3
  - C++ Version: 201703
  - Intel(R) oneAPI Math Kernel Library Version 2025.2-Product Build 20250620
  - Intel(R) MKL-DNN v3.9.1 (Git Hash 0fd9a23e6e9e1fd2eb64b2f36a5bee3e8e52ee62)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - LAPACK is enabled (usually provided by MKL)
  - CPU capability usage: AVX2
{cuda}  - Build settings: BLAS_INFO={blas}, BUILD_TYPE=Release, {cuda_version}\
CXX_COMPILER=/opt/rh/gcc-toolset-14/root/usr/bin/c++, LAPACK_INFO={blas}, TORCH_VERSION=2.14.1, \
USE_CUDA={use_cuda}, USE_CUDNN={use_cuda}, USE_MKL={use_mkl}, USE_MKLDNN=ON, USE_MPI=OFF, \
USE_NCCL={use_cuda}, USE_OPENMP=ON,
"""
CUDA_LINES = "  - CUDA Runtime 13.0\n  - NVCC architecture flags: -gencode;arch=compute_75,code=sm_75\n"


def show(blas: str = "mkl", cuda: bool = False, magma: bool = False) -> str:
    lines = (CUDA_LINES + ("  - Magma 2.9.0\n" if magma else "")) if cuda else ""
    return SHOW.format(
        cuda=lines, blas=blas, cuda_version="CUDA_VERSION=13.0, " if cuda else "",
        use_cuda="ON" if cuda else "OFF", use_mkl="ON" if blas == "mkl" else "OFF",
    )  # fmt: skip


V = torch_config.Variant
CASES = [
    (show(), V("mkl", None, None, True), []),
    (show("generic"), V("generic", None), []),
    (show(cuda=True, magma=True), V("mkl", "13.0", True), []),
    (show(cuda=True), V("mkl", "13.0", False), []),
    (show("generic"), V("mkl", None), ["blas_impl mkl, but BLAS_INFO=generic, USE_MKL=OFF"]),
    (show(), V("generic", None), ["blas_impl generic, but BLAS_INFO=mkl, USE_MKL=ON"]),
    (show(cuda=True), V("mkl", None), ["CPU build, but USE_CUDA=ON, CUDA Runtime 13.0"]),
    (show(cuda=True), V("mkl", "12.6"), ["CUDA 12.6 build, but CUDA_VERSION=13.0"]),
    (
        show(),
        V("mkl", "13.0"),
        ["CUDA 13.0 build, but USE_CUDA=OFF", "CUDA 13.0 build, but CUDA_VERSION=(none)"],
    ),
    (
        show(cuda=True),
        V("mkl", "13.0", True),
        ["the installed linalg variant links MAGMA, but no 'Magma' line"],
    ),
    (show(cuda=True, magma=True), V("mkl", "13.0", False), ["no MAGMA installed, but 'Magma 2.9.0'"]),
    (show(), V("mkl", None, None, False), ["MKL-DNN not expected, USE_MKLDNN=ON"]),
    ("PyTorch built with:\n", V("mkl", None), ["no 'Build settings:' line"]),
]


@pytest.mark.parametrize(("text", "variant", "expected"), CASES)
def test_torch_config(text: str, variant: torch_config.Variant, expected: list[str]) -> None:
    assert [f.detail for f in torch_config.compare(text, variant)] == expected


def test_without_a_gpu_magma_comes_from_the_library() -> None:
    """No GPU: at::show_config() prints no CUDA hook lines (no 'CUDA Runtime', no 'Magma'); the
    answer comes from torch._C (tests/test_torch_config_magma.py: every source)."""
    text = show(cuda=True).replace(CUDA_LINES, "")
    assert torch_config.compare(text, V("mkl", "13.0", True)) == []  # not known, outside CI: a warning
    function = torch_config.FUNCTION
    assert torch_config.compare(text, V("mkl", "13.0", True), torch_config.MagmaAnswer(True, function)) == []
    found = torch_config.compare(text, V("mkl", "13.0", True), torch_config.MagmaAnswer(False, function))
    assert [f.detail for f in found] == [f"the installed linalg variant links MAGMA, but {function} is False"]


def test_torch_config_command_line_reads_the_installed_linalg_variant(tmp_path: Path) -> None:
    (tmp_path / "show.txt").write_text(show(cuda=True, magma=True))
    (tmp_path / "conda-meta").mkdir()

    def record(variant: LinalgVariant) -> str:
        return json.dumps({"name": LINALG, "build": f"cuda130_mkl_{variant.value}_h1234567_200", "files": []})

    meta = tmp_path / f"conda-meta/{LINALG}-2.14.1-x.json"
    args = ["check-torch-config", "--blas", "mkl", "--cuda-version", "13.0", "--prefix", tmp_path,
            "--show-file", tmp_path / "show.txt"]  # fmt: skip
    meta.write_text(record(LinalgVariant.MAGMA))
    assert run_megabuild(*args).returncode == 0
    meta.write_text(record(LinalgVariant.NOMAGMA))
    done = run_megabuild(*args)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "torch-config: torch.__config__.show(): no MAGMA installed, but 'Magma 2.9.0'"
    ]
