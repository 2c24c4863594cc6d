#!/bin/bash
# Script of the libtorch output: one pipeline call (recipe/megabuild/pipeline/description.py) that
# moves the files the top level staged for libtorch into $PREFIX. Everything new in $PREFIX becomes
# the package. PKG_NAME, target_platform, SRC_DIR, PREFIX & co. come from conda-build.
# shellcheck disable=SC2154
set -euo pipefail
PYTHONPATH="$RECIPE_DIR" "$BUILD_PREFIX/bin/python" -m megabuild build "$PKG_NAME"
