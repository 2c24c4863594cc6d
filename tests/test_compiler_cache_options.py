"""The remote compiler cache's options (scripts/feedstock/compiler_cache.py) and how
build-locally.py hands them to the docker build: paths of read-only mounted files, never values."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.compiler_cache import (
    DEFAULT_KEY_PREFIX,
    CacheArgs,
    CacheOptionError,
    RedisStore,
    S3Store,
    read_config_file,
    resolve,
    sccache_config,
    to_argv,
)
from support.fake_feedstock import SYNTHETIC_CONFIGS, FakeFeedstock

CPU_GENERIC = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNone"


def _resolve(tmp_path: Path, **kw: object) -> object:
    return resolve(CacheArgs(**kw), tmp_path / "default-dir", tmp_path / "feedstock")  # type: ignore[arg-type]


def test_default_is_the_local_dir(tmp_path: Path) -> None:
    cache = _resolve(tmp_path)
    assert cache.local_dir == tmp_path / "default-dir" and cache.remote is None and cache.levels == ("disk",)
    assert _resolve(tmp_path, off=True) is None


def test_s3_url_endpoint_region_and_default_prefix(tmp_path: Path) -> None:
    cache = _resolve(
        tmp_path, location="s3://team-cache", endpoint="https://acct.r2.example.com", region="auto"
    )
    assert cache.remote == S3Store("team-cache", DEFAULT_KEY_PREFIX, "https://acct.r2.example.com", "auto")
    assert cache.local_dir is None and cache.levels == ("s3",)
    assert _resolve(tmp_path, location="s3://b/team/pytorch/v2").remote.key_prefix == "team/pytorch/v2"


def test_redis_url_db_and_levels(tmp_path: Path) -> None:
    cache = _resolve(tmp_path, location="rediss://cache.example:6380/3", levels="disk,redis", read_only=True)
    assert cache.remote == RedisStore("rediss://cache.example:6380", DEFAULT_KEY_PREFIX, 3)
    assert cache.levels == ("disk", "redis") and cache.read_only
    text = sccache_config(cache, "/home/conda/compiler-cache")
    assert 'chain = ["disk", "redis"]' in text and 'dir = "/home/conda/compiler-cache"' in text
    assert 'rw_mode = "READ_ONLY"' in text and "db = 3" in text


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"location": "redis://user:hunter2@host:6379"}, "credentials in a URL"),
        ({"location": "s3://AKIA:secret@bucket"}, "credentials in a URL"),
        ({"location": "s3://b", "endpoint": "http://k:s@127.0.0.1:9000"}, "credentials in a URL"),
        ({"location": "s3://b", "endpoint": "http://127.0.0.1:80"}, "drop the default port :80"),
        ({"location": "s3://b", "endpoint": "127.0.0.1:9000"}, "give http://HOST[:PORT]"),
        ({"location": "redis://h", "endpoint": "http://x"}, "are for s3:// caches"),
        ({"location": "redis://h/notadb"}, "db number"),
        ({"location": "s3://b", "levels": "s3,disk"}, "disk,s3"),
        ({"location": "ftp://x"}, "a directory, s3://"),
        ({"endpoint": "http://x"}, "needs a remote cache"),
        ({"location": "s3://b/p", "key_prefix": "q"}, "drop --compiler-cache-key-prefix"),
        ({"location": "s3://b", "key_prefix": "../up"}, "is not a key prefix"),
        ({"location": "redis://h", "aws_credentials": "/etc/hostname"}, "for s3:// caches"),
        ({"location": "s3://b", "aws_credentials": "/nonexistent/creds"}, "not a readable file"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path: Path, kw: dict[str, object], fragment: str) -> None:
    with pytest.raises(CacheOptionError) as err:
        _resolve(tmp_path, **kw)
    assert fragment in str(err.value) and "\n" not in str(err.value)
    assert "hunter2" not in str(err.value) and "secret" not in str(err.value).replace("--", "")


def test_credentials_inside_the_checkout_are_refused(tmp_path: Path) -> None:
    creds = tmp_path / "feedstock" / "recipe" / "aws"
    creds.parent.mkdir(parents=True)
    creds.write_text("[default]\n")
    with pytest.raises(CacheOptionError, match="outside the feedstock checkout"):
        _resolve(tmp_path, location="s3://b", aws_credentials=str(creds))


def test_a_config_file_is_validated_and_used_whole(tmp_path: Path) -> None:
    conf = tmp_path / "sccache.toml"
    conf.write_text(
        '[cache.multilevel]\nchain = ["disk", "redis"]\n[cache.redis]\nendpoint = "redis://h:6379"\n'
        'username = "writer"\npassword = "pw"\nkey_prefix = "pytorch-feedstock/v2"\nrw_mode = "READ_ONLY"\n'
    )
    cache = _resolve(tmp_path, config_file=str(conf), read_only=True)
    assert cache.config_file == conf and cache.read_only and cache.levels == ("disk", "redis")
    assert cache.remote == RedisStore("redis://h:6379", "pytorch-feedstock/v2")
    with pytest.raises(CacheOptionError, match="drop --compiler-cache-endpoint"):
        _resolve(tmp_path, config_file=str(conf), endpoint="http://x")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[cache.redis]\nurl = "redis://u:pw@h:1"\nkey_prefix = "p/v1"\n', "credentials in a URL"),
        ('[cache.s3]\nbucket = "b"\n', "set key_prefix"),
        ('[cache.disk]\ndir = "/x"\n', "needs exactly one of"),
        ("not toml [", "not an sccache TOML file"),
    ],
)
def test_bad_config_files_are_refused(tmp_path: Path, text: str, fragment: str) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text(text)
    with pytest.raises(CacheOptionError, match=fragment.replace("[", r"\[")):
        read_config_file(conf)


def test_read_only_flag_needs_the_files_read_only_mode(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text('[cache.s3]\nbucket = "b"\nkey_prefix = "p/v1"\n')
    with pytest.raises(CacheOptionError, match='rw_mode = "READ_ONLY"'):
        _resolve(tmp_path, config_file=str(conf), read_only=True)


def test_to_argv_round_trips(tmp_path: Path) -> None:
    args = CacheArgs(location="s3://b", endpoint="http://127.0.0.1:9000", read_only=True, levels="disk,s3")
    assert to_argv(args) == [
        "--compiler-cache", "s3://b", "--compiler-cache-endpoint", "http://127.0.0.1:9000",
        "--compiler-cache-levels", "disk,s3", "--compiler-cache-read-only",
    ]  # fmt: skip
    assert to_argv(CacheArgs(off=True)) == ["--no-compiler-cache"]


# ------------------------------------------------------------------------------- build-locally.py


@pytest.fixture
def fs(tmp_path: Path, repo_root: Path) -> FakeFeedstock:
    if not (repo_root / ".scripts" / "run_docker_build.sh").is_file():
        pytest.skip(".scripts/run_docker_build.sh not rendered yet")
    return FakeFeedstock.create(tmp_path, repo_root, configs=SYNTHETIC_CONFIGS)


def _forwarded(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e" and "=" in argv[i + 1])


def test_remote_cache_reaches_the_build_as_read_only_files(fs: FakeFeedstock, tmp_path: Path) -> None:
    creds = tmp_path / "aws-credentials"
    creds.write_text("[default]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s3cr3t-value\n")
    proc = fs.run(
        CPU_GENERIC, "--compiler-cache", "s3://team-cache", "--compiler-cache-endpoint", "http://127.0.0.1:9000",
        "--compiler-cache-levels", "disk,s3", "--aws-credentials", str(creds),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    argv = [c for c in fs.docker_calls() if c["argv"][:1] == ["run"]][-1]["argv"]
    conf = fs.root / "build_artifacts" / "compiler-cache-config" / "sccache.toml"
    assert f"{conf}:/home/conda/compiler-cache-config/sccache.toml:ro" in argv
    assert f"{creds}:/home/conda/compiler-cache-config/aws-credentials:ro" in argv
    env = _forwarded(argv)
    assert env["FEEDSTOCK_COMPILER_CACHE_CONF"] == "/home/conda/compiler-cache-config/sccache.toml"
    assert env["FEEDSTOCK_AWS_CREDENTIALS"] == "/home/conda/compiler-cache-config/aws-credentials"
    assert env["FEEDSTOCK_COMPILER_CACHE"] == "/home/conda/feedstock_root/build_artifacts/compiler-cache"
    text = conf.read_text()
    assert 'bucket = "team-cache"' in text and 'chain = ["disk", "s3"]' in text
    assert f'key_prefix = "{DEFAULT_KEY_PREFIX}"' in text
    for where in (text, "\n".join(argv), proc.stdout, proc.stderr, fs.log.read_text()):
        assert "s3cr3t-value" not in where


def test_dry_run_shows_the_remote_cache(fs: FakeFeedstock) -> None:
    proc = fs.run(
        CPU_GENERIC, "--dry-run", "--compiler-cache", "redis://127.0.0.1:6379", "--compiler-cache-read-only"
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        f"compiler cache: redis redis://127.0.0.1:6379, prefix {DEFAULT_KEY_PREFIX}/, READ-ONLY"
        in proc.stdout
    )


def test_credentials_in_a_url_stop_build_locally_before_docker(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, "--compiler-cache", "redis://admin:hunter2@127.0.0.1:6379")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "credentials in a URL" in lines[0] and "Traceback" not in proc.stderr
    assert "hunter2" not in proc.stderr + proc.stdout
    assert fs.built() == []


def test_help_shows_the_cache_options(repo_root: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(repo_root / "build-locally.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    for flag in ("--compiler-cache DIR|URL", "--compiler-cache-endpoint", "--compiler-cache-region",
                 "--compiler-cache-key-prefix", "--compiler-cache-levels", "--compiler-cache-read-only",
                 "--compiler-cache-config", "--aws-credentials", "--no-compiler-cache"):  # fmt: skip
        assert flag in out, flag
