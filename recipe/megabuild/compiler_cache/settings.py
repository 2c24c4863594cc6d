"""What a build step's compiler cache is, from the three variables conda-build hands the scripts.

The decision that changes the CMake cache (launchers, the dropped ``-fdebug-prefix-map`` flags)
depends only on whether a cache is *configured*, which is the same in every step of a build;
whether it is usable is asked afterwards and only decides if the step's server starts.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

LOCAL_DIR = "FEEDSTOCK_COMPILER_CACHE"
CONF = "FEEDSTOCK_COMPILER_CACHE_CONF"
AWS_CREDENTIALS = "FEEDSTOCK_AWS_CREDENTIALS"
DEFAULT_SIZE = "100G"
# sccache 0.16 hashes these flags verbatim (SCCACHE_BASEDIRS rewrites only source paths), and
# conda-forge's activation makes them name this build's SRC_DIR and PREFIX: every key would be
# new. A Release build compiles without -g, so they change nothing in the objects.
_DEBUG_PREFIX_MAP = re.compile(r"\s*-fdebug-prefix-map=\S*")
_READ_ONLY = re.compile(r'^rw_mode\s*=\s*"READ_ONLY"', re.M)


@dataclass(frozen=True)
class CacheConfig:
    local_dir: str  # sccache's local dir, or ""
    conf: str  # an sccache config file naming a remote store, or ""
    aws_credentials: str  # an AWS shared-credentials file, or ""

    @classmethod
    def from_environment(cls, env: Mapping[str, str]) -> CacheConfig:
        return cls(env.get(LOCAL_DIR, ""), env.get(CONF, ""), env.get(AWS_CREDENTIALS, ""))

    @property
    def configured(self) -> bool:
        return bool(self.local_dir or self.conf)

    def problem(self, sccache: str | None) -> str | None:
        """Why this step cannot use the cache (a warning's text), or None."""
        if sccache is None:
            return "a compiler cache is set but sccache is not on PATH; building uncached"
        if self.local_dir and not _writable_dir(Path(self.local_dir)):
            return f"compiler cache {self.local_dir} is not a writable directory; building uncached"
        if self.conf and not os.access(self.conf, os.R_OK):
            return f"COMPILER CACHE OFF: its config {self.conf} is not readable; building uncached"
        return None

    def read_only(self) -> bool:
        """The config file asks sccache for hits only (nothing is stored)."""
        try:
            return bool(self.conf and _READ_ONLY.search(Path(self.conf).read_text(errors="replace")))
        except OSError:
            return False


def _writable_dir(path: Path) -> bool:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return path.is_dir() and os.access(path, os.W_OK | os.X_OK)


def find_sccache(env: Mapping[str, str]) -> str | None:
    """sccache on the step's PATH, as an absolute path (the launcher runs it by that path)."""
    found = shutil.which("sccache", path=env.get("PATH"))
    return os.path.abspath(found) if found else None


def without_debug_prefix_maps(flags: str) -> str:
    return _DEBUG_PREFIX_MAP.sub("", flags).strip()


def sccache_environment(config: CacheConfig, env: Mapping[str, str], remote: bool) -> dict[str, str]:
    """sccache's variables for this step's server; ``remote``: with the config file's store."""
    values: dict[str, str] = {}
    if config.local_dir:
        values["SCCACHE_DIR"] = config.local_dir
        values["SCCACHE_CACHE_SIZE"] = env.get("SCCACHE_CACHE_SIZE", DEFAULT_SIZE)
    if remote and config.conf:
        values["SCCACHE_CONF"] = config.conf
        # credentials from the mounted file only: no lookup in a cloud metadata service
        values["AWS_EC2_METADATA_DISABLED"] = "true"
        if config.aws_credentials:
            values["AWS_SHARED_CREDENTIALS_FILE"] = config.aws_credentials
    # conda-build's work dir and _h_env_placehold... prefix change with every build: keys hold
    # paths relative to them
    dirs = [env.get(name, "") for name in ("SRC_DIR", "PREFIX", "BUILD_PREFIX")]
    values["SCCACHE_BASEDIRS"] = os.pathsep.join(d for d in dirs if d)
    # the step's own server (another build on the machine has other basedirs), never idle-stopped
    values["SCCACHE_IDLE_TIMEOUT"] = "0"
    # a server lost mid-build: the client compiles locally instead of failing the compile
    values["SCCACHE_IGNORE_SERVER_IO_ERROR"] = "1"
    return values


def server_address(pid: int, windows: bool) -> dict[str, str]:
    """Where this step's server listens: a socket file of its own (a free port on Windows)."""
    if windows:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return {"SCCACHE_SERVER_PORT": str(probe.getsockname()[1])}
    return {"SCCACHE_SERVER_UDS": str(Path(tempfile.gettempdir()) / f"megabuild-sccache-{pid}.sock")}
