"""The environment of every build step (top level and each pytorch output), per target.

Parity with the upstream wheels (docs/packages.md: "Features compared with upstream"); the
values are strings as the scripts export them. An empty value means "unset" to cmd's
``set "K="`` and "empty" to sh; either way every step sees the same.
"""

from __future__ import annotations

from megabuild.buildenv import cuda
from megabuild.buildenv.target import BuildTarget, Locations
from megabuild.cmake_args import add_find_root
from megabuild.model import GENERIC_BLAS, MKL_BLAS

CI_RUNNERS = "github_actions"
# One compile job per core gets OOM-killed on conda-forge's 16-vCPU / 64 GB runners (nvcc and the
# big torch_cpu units need several GB each): the pytorch-cpu feedstock caps CI builds at 8 jobs;
# MSVC + nvcc run out of memory above 4. Local builds use CPU_COUNT as build-locally.py chose it.
CI_MAX_JOBS = 8
CI_MAX_JOBS_WINDOWS = 4

FEATURES = {
    "USE_MKLDNN": "1",
    "USE_KINETO": "1",
    "USE_DISTRIBUTED": "1",
    "USE_GLOO": "1",
    "USE_MPI": "0",
    "USE_NUMA": "0",
    "USE_ITT": "0",
    "USE_NNPACK": "1",
    "USE_PYTORCH_QNNPACK": "1",
    "USE_FBGEMM": "1",
    # the upstream x86_64 wheels ship without XNNPACK (torch.__config__.show())
    "USE_XNNPACK": "0",
}
FEATURES_BY_PLATFORM = {
    # FBGEMM is x86-only; oneDNN has no Apple-silicon build upstream
    "osx-arm64": {"USE_FBGEMM": "0", "USE_MKLDNN": "0", "USE_XNNPACK": "1"},
    # Intel Macs: no MPS. cmake/Codegen.cmake puts HAVE_AVX2_CPU_DEFINITION and
    # HAVE_AVX512_CPU_DEFINITION into CMAKE_CXX_FLAGS only, and DispatchStub.h has members under
    # them, so the Objective-C++ MPS sources would see another DispatchStub layout than the C++
    # ones (an ODR violation). Upstream has shipped no x86_64 macOS wheel since 2.2, so MPS on an
    # Intel Mac (AMD GPUs only) is untested upstream; USE_MPS is upstream's switch, forwarded as is.
    "osx-64": {"USE_MPS": "0"},
    # Breakpad does not support aarch64 (pytorch/pytorch#67083)
    "linux-aarch64": {"USE_FBGEMM": "0", "USE_XNNPACK": "1", "USE_BREAKPAD": "0"},
    # protobuf-lite as upstream's Windows wheels; OpenMP from MKL's libiomp5md.dll (intel-openmp)
    "win-64": {"USE_LITE_PROTO": "ON", "USE_OPENMP": "ON"},
}
# conda-forge's generic BLAS is the netlib-named interface (libblas/libcblas/liblapack, switchable
# at install time); there is no library named openblas, which BLAS=OpenBLAS (FindOpenBLAS.cmake,
# REQUIRED) insists on. The Generic branch (patch 0005: blas + cblas) links the netlib names.
BLAS = {MKL_BLAS: "MKL", GENERIC_BLAS: "Generic"}


def max_jobs(target: BuildTarget) -> int:
    cap = CI_MAX_JOBS_WINDOWS if target.is_windows else CI_MAX_JOBS
    return min(target.cpu_count, cap) if target.ci == CI_RUNNERS else target.cpu_count


def _packaging() -> dict[str, str]:
    return {
        # scikit-build-core's metadata provider (tools/metadata) reads these; build number 0 keeps
        # it from appending ".post<N>"
        "PYTORCH_BUILD_NUMBER": "0",
        "PACKAGE_TYPE": "conda",
        "BUILD_TEST": "0",
        "INSTALL_TEST": "0",
        # complex dot products through cblas_*dotu_sub (patch 0005): one calling convention
        # whatever BLAS the user switches libblas to; cross builds cannot run BLAS_ABI.cmake's probe
        "PYTORCH_BLAS_USE_CBLAS_DOT": "ON",
        "USE_SYSTEM_SLEEF": "1",
        "USE_SYSTEM_PYBIND11": "1",
        "USE_SYSTEM_EIGEN_INSTALL": "1",
        # no USE_SYSTEM_FMT: 2.14.1's wheels bundle fmt and compile it in, as upstream's
        "BUILD_CUSTOM_PROTOBUF": "OFF",
    }


def _cuda_switches(target: BuildTarget, version: str) -> dict[str, str]:
    env = {
        "USE_CUDA": "1",
        "USE_CUDNN": "1",
        "USE_CUSPARSELT": "1",
        # no NCCL on Windows (distributed uses gloo over libuv)
        "USE_NCCL": "0" if target.is_windows else "1",
        "USE_STATIC_NCCL": "0",
        "USE_STATIC_CUDNN": "0",
        "USE_SYSTEM_NVTX": "1",
        # GPUDirect Storage (torch.cuda.gds): libcufile exists on Linux only, as conda-forge's
        # libcufile-dev; conda-forge's pytorch and upstream's Linux CUDA wheels build with it
        "USE_CUFILE": "0" if target.is_windows else "1",
        "CUDA_VERSION": version,
        # Linux: the whole tree builds without MAGMA, only libtorch_cuda_linalg is built a second
        # time with it (the top level's magma relink step). Windows has no lazy linalg library
        # (BUILD_LAZY_CUDA_LINALG is Linux only): torch_cuda.dll links MAGMA.
        "USE_MAGMA": "1" if target.is_windows else "0",
        "TORCH_NVCC_FLAGS": cuda.nvcc_flags(version),
        "CMAKE_CUDA_FLAGS": cuda.CUDA_FLAGS,
        "TORCH_CUDA_ARCH_LIST": cuda.cuda_arch_list(version, target.target_platform, target.arm_variant),
    }
    if not target.is_windows:
        env["USE_SYSTEM_NCCL"] = "1"
    if target.target_platform == "linux-aarch64":
        # keeps the huge libtorch_cuda within aarch64's branch range (pytorch/pytorch#121975)
        env["USE_PRIORITIZED_TEXT_FOR_LD"] = "1"
    return env


def switches(target: BuildTarget) -> dict[str, str]:
    """Everything that depends on the target alone: PyTorch's switches, BLAS, CUDA, MAX_JOBS."""
    env = {"MAX_JOBS": str(max_jobs(target)), **_packaging(), **FEATURES}
    if not target.is_windows:
        # upstream builds with the C++11 ABI; conda-forge's libraries need it too
        env["_GLIBCXX_USE_CXX11_ABI"] = "1"
    env.update(FEATURES_BY_PLATFORM.get(target.target_platform, {}))
    env["BLAS"] = BLAS[target.blas_impl]
    if target.cuda is not None:
        env.update(_cuda_switches(target, target.cuda))
    else:
        env.update({"USE_CUDA": "0", "USE_MAGMA": "0", "TORCH_CUDA_ARCH_LIST": ""})
        if target.is_windows:
            # environment variables are case-insensitive on Windows, and CUDA_* would be forwarded
            env["CUDA_VERSION"] = ""
    return env


def _unix_paths(target: BuildTarget, where: Locations) -> dict[str, str]:
    library_path = f"{where.prefix}/lib:{where.prefix}/include"
    env = {
        "CMAKE_PREFIX_PATH": where.prefix,
        "CMAKE_LIBRARY_PATH": f"{library_path}:{where.cmake_library_path}"
        if where.cmake_library_path
        else library_path,
        "Python_ROOT_DIR": where.prefix,
    }
    if target.cuda is not None:
        env.update({"NCCL_ROOT_DIR": where.prefix, "MAGMA_HOME": where.prefix})
    return env


def _windows_paths(target: BuildTarget, where: Locations) -> dict[str, str]:
    env = {
        # MSVC (vs2022 activation) with Ninja, conda's Library layout
        "CMAKE_GENERATOR_TOOLSET": "",
        "CMAKE_GENERATOR_PLATFORM": "",
        "CMAKE_PREFIX_PATH": where.library_prefix,
        "CMAKE_INCLUDE_PATH": where.library_inc,
        "CMAKE_LIBRARY_PATH": where.library_lib,
        "Python_ROOT_DIR": where.prefix,
        "libuv_ROOT": where.library_prefix,
        "DISTUTILS_USE_SDK": "1",
    }
    if target.cuda is not None:
        env.update({"MAGMA_HOME": where.library_prefix, "CUDNN_INCLUDE_DIR": where.library_inc})
    return env


def cmake_args(target: BuildTarget, where: Locations) -> str:
    """The activation's CMAKE_ARGS with what the build adds to it."""
    if target.is_windows:
        args = where.cmake_args
        if target.cuda is not None:
            root = where.library_prefix
            args += f" -DCUDAToolkit_ROOT={root} -DCUDAToolkit_ROOT_DIR={root} -DCUDA_TOOLKIT_ROOT_DIR={root}"
            args += f" -DCUDAToolkit_BIN_DIR={where.build_prefix}\\Library\\bin"
        return args
    # the Linux activation's find roots hide the source tree (megabuild.cmake_args)
    args, _ = add_find_root(where.cmake_args, where.src_dir)
    if target.is_cross:
        # protobuf's CMake config (host env) imports protoc of the target machine, which cannot run
        # here; PyTorch (and ONNX through it) take a custom protoc from this variable
        args += f" -DCAFFE2_CUSTOM_PROTOC_EXECUTABLE={where.build_prefix}/bin/protoc"
    if target.cuda is not None:
        # nvcc lives in BUILD_PREFIX, the CUDA libraries and headers in PREFIX: as -D options (2.14's
        # EnvVarForwarding forwards none of these names; patch 0008 makes CUDAToolkit_ROOT_DIR win)
        root = where.prefix
        args += f" -DCUDAToolkit_ROOT={root} -DCUDAToolkit_ROOT_DIR={root} -DCUDA_TOOLKIT_ROOT_DIR={root}"
        args += f" -DCUDAToolkit_BIN_DIR={where.build_prefix}/bin"
        targets = cuda.target_dir(target.target_platform, target.arm_variant)
        args += f" -DCUDAToolkit_TARGET_DIR={root}/targets/{targets}"
    return args


def build_environment(target: BuildTarget, where: Locations) -> dict[str, str]:
    """The whole environment the build scripts export, in a stable order."""
    env = {"CMAKE_GENERATOR": "Ninja", "CMAKE_BUILD_TYPE": "Release"}
    env.update(_windows_paths(target, where) if target.is_windows else _unix_paths(target, where))
    env["CMAKE_ARGS"] = cmake_args(target, where)
    env["PYTORCH_BUILD_VERSION"] = where.pkg_version
    env.update(switches(target))
    return env
