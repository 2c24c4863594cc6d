"""CUDA 13.0's nvcc from PyPI laid out as conda-forge's CUDA packages
(``feedstock.conda_build_standin.cuda_toolchain``),
its provisioning in CI, and the build report's CUDA compiles.

The layout tests need the provisioned toolchain (``.ci/provision-cuda-toolchain.sh``): they skip
with one line without it, and fail under ``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN=1`` (CI).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.conda_build_standin import compiler_activation, cuda_toolchain
from feedstock.conda_build_standin.cuda_toolchain import REQUIRE_ENV, TARGET_DIR, Toolchain
from feedstock.telemetry import Build, Edge, Pass, render_markdown, summarize
from support.cuda import device_code, expected_device_code, recipe_cuda_arch_list, toolchain_or_skip

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / ".ci" / "provision-cuda-toolchain.sh"
KERNEL = "__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n"
ARCHS = "7.5;9.0+PTX"


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return toolchain_or_skip()


def _gencode(arch_list: str) -> list[str]:
    cubins, ptx = expected_device_code(arch_list)
    flags = [f"-gencode=arch=compute_{sm[3:]},code={sm}" for sm in sorted(cubins)]
    return flags + [f"-gencode=arch=compute_{sm[3:]},code=compute_{sm[3:]}" for sm in sorted(ptx)]


def _nvcc_shared_library(
    build_prefix: Path, host_prefix: Path, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """nvcc from the build env, with cuda-nvcc's activation flags, linking a shared library."""
    (tmp_path / "k.cu").write_text(KERNEL)
    env = {"PATH": f"{build_prefix / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    env.update(compiler_activation.nvcc_env("linux-64", prefix=host_prefix, cxx="g++"))
    cmd = [str(build_prefix / "bin" / "nvcc"), *_gencode(ARCHS), "-Xfatbin", "-compress-all", "-shared",
           "-Xcompiler", "-fPIC", "-cudart", "shared", "k.cu", "-o", "libk.so"]  # fmt: skip
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_build_and_host_envs_hold_conda_forges_layout(toolchain: Toolchain, tmp_path: Path) -> None:
    build, host = tmp_path / "build_env", tmp_path / "host_env"
    cuda_toolchain.install_build_env(toolchain, build)
    cuda_toolchain.install_host_env(toolchain, host)
    for tool in ("nvcc", "ptxas", "nvlink", "fatbinary", "cudafe++", "cuobjdump", "crt/link.stub"):
        assert (build / "bin" / tool).is_file(), tool
    assert os.readlink(build / TARGET_DIR / "lib64") == "lib"
    assert (build / TARGET_DIR / "bin" / "nvcc").resolve() == (build / "bin" / "nvcc").resolve()
    assert (build / TARGET_DIR / "nvvm" / "bin" / "cicc").is_file()
    assert (build / "nvvm" / "libdevice" / "libdevice.10.bc").is_file()
    for prefix in (build, host):
        assert (prefix / TARGET_DIR / "include" / "cuda_runtime.h").is_file()
        assert (prefix / TARGET_DIR / "include" / "cccl").is_dir()
        assert os.readlink(prefix / TARGET_DIR / "lib" / "libcudart.so") == "libcudart.so.13"
        assert (prefix / "lib" / "libcudart.so.13").resolve().parent == (
            prefix / TARGET_DIR / "lib"
        ).resolve()
    assert not (host / "bin" / "nvcc").exists()
    # conda links package files: the big binaries are the cache's, not copies
    assert (build / "bin" / "nvcc").stat().st_ino == toolchain.nvcc.stat().st_ino


def test_nvcc_in_the_layout_builds_what_it_is_asked_for(toolchain: Toolchain, tmp_path: Path) -> None:
    build, host = tmp_path / "build_env", tmp_path / "host_env"
    cuda_toolchain.install_build_env(toolchain, build)
    cuda_toolchain.install_host_env(toolchain, host)
    proc = _nvcc_shared_library(build, host, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert device_code(build / "bin" / "cuobjdump", tmp_path / "libk.so") == expected_device_code(ARCHS)
    assert cuda_toolchain.nvcc_version(build / "bin" / "nvcc") == cuda_toolchain.CUDA_VERSION


def test_the_wheels_tree_as_it_is_cannot_link(toolchain: Toolchain, tmp_path: Path) -> None:
    """The naive layout: the wheels' ``nvidia/cu13`` tree as the build env. Its nvcc.profile asks
    for ``lib64`` (``_TARGET_SIZE_``) under a targets dir the wheels do not have: the link step
    cannot find ``-lcudadevrt``, which the conda layout (and the activation's flags) provide."""
    build = tmp_path / "wheel_tree"
    shutil.copytree(toolchain.cu13, build, copy_function=os.link)
    (tmp_path / "k.cu").write_text(KERNEL)
    env = {"PATH": f"{build / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    cmd = [
        str(build / "bin" / "nvcc"),
        *_gencode(ARCHS),
        "-shared",
        "-Xcompiler",
        "-fPIC",
        "k.cu",
        "-o",
        "libk.so",
    ]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, "nvcc linked from the wheels' tree as it is"
    assert "cudadevrt" in proc.stderr or "cuda_runtime.h" in proc.stderr, proc.stderr


# ------------------------------------------------------------------------------------------------
# the recipe's architecture lists against nvcc 13.0 and upstream's wheel
# ------------------------------------------------------------------------------------------------

# cuobjdump on libtorch_cuda.so of upstream's torch 2.14.1 cu130 linux x86_64 wheel:
# cubins for these architectures (plus sm_100a/103 flash-attention kernels).
UPSTREAM_CU130_X86_64_CUBINS = {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"}


def _gpu_codes(toolchain: Toolchain) -> set[str]:
    out = subprocess.run([str(toolchain.nvcc), "--list-gpu-code"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("target_platform", ["linux-64", "linux-aarch64"])
def test_nvcc_13_0_builds_every_architecture_of_the_recipes_13_0_list(
    toolchain: Toolchain, target_platform: str, tmp_path: Path
) -> None:
    cubins, ptx = expected_device_code(recipe_cuda_arch_list("13.0", target_platform, tmp_path))
    assert ptx and ptx <= cubins
    assert cubins <= _gpu_codes(toolchain), sorted(cubins - _gpu_codes(toolchain))


def test_cuda_12_6s_list_needs_an_nvcc_older_than_13(toolchain: Toolchain, tmp_path: Path) -> None:
    """Why the 12.6 configs keep the C++ stand-ins: CUDA 13 dropped sm_50 to sm_72."""
    cubins, _ = expected_device_code(recipe_cuda_arch_list("12.6", "linux-64", tmp_path))
    assert cubins - _gpu_codes(toolchain)


def test_the_recipes_13_0_list_builds_every_architecture_upstreams_wheel_holds(tmp_path: Path) -> None:
    """Dropping an architecture from the CUDA 13.0 linux-64 list fails here."""
    cubins, _ = expected_device_code(recipe_cuda_arch_list("13.0", "linux-64", tmp_path))
    assert cubins >= UPSTREAM_CU130_X86_64_CUBINS, sorted(UPSTREAM_CU130_X86_64_CUBINS - cubins)


# ------------------------------------------------------------------------------------------------
# provisioning and CI
# ------------------------------------------------------------------------------------------------


def test_a_provisioned_toolchain_is_reused_without_downloading(tmp_path: Path) -> None:
    root = tmp_path / "pytorch-feedstock" / "cuda-toolchain" / cuda_toolchain.RELEASE
    for tool in ("nvcc", "cuobjdump"):
        (root / "nvidia/cu13/bin" / tool).parent.mkdir(parents=True, exist_ok=True)
        (root / "nvidia/cu13/bin" / tool).write_text("")
    (root / ".provisioned").write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path),
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1"}  # fmt: skip
    proc = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{root}\n"


def test_a_failed_download_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path),
           "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "",
           "PIP_CONFIG_FILE": os.devnull}  # fmt: skip
    proc = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith("cuda_toolchain: error: pip download of the CUDA 13.0 wheels failed")
    assert not (tmp_path / "pytorch-feedstock" / "cuda-toolchain").exists()


def test_ci_run_provisions_and_requires_it() -> None:
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    (i,) = [n for n, line in enumerate(lines) if "provision-cuda-toolchain.sh" in line]
    assert i < len(lines) - 1
    assert lines[i].startswith('FEEDSTOCK_CUDA_TOOLCHAIN="$(.ci/provision-cuda-toolchain.sh)"; export ')
    assert f"{REQUIRE_ENV}=1" in lines[i]


def test_without_the_toolchain_tests_skip_but_fail_when_required(tmp_path: Path) -> None:
    node = f"{Path(__file__).name}::test_build_and_host_envs_hold_conda_forges_layout"
    env = {
        **os.environ,
        "XDG_CACHE_HOME": str(tmp_path),
        cuda_toolchain.TOOLCHAIN_ENV: str(tmp_path / "none"),
    }
    env.pop(REQUIRE_ENV, None)
    cmd = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node]
    relaxed = subprocess.run(cmd, cwd=REPO / "tests", env=env, capture_output=True, text=True, timeout=300)
    assert relaxed.returncode == 0 and "1 skipped" in relaxed.stdout, relaxed.stdout
    assert "run .ci/provision-cuda-toolchain.sh" in relaxed.stdout
    strict = subprocess.run(
        cmd, cwd=REPO / "tests", env={**env, REQUIRE_ENV: "1"}, capture_output=True, text=True, timeout=300
    )
    assert strict.returncode == 1 and f"{REQUIRE_ENV} is set but" in strict.stdout, strict.stdout


# ------------------------------------------------------------------------------------------------
# the build report counts CUDA compiles apart
# ------------------------------------------------------------------------------------------------


def test_the_report_counts_cuda_compiles_apart() -> None:
    edges = [
        Edge("caffe2/CMakeFiles/torch_cuda.dir/aten/src/ATen/native/cuda/Sort.cu.o", 0, 4),
        Edge("caffe2/CMakeFiles/torch_cuda.dir/aten/src/ATen/cuda/CUDAContext.cpp.o", 0, 1),
        Edge("lib/libtorch_cuda.so", 4, 5),
    ]
    summary = summarize(Build(Path("."), [Pass("libtorch", 0.0, 5.0, edges)]))
    (top,) = summary["passes"]
    assert (top["compiles"], top["cuda_compiles"]) == (2, 1)
    assert summary["total"]["cuda_compiles"] == 1
    assert "| 2 (1 CUDA) |" in render_markdown(summary, "t")
