#!/usr/bin/env bash
# Provision the real upstream torch wheels the tests read (tests/test_binary_check_wheels.py, the
# unpacked-wheel split in tests/test_split_real_layouts.py): torch <version of meta.yaml>, cp312,
# for linux-64 (the CUDA 13.0 build), linux-aarch64, osx-arm64 and win-64, about 1.6 GB, into the
# shared wheel cache (~/.cache/pytorch-feedstock/wheels/<pip platform tag>, or
# $PYTORCH_FEEDSTOCK_WHEEL_CACHE). A wheel already there is not downloaded again; pip is asked
# only for what is missing. Sourced by .ci/run: exports FEEDSTOCK_REQUIRE_REAL_WHEELS=1, so a
# missing wheel fails those tests there instead of skipping them.
provision_upstream_wheels() {
    local listing
    listing="$(python - <<'PY'
from feedstock.split_check.recipe import read_recipe
from feedstock.patch_check import cache_dir as wheel_cache_dir
from feedstock.paths import REPO
from megabuild.model import PLATFORMS

version = read_recipe(REPO).version
for facts in PLATFORMS:
    if facts.stood_in_by:  # no wheel of its own upstream (osx-64)
        continue
    dest = wheel_cache_dir() / facts.pip_tag
    have = sorted(dest.glob(f"torch-{version}-cp312-cp312-*.whl"))
    print(f"{version} {facts.pip_tag} {dest} {'have' if have else 'missing'}")
PY
)" || { echo "provision: cannot read the recipe's version and platforms" >&2; return 0; }
    local version tag dest state
    while read -r version tag dest state; do
        [[ "${state}" == have ]] && continue
        echo "provision: downloading torch ${version} for ${tag}" >&2
        python -m pip download -q --no-deps --only-binary=:all: --platform "${tag}" \
            --python-version 3.12 "torch==${version}" -d "${dest}" >&2 \
            || echo "provision: torch ${version} for ${tag} could not be downloaded" >&2
    done <<<"${listing}"
}

provision_upstream_wheels
export FEEDSTOCK_REQUIRE_REAL_WHEELS=1
