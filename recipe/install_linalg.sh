#!/bin/bash
# Script of the libtorch-cuda-linalg output, run once per with_magma value:
# move the matching staged libtorch_cuda_linalg into $PREFIX.
# Variant values (cuda_compiler_version, blas_impl, ...) and PREFIX & co. come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail
case "${with_magma}" in
    true) variant=magma ;;
    false) variant=nomagma ;;
    *) echo "install_linalg.sh: with_magma must be true or false, got '${with_magma}'" >&2; exit 1 ;;
esac
PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild split install "libtorch-cuda-linalg-${variant}" \
    --staging "$SRC_DIR/_megabuild/staging" --prefix "$PREFIX" --target-platform "${target_platform}"
