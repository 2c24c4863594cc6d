#!/bin/bash
# Script of the libtorch output: move the files the top-level build staged
# for libtorch into $PREFIX. Everything new in $PREFIX becomes the package.
# Variant values (cuda_compiler_version, blas_impl, ...) and PREFIX & co. come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail
PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild split install libtorch \
    --staging "$SRC_DIR/_megabuild/staging" --prefix "$PREFIX" --target-platform "${target_platform}"
