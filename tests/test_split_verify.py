"""``megabuild split verify``: partition checks on staging dirs and file lists."""

from __future__ import annotations

from pathlib import Path

import pytest
from _split_util import REAL_SPEC, make_tree, run_cli, write, write_spec
from megabuild.errors import MegabuildError
from megabuild.split.spec import load_spec
from megabuild.split.stage import plan_stage
from megabuild.split.verify import verify


def _staged(tmp_path: Path, cuda: bool) -> tuple[Path, Path]:
    spec_path = write_spec(tmp_path / "spec.json")
    spec = load_spec(spec_path)
    staging = tmp_path / "staging"
    plan_stage(
        spec, make_tree(tmp_path / "t1", cuda=cuda), staging, cuda=cuda, linalg_variant="nomagma"
    ).run()
    if cuda:
        plan_stage(
            spec,
            make_tree(tmp_path / "t2", cuda=True),
            staging,
            cuda=True,
            linalg_variant="magma",
            only=["libtorch-cuda-linalg"],
        ).run()
    return spec_path, staging


@pytest.mark.parametrize("cuda", [False, True])
def test_verify_accepts_a_good_staging(tmp_path: Path, cuda: bool) -> None:
    spec_path, staging = _staged(tmp_path, cuda)
    args = ["verify", "--spec", spec_path, "--staging", staging] + (["--cuda"] if cuda else [])
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    assert "partition OK" in res.stdout


def test_verify_catches_problems(tmp_path: Path) -> None:
    spec_path, staging = _staged(tmp_path, cuda=True)
    spec = load_spec(spec_path)
    # CPU check of a CUDA staging: linalg must not be there
    with pytest.raises(MegabuildError, match="staged in a CPU build"):
        verify(spec, staging=staging, cuda=False)
    # a variant missing its library, a file in two outputs, a misplaced file
    (staging / "libtorch-cuda-linalg-magma/lib/libtorch_cuda_linalg.so").unlink()
    write(staging / "libtorch-cuda-linalg-magma/lib/libtorch_cpu.so", b"dup")
    with pytest.raises(MegabuildError) as info:
        verify(spec, staging=staging, cuda=True)
    msg = str(info.value)
    assert "lib/libtorch_cpu.so (libtorch, libtorch-cuda-linalg-magma)" in msg
    assert "lib/libtorch_cuda_linalg.so (libtorch-cuda-linalg-magma)" in msg
    assert "files in the wrong output: libtorch-cuda-linalg-magma/lib/libtorch_cpu.so" in msg
    # empty output and missing variant
    (staging / "libtorch-cuda-linalg-magma/lib/libtorch_cpu.so").unlink()
    (staging / "libtorch-cuda-linalg-magma/lib").rmdir()
    with pytest.raises(MegabuildError, match=r"empty output.*libtorch-cuda-linalg-magma"):
        verify(spec, staging=staging, cuda=True)
    (staging / "libtorch-cuda-linalg-magma").rmdir()
    with pytest.raises(MegabuildError, match=r"missing output.*libtorch-cuda-linalg-magma"):
        verify(spec, staging=staging, cuda=True)


def test_verify_file_lists(tmp_path: Path) -> None:
    libtorch = ["lib/libc10.so", "lib/libtorch.so", "lib/libtorch_cpu.so", "lib/libtorch_global_deps.so"]
    libtorch += ["lib/libshm.so", "bin/torch_shm_manager", "share/cmake/Torch/TorchConfig.cmake"]
    libtorch += [f"include/{d}/x.h" for d in ("ATen", "c10", "caffe2", "torch")]
    sp = "lib/python3.12/site-packages/torch"
    pytorch = [f"{sp}/lib/libtorch_python.so", f"{sp}/__init__.py", "lib/libtorch_python.so"]
    (tmp_path / "libtorch.txt").write_text("\n".join(libtorch) + "\n")
    (tmp_path / "pytorch.txt").write_text("\n".join(pytorch) + "\n")
    (tmp_path / "magma.txt").write_text("lib/libtorch_cuda_linalg.so\n")
    (tmp_path / "nomagma.txt").write_text("lib/libtorch_cuda_linalg.so\n")
    lists = [
        f"libtorch={tmp_path / 'libtorch.txt'}",
        f"pytorch={tmp_path / 'pytorch.txt'}",
        f"libtorch-cuda-linalg-magma={tmp_path / 'magma.txt'}",
        f"libtorch-cuda-linalg-nomagma={tmp_path / 'nomagma.txt'}",
    ]
    linux = ("--spec", REAL_SPEC, "--target-platform", "linux-64")
    res = run_cli("verify", *linux, "--file-list", *lists[:2])
    assert res.returncode == 0, res.stderr
    # the variants share their path on purpose; CUDA needs the CUDA libraries in libtorch
    res = run_cli("verify", *linux, "--cuda", "--file-list", *lists)
    assert res.returncode == 1
    assert "lib/libc10_cuda{.so,.so.*} (libtorch)" in res.stderr and "two outputs" not in res.stderr
    (tmp_path / "pytorch.txt").write_text("\n".join([*pytorch, "lib/libtorch_cpu.so"]) + "\n")
    res = run_cli("verify", *linux, "--file-list", *lists[:2])
    assert res.returncode == 1 and "lib/libtorch_cpu.so (libtorch, pytorch)" in res.stderr
    res = run_cli("verify", *linux, "--file-list", "libtorch")
    assert res.returncode == 1 and "OUTPUT=FILE" in res.stderr and "Traceback" not in res.stderr


def test_verify_catches_dangling_symlinks(tmp_path: Path) -> None:
    spec_path, staging = _staged(tmp_path, cuda=False)
    (staging / "libtorch/lib/libc10.so.2.13.0").unlink()
    with pytest.raises(MegabuildError, match=r"do not resolve inside it: lib/libc10\.so\b"):
        verify(load_spec(spec_path), staging=staging)
