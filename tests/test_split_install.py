"""``megabuild split install``: move a staged output into the prefix."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from _split_util import make_tree, run_cli, snapshot, write, write_spec
from megabuild.errors import MegabuildError
from megabuild.split.install import plan_install
from megabuild.split.spec import load_spec
from megabuild.split.stage import plan_stage


@pytest.fixture
def staged(tmp_path: Path) -> tuple[Path, Path]:
    spec_path = write_spec(tmp_path / "spec.json")
    tree = make_tree(tmp_path / "torch", cuda=True)
    plan_stage(load_spec(spec_path), tree, tmp_path / "staging", cuda=True, linalg_variant="nomagma").run()
    return spec_path, tmp_path / "staging"


def test_install_moves_into_prefix(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    write(prefix / "lib/libexisting.so", b"other package")
    ino = (staging / "libtorch/lib/libtorch_cpu.so").stat().st_ino
    report = plan_install(load_spec(spec_path), "libtorch", staging, prefix).run()
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
        plan_install(spec, "libtorch-cuda-linalg", staging, prefix, linalg_variant="magma").run()
    with pytest.raises(MegabuildError, match="needs a variant"):
        plan_install(spec, "libtorch-cuda-linalg", staging, prefix).run()
    with pytest.raises(MegabuildError, match="not staged"):
        plan_install(spec, "pytorch", staging, prefix).run()
    plan_install(spec, "libtorch-cuda-linalg-nomagma", staging, prefix).run()
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
        plan_install(load_spec(spec_path), "libtorch", staging, prefix, overwrite=True).run()
    assert snapshot(staging) == before


def test_install_dry_run_prints_the_plan_and_moves_nothing(tmp_path: Path, staged: tuple[Path, Path]) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    write(prefix / "lib/libtorch_cpu.so", b"old")
    before_staging, before_prefix = snapshot(staging), snapshot(prefix)
    args = ("install", "libtorch", "--spec", spec_path, "--staging", staging, "--prefix", prefix)
    res = run_cli(*args, "--overwrite", "--dry-run")
    assert res.returncode == 0, res.stderr
    assert "would install libtorch" in res.stdout and "1 replaced" in res.stdout
    src, dst = staging / "libtorch/lib/libtorch_cpu.so", prefix / "lib/libtorch_cpu.so"
    assert f"  move {src} -> {dst} (replacing)" in res.stdout
    assert "plan: 8 moves, 0 symlinks, 0 removals" in res.stdout
    assert snapshot(staging) == before_staging and snapshot(prefix) == before_prefix
    # a dry run refuses what the real run refuses
    res = run_cli(*args, "--dry-run")
    assert res.returncode == 1 and "would overwrite 1 file(s)" in res.stderr


def test_install_failing_half_way_rolls_back_the_overwritten_files(
    tmp_path: Path, staged: tuple[Path, Path]
) -> None:
    spec_path, staging = staged
    prefix = tmp_path / "prefix"
    write(prefix / "lib/libtorch_cpu.so", b"old")
    # share/ is moved after lib/: the set-aside name of its file is taken
    write(prefix / "share/cmake/Torch/TorchConfig.cmake", b"old cmake")
    (prefix / "share/cmake/Torch/TorchConfig.cmake.megabuild-old").mkdir()
    before_staging, before_prefix = snapshot(staging), snapshot(prefix)
    with pytest.raises(MegabuildError, match=r"install failed at share/cmake/Torch/TorchConfig.cmake: "):
        plan_install(load_spec(spec_path), "libtorch", staging, prefix, overwrite=True).run()
    assert snapshot(staging) == before_staging and snapshot(prefix) == before_prefix
