"""``megabuild split install``: move a staged output into the prefix."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _split_util import make_tree, run_cli, snapshot, write, write_spec
from megabuild.errors import MegabuildError
from megabuild.split.install import install
from megabuild.split.spec import load_spec
from megabuild.split.stage import stage


@pytest.fixture
def staged(tmp_path: Path) -> tuple[Path, Path]:
    spec_path = write_spec(tmp_path / "spec.json")
    tree = make_tree(tmp_path / "torch", cuda=True)
    stage(load_spec(spec_path), tree, tmp_path / "staging", cuda=True, linalg_variant="nomagma")
    return spec_path, tmp_path / "staging"


def test_install_moves_into_prefix(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    write(prefix / "lib/libexisting.so", b"other package")
    ino = (staging / "libtorch/lib/libtorch_cpu.so").stat().st_ino
    report = install(load_spec(spec_path), "libtorch", staging, prefix)
    assert (prefix / "lib/libtorch_cpu.so").stat().st_ino == ino
    assert stat.S_IMODE((prefix / "lib/libtorch_cpu.so").stat().st_mode) == 0o750
    assert os.readlink(prefix / "lib/libc10.so") == "libc10.so.2.13.0"
    assert (prefix / "share/cmake/Torch/TorchConfig.cmake").read_bytes() == b"cmake"
    assert (prefix / "lib/libexisting.so").read_bytes() == b"other package"
    assert not (staging / "libtorch").exists()
    assert report.stats.bytes_copied == 0 and report.files == 8


def test_install_linalg_variant(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    spec = load_spec(spec_path)
    prefix = tmp_path / "prefix"
    with pytest.raises(MegabuildError, match=r"no staged output .*libtorch-cuda-linalg-magma"):
        install(spec, "libtorch-cuda-linalg", staging, prefix, linalg_variant="magma")
    with pytest.raises(MegabuildError, match="needs a variant"):
        install(spec, "libtorch-cuda-linalg", staging, prefix)
    with pytest.raises(MegabuildError, match="not staged"):
        install(spec, "pytorch", staging, prefix)
    install(spec, "libtorch-cuda-linalg-nomagma", staging, prefix)
    assert (prefix / "lib/libtorch_cuda_linalg.so").read_bytes() == b"linalg"


def test_install_refuses_to_overwrite_unless_asked(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    write(prefix / "lib/libtorch_cpu.so", b"old")
    os.symlink("nowhere", prefix / "lib/libc10.so")
    before_staging, before_prefix = snapshot(staging), snapshot(prefix)
    res = run_cli("install", "libtorch", "--spec", spec_path, "--staging", staging, "--prefix", prefix)
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "would overwrite 2 file(s)" in res.stderr and "lib/libtorch_cpu.so" in res.stderr
    assert snapshot(staging) == before_staging and snapshot(prefix) == before_prefix

    res = run_cli(
        "install", "libtorch", "--spec", spec_path, "--staging", staging, "--prefix", prefix, "--overwrite"
    )
    assert res.returncode == 0, res.stderr
    assert "2 replaced" in res.stdout
    assert (prefix / "lib/libtorch_cpu.so").read_bytes() == b"cpu" * 1000
    assert os.readlink(prefix / "lib/libc10.so") == "libc10.so.2.13.0"
    assert not list(prefix.rglob("*.megabuild-old"))


def test_install_refuses_directory_in_the_way(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    (prefix / "lib/libtorch_cpu.so").mkdir(parents=True)
    write(prefix / "share", b"not a dir")
    before = snapshot(staging)
    with pytest.raises(MegabuildError, match=r"directories in the prefix where files go.*not a directory"):
        install(load_spec(spec_path), "libtorch", staging, prefix, overwrite=True)
    assert snapshot(staging) == before
