#!/bin/bash
# Script of the libtorch output: one pipeline call (recipe/megabuild/pipeline/description.py) that
# moves the files the top level staged for libtorch into $PREFIX, then (CUDA builds) the activation
# scripts that export the build's CF_TORCH_CUDA_ARCH_LIST (recipe/megabuild/buildenv/activation.py).
# Everything new in $PREFIX becomes the package. PKG_NAME, target_platform, SRC_DIR, PREFIX & co.
# come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail
# `megabuild activation-scripts` reads these variant keys; conda-build counts a key as used by the
# output where the script names it as the first `$` of a line (tests/test_render_used_vars.py)
echo "cuda_compiler_version: ${cuda_compiler_version}"
echo "blas_impl: ${blas_impl}"
if [[ -v arm_variant_type ]]; then
    # conda-forge's arm variant (sbsa or tegra): linux-aarch64 configs only
    echo "arm_variant_type: ${arm_variant_type}"
fi
PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild build "$PKG_NAME"
PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild activation-scripts --prefix "$PREFIX"
