#!/bin/bash
# Script of the libtorch-cuda-linalg output, run once per with_magma value: one pipeline call that
# moves the staged variant of libtorch_cuda_linalg into $PREFIX. The pipeline reads the variant from
# with_magma in its environment (conda-build exports the variant's values). conda-build counts a
# variant key as used by this output only where a line's first '$' names it: the assignment below
# keeps with_magma this output's variant key (and fails under set -u when conda-build gave none).
# shellcheck disable=SC2154
set -euo pipefail
with_magma="${with_magma}" PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild build "$PKG_NAME"
