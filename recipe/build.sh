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
# `megabuild env` (below) reads these variant keys from the environment. conda-build hands every
# variant key to the script, but counts a key as used by the output (its hash, the CI jobs) only
# where the script names it as a line's first `$` (tests/test_render_used_vars.py): these lines
# are those uses. target_platform is used below too (and conda-build always counts it).
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
# environment above and nothing else. The step runs inside the compiler cache a local or CFEP-03
# build names (FEEDSTOCK_COMPILER_CACHE, FEEDSTOCK_COMPILER_CACHE_CONF, FEEDSTOCK_AWS_CREDENTIALS,
# by path: docs/local-builds.md): it starts and stops sccache itself, and a cache it cannot use
# is one warning, never a failed build (recipe/megabuild/compiler_cache).
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
