"""``megabuild split link-back``: after pip install, point site-packages at libtorch."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from _split_util import make_tree, run_cli, snapshot, write, write_spec
from megabuild.errors import MegabuildError
from megabuild.split.install import plan_install
from megabuild.split.link_back import plan_link_back, pyc_tag
from megabuild.split.plan import SplitProblems, check
from megabuild.split.spec import load_spec
from megabuild.split.stage import plan_stage


@pytest.fixture
def env(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(spec, PREFIX with libtorch installed, SP_DIR with a pip-installed torch)."""
    spec_path = write_spec(tmp_path / "spec.json")
    spec = load_spec(spec_path)
    prefix = tmp_path / "prefix"
    plan_stage(spec, make_tree(tmp_path / "build/torch"), tmp_path / "staging").run()
    plan_install(spec, "libtorch", tmp_path / "staging", prefix).run()
    sp_dir = prefix / "lib/python3.12/site-packages"
    torch = make_tree(sp_dir / "torch")  # what pip install puts there: everything again
    for package in ("torch", "functorch", "torchgen"):
        for tag in ("cpython-312", "cpython-311", "cpython-313"):
            write(sp_dir / package / "__pycache__" / f"__init__.{tag}.pyc", b"pyc")
            write(sp_dir / package / "sub/__pycache__" / f"mod.{tag}.opt-1.pyc", b"pyc")
    write(torch / "include/torch/extension.h", b"//")
    return spec_path, prefix, sp_dir


def test_link_back(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    torch = sp_dir / "torch"
    include_before = snapshot(torch / "include")
    report = plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312").run()

    cpu = torch / "lib/libtorch_cpu.so"
    assert cpu.is_symlink() and os.readlink(cpu) == "../../../../libtorch_cpu.so"
    assert cpu.resolve() == (prefix / "lib/libtorch_cpu.so").resolve()
    assert os.readlink(torch / "share/cmake/Torch/TorchConfig.cmake") == (
        "../../../../../../../share/cmake/Torch/TorchConfig.cmake"
    )
    assert (torch / "bin/torch_shm_manager").resolve() == prefix / "bin/torch_shm_manager"
    assert (torch / "lib/libc10.so").read_bytes() == b"c10" * 100
    # libtorch_python: real in site-packages, a relative link in $PREFIX/lib
    py = torch / "lib/libtorch_python.so"
    assert py.is_file() and not py.is_symlink()
    link = prefix / "lib/libtorch_python.so"
    assert os.readlink(link) == "python3.12/site-packages/torch/lib/libtorch_python.so"
    assert link.resolve() == py.resolve()
    # include stays a real directory, untouched
    assert not (torch / "include").is_symlink()
    assert snapshot(torch / "include") == include_before
    # dropped files removed; foreign .pyc removed everywhere, ours kept
    assert not (torch / "lib/libtorchbind_test.so").exists() and not (torch / "bin/test_api").exists()
    tags = sorted({pyc_tag(p.name) for p in sp_dir.rglob("*.pyc")})
    assert tags == ["cpython-312"]
    assert len(list(sp_dir.rglob("*.pyc"))) == 6
    assert report.pyc_removed == 12
    # everything in torch/{lib,bin,share} is now a link into PREFIX or pytorch's own file
    for area in ("lib", "bin", "share"):
        for path in (torch / area).rglob("*"):
            if path.is_file() and path.name != "libtorch_python.so":
                assert path.is_symlink(), path
                assert not os.path.isabs(os.readlink(path))

    # idempotent
    again = plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312").run()
    assert again.linked == [] and len(again.already_linked) == len(report.linked)


def test_link_back_validates_before_changing(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    spec = load_spec(spec_path)
    (prefix / "lib/libtorch_cpu.so").unlink()
    before = snapshot(prefix)
    with pytest.raises(
        MegabuildError, match=r"missing in the prefix .*lib/libtorch_cpu.so; nothing was changed"
    ):
        plan_link_back(spec, prefix, sp_dir, python_tag="cpython-312").run()
    assert snapshot(prefix) == before
    report = plan_link_back(spec, prefix, sp_dir, python_tag="cpython-312", keep_missing=True).run()
    assert report.kept_missing == ["lib/libtorch_cpu.so"]
    assert not (sp_dir / "torch/lib/libtorch_cpu.so").is_symlink()


def test_link_back_refuses_include_symlinked_into_prefix(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    os.symlink(
        os.path.relpath(prefix / "include/ATen", sp_dir / "torch/include"), sp_dir / "torch/include/ATen2"
    )
    before = snapshot(prefix)
    with pytest.raises(MegabuildError, match="headers in site-packages link into the prefix: include/ATen2"):
        plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312").run()
    assert snapshot(prefix) == before


def test_link_back_refuses_foreign_libtorch_python_in_prefix(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    write(prefix / "lib/libtorch_python.so", b"someone else's")
    with pytest.raises(MegabuildError, match=r"libtorch_python\.so exists and is not a link"):
        plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312").run()


def test_link_back_cli(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    write(sp_dir / "torch/lib/libunknown.so", b"?")
    res = run_cli("link-back", "--spec", spec_path, "--prefix", prefix, "--sp-dir", sp_dir)
    assert res.returncode == 1 and "lib/libunknown.so" in res.stderr and res.stderr.count("\n") == 1
    (sp_dir / "torch/lib/libunknown.so").unlink()
    res = run_cli("link-back", "--spec", spec_path, "--prefix", prefix, "--sp-dir", sp_dir)
    assert res.returncode == 0, res.stderr
    # default tag: the running interpreter's
    assert f"kept {sys.implementation.cache_tag}" in res.stdout
    res = run_cli("link-back", "--prefix", prefix, "--sp-dir", sp_dir, "--python-tag", "../x")
    assert res.returncode == 1 and "not a cache tag" in res.stderr


@pytest.mark.parametrize(
    ("name", "tag"),
    [
        ("a.cpython-312.pyc", "cpython-312"),
        ("a.cpython-313.opt-2.pyc", "cpython-313"),
        ("__init__.pypy39.pyc", "pypy39"),
        ("a.cpython-313.opt.pyc", None),
        ("a.pyc", None),
        ("a.py", None),
    ],
)
def test_pyc_tag(name: str, tag: str | None) -> None:
    assert pyc_tag(name) == tag


def test_link_back_can_drop_libtorch_headers(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    include = sp_dir / "torch/include"
    res = run_cli(
        "link-back", "--spec", spec_path, "--prefix", prefix, "--sp-dir", sp_dir, "--drop-libtorch-headers"
    )
    assert res.returncode == 0, res.stderr
    assert "removed 1 libtorch headers" in res.stdout
    # ATen (in $PREFIX/include) is gone, never linked back; third-party and
    # headers libtorch lacks stay real files
    assert not (include / "ATen").exists()
    assert (include / "pybind11/pybind11.h").is_file() and (include / "torch/extension.h").is_file()
    assert include.is_dir() and not include.is_symlink()
    assert not [p for p in include.rglob("*") if p.is_symlink()]


def test_link_back_failing_half_way_restores_both_trees(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    torch = sp_dir / "torch"
    # lib/ is linked before bin/: a clash where bin/torch_shm_manager is set aside
    # makes the run fail after lib's files were already replaced by symlinks.
    (torch / "bin/torch_shm_manager.megabuild-old").mkdir()
    before = snapshot(prefix)  # site-packages lies inside the prefix
    with pytest.raises(MegabuildError, match=r"link-back failed at bin/torch_shm_manager: .*rolled back"):
        plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312").run()
    assert snapshot(prefix) == before
    assert not (torch / "lib/libtorch_cpu.so").is_symlink()


def test_link_back_dry_run_prints_the_plan_and_changes_nothing(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    before = snapshot(prefix)
    args = ("link-back", "--spec", spec_path, "--prefix", prefix, "--sp-dir", sp_dir)
    res = run_cli(*args, "--python-tag", "cpython-312", "--dry-run")
    assert res.returncode == 0, res.stderr
    torch = sp_dir / "torch"
    assert f"  link {torch / 'lib/libtorch_cpu.so'} -> ../../../../libtorch_cpu.so (replacing)" in res.stdout
    assert f"  link {prefix / 'lib/libtorch_python.so'} -> " in res.stdout
    assert f"  remove {torch / 'bin/test_api'}" in res.stdout
    assert f"  remove {sp_dir / 'torch/__pycache__/__init__.cpython-311.pyc'}" in res.stdout
    assert snapshot(prefix) == before


def test_link_back_plan_is_pure_and_reports_every_problem(env: tuple[Path, Path, Path]) -> None:
    spec_path, prefix, sp_dir = env
    (prefix / "lib/libtorch_cpu.so").unlink()
    write(sp_dir / "torch/lib/libunknown.so", b"?")
    write(prefix / "lib/libtorch_python.so", b"someone else's")
    before = snapshot(prefix)
    planned = plan_link_back(load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312")
    assert snapshot(prefix) == before
    assert len(planned.plan.problems) == 3
    with pytest.raises(SplitProblems) as caught:
        check(planned.plan)
    message = str(caught.value)
    assert "libtorch_python.so exists and is not a link" in message
    assert "match no rule" in message and "lib/libunknown.so" in message
    assert "missing in the prefix" in message and message.endswith("; nothing was changed")


def test_links_for_files_pip_never_installed_are_counted_apart(env: tuple[Path, Path, Path]) -> None:
    """``--link-installed``: the wheel left libtorch_cpu out (wheel.exclude); its link is made, not a
    replacement, and the report says so apart from the files it replaced."""
    spec_path, prefix, sp_dir = env
    torch = sp_dir / "torch"
    (torch / "lib/libtorch_cpu.so").unlink()  # pip never installed it
    libtorch = sorted(
        p.relative_to(prefix).as_posix() for p in (prefix / "lib").rglob("*") if p.is_file() or p.is_symlink()
    )
    record = {"name": "libtorch", "version": "0", "build": "0", "files": libtorch}
    write(prefix / "conda-meta/libtorch-0-0.json", json.dumps(record).encode())
    report = plan_link_back(
        load_spec(spec_path), prefix, sp_dir, python_tag="cpython-312", link_installed=("libtorch",)
    ).run()
    assert (torch / "lib/libtorch_cpu.so").resolve() == (prefix / "lib/libtorch_cpu.so").resolve()
    assert report.linked_not_installed == ["lib/libtorch_cpu.so"]
    assert "lib/libtorch_cpu.so" not in report.linked
    head = report.lines()[0]
    assert f"{len(report.linked)} files replaced by symlinks" in head
    assert "1 symlink made for a file pip did not install (--link-installed)" in head, head
