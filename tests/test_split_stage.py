"""``megabuild split stage``: real file-system moves on temporary trees."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest
from _split_util import MINI_SPEC, make_tree, run_cli, snapshot, write, write_spec
from megabuild.errors import MegabuildError
from megabuild.split import fsmove
from megabuild.split.plan import SplitProblems, check
from megabuild.split.spec import load_spec
from megabuild.split.stage import plan_stage


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    return write_spec(tmp_path / "spec.json")


def test_stage_moves_files_keeping_links_modes_and_inodes(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    before = snapshot(tree)
    report = plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    lib = tmp_path / "staging/libtorch"

    # symlink stays a symlink with the same (relative) target
    assert os.readlink(lib / "lib/libc10.so") == "libc10.so.2.13.0"
    assert (lib / "lib/libc10.so").read_bytes() == b"c10" * 100
    # modes kept
    assert stat.S_IMODE((lib / "lib/libtorch_cpu.so").stat().st_mode) == 0o750
    assert stat.S_IMODE((lib / "share/cmake/Torch/TorchConfig.cmake").stat().st_mode) == 0o444
    # moved, not copied: same inode; the hard link pair still shares one inode
    assert (lib / "lib/libtorch_cpu.so").stat().st_ino == before["lib/libtorch_cpu.so"][2]
    a = (lib / "share/cmake/Torch/TorchConfig.cmake").stat()
    b = (lib / "share/cmake/Torch/TorchConfigHardlink.cmake").stat()
    assert a.st_ino == b.st_ino and a.st_nlink == 2
    # dropped files are moved aside, not deleted
    assert (tmp_path / "staging/_dropped/lib/libtorchbind_test.so").read_bytes() == b"t"
    assert (tmp_path / "staging/_dropped/bin/test_api").exists()
    # pytorch's files stay in the tree; emptied directories are removed
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if not p.is_dir()) == [
        "_C.cpython-311-x86_64-linux-gnu.so",
        "__init__.py",
        "include/pybind11/pybind11.h",
        "lib/libtorch_python.so",
    ]
    assert not (tree / "share").exists() and not (tree / "include/ATen").exists()
    assert report.stats.bytes_copied == 0 and report.stats.copied == 0
    assert report.totals["libtorch"].files == 7
    assert report.totals["libtorch"].nbytes == 300 + 3000 + 3 + 5 + 13  # hard link counted once


def test_big_files_are_moved_not_copied(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    big = write(tree / "lib/libtorch_cpu.so", os.urandom(3 * 1024 * 1024), 0o755)
    ino, dev = big.stat().st_ino, big.stat().st_dev
    report = plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    moved = (tmp_path / "staging/libtorch/lib/libtorch_cpu.so").stat()
    assert (moved.st_ino, moved.st_dev) == (ino, dev)
    assert not big.exists()
    assert report.stats.bytes_copied == 0


def _assert_refused(tmp_path: Path, spec_path: Path, tree: Path, match: str, **kwargs: object) -> None:
    before = snapshot(tree)
    with pytest.raises(MegabuildError, match=match) as info:
        plan_stage(load_spec(spec_path), tree, tmp_path / "staging", **kwargs).run()  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
    assert snapshot(tree) == before
    assert not (tmp_path / "staging").exists()


def test_file_matching_two_outputs_is_refused(tmp_path: Path) -> None:
    spec_path = write_spec(
        tmp_path / "spec.json", extra_rules=[{"pattern": "lib/*cpu*", "output": "_dropped", "note": "x"}]
    )
    tree = make_tree(tmp_path / "torch")
    _assert_refused(tmp_path, spec_path, tree, r"lib/libtorch_cpu.so \[libtorch .* vs _dropped")


def test_two_rules_of_the_same_output_are_fine(tmp_path: Path) -> None:
    spec_path = write_spec(
        tmp_path / "spec.json", extra_rules=[{"pattern": "lib/*cpu*", "output": "libtorch"}]
    )
    tree = make_tree(tmp_path / "torch")
    plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    assert (tmp_path / "staging/libtorch/lib/libtorch_cpu.so").exists()


def test_unmatched_file_in_strict_area_is_refused(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    write(tree / "lib/libsurprise.so", b"?")
    write(tree / "bin/mystery", b"?")
    _assert_refused(tmp_path, spec_path, tree, r"match no rule for [\w-]+: bin/mystery, lib/libsurprise.so")


def test_missing_required_library_is_refused(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    (tree / "lib/libtorch_cpu.so").unlink()
    _assert_refused(tmp_path, spec_path, tree, r"missing in the tree: lib/libtorch_cpu.so \(libtorch\)")


def test_cuda_requires_cuda_libraries_and_a_variant(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    _assert_refused(tmp_path, spec_path, tree, r"lib/libtorch_cuda.so \(libtorch\)", cuda=True)
    tree2 = make_tree(tmp_path / "torch2", cuda=True)
    _assert_refused(tmp_path, spec_path, tree2, r"needs --linalg-variant", cuda=True)


@pytest.mark.parametrize("pattern", ["../lib/libc10.so", "/lib/libc10.so", "lib/../../x", "lib//x"])
def test_rule_escaping_the_tree_is_refused(tmp_path: Path, pattern: str) -> None:
    spec_path = write_spec(tmp_path / "spec.json", extra_rules=[{"pattern": pattern, "output": "libtorch"}])
    tree = make_tree(tmp_path / "torch")
    _assert_refused(tmp_path, spec_path, tree, r"pattern .* (escapes|absolute|empty path segment)")


def test_existing_file_in_staging_is_not_overwritten(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    old = write(tmp_path / "staging/libtorch/lib/libtorch_cpu.so", b"old")
    before = snapshot(tree)
    with pytest.raises(MegabuildError, match=r"already in the staging dir: libtorch/lib/libtorch_cpu.so"):
        plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    assert snapshot(tree) == before and old.read_bytes() == b"old"


def test_staging_inside_tree_is_refused(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    with pytest.raises(MegabuildError, match="must not contain each other"):
        plan_stage(load_spec(spec_path), tree, tree / "staging").run()


def test_cuda_two_passes_stage_both_linalg_variants(tmp_path: Path, spec_path: Path) -> None:
    spec = load_spec(spec_path)
    tree = make_tree(tmp_path / "torch", cuda=True)
    staging = tmp_path / "staging"
    plan_stage(spec, tree, staging, cuda=True, linalg_variant="nomagma").run()
    assert (staging / "libtorch-cuda-linalg-nomagma/lib/libtorch_cuda_linalg.so").read_bytes() == b"linalg"
    # magma pass: the build puts every file back; stage the linalg library only
    make_tree(tmp_path / "torch-pass2", cuda=True)
    write(tmp_path / "torch-pass2/lib/libtorch_cuda_linalg.so", b"magma", 0o755)
    before = snapshot(tmp_path / "torch-pass2")
    plan_stage(
        spec,
        tmp_path / "torch-pass2",
        staging,
        cuda=True,
        linalg_variant="magma",
        only=["libtorch-cuda-linalg"],
    ).run()
    assert (staging / "libtorch-cuda-linalg-magma/lib/libtorch_cuda_linalg.so").read_bytes() == b"magma"
    after = snapshot(tmp_path / "torch-pass2")
    assert set(before) - set(after) == {"lib/libtorch_cuda_linalg.so"}
    assert sorted(p.name for p in staging.iterdir()) == [
        "_dropped",
        "libtorch",
        "libtorch-cuda-linalg-magma",
        "libtorch-cuda-linalg-nomagma",
    ]


def test_unknown_only_output_and_variant(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch", cuda=True)
    _assert_refused(tmp_path, spec_path, tree, "unknown output", only=["libtorch-magma"])
    _assert_refused(tmp_path, spec_path, tree, "not a variant", cuda=True, linalg_variant="openblas")


def test_copy_fallback_for_small_files_counts_bytes(
    tmp_path: Path, spec_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def exdev(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    tree = make_tree(tmp_path / "torch")
    monkeypatch.setattr(fsmove.os, "rename", exdev)
    monkeypatch.setattr(fsmove.os, "link", exdev)
    report = plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    assert report.stats.renamed == 0 and report.stats.linked == 0
    assert report.stats.copied == 9
    assert report.stats.bytes_copied == 300 + 3000 + 3 + 5 + 5 + 13 + 1 + 4  # symlink recreated, not counted
    assert os.readlink(tmp_path / "staging/libtorch/lib/libc10.so") == "libc10.so.2.13.0"
    assert stat.S_IMODE((tmp_path / "staging/libtorch/lib/libtorch_cpu.so").stat().st_mode) == 0o750


def test_big_file_across_file_systems_is_refused_up_front(
    tmp_path: Path, spec_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "torch")
    write(tree / "lib/libtorch_cpu.so", 5 * 1024 * 1024)
    monkeypatch.setattr("megabuild.split.stage.same_filesystem", lambda _a, _b: False)
    _assert_refused(tmp_path, spec_path, tree, r"another file system .* lib/libtorch_cpu.so")


def test_failure_half_way_rolls_back(
    tmp_path: Path, spec_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = make_tree(tmp_path / "torch")
    before = snapshot(tree)
    real_rename = os.rename
    calls = {"n": 0}

    def flaky(src: object, dst: object) -> None:
        calls["n"] += 1
        if calls["n"] == 5:
            raise OSError(errno.EIO, "Input/output error")
        real_rename(src, dst)  # type: ignore[arg-type]

    def no_link(*_args: object, **_kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(fsmove.os, "rename", flaky)
    monkeypatch.setattr(fsmove.os, "link", no_link)
    with pytest.raises(MegabuildError, match="moved back"):
        plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    assert snapshot(tree) == before


def test_cli_stage_and_errors(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    (tree / "lib/libtorch_cpu.so").unlink()
    before = snapshot(tree)
    res = run_cli("stage", "--spec", spec_path, "--tree", tree, "--staging", tmp_path / "staging")
    assert res.returncode == 1
    assert res.stderr.startswith("megabuild: error: ") and res.stderr.count("\n") == 1
    assert "Traceback" not in res.stderr and "lib/libtorch_cpu.so" in res.stderr
    assert snapshot(tree) == before

    write(tree / "lib/libtorch_cpu.so", b"cpu")
    res = run_cli(
        "stage", "--spec", spec_path, "--tree", tree, "--staging", tmp_path / "staging", "--dry-run"
    )
    assert res.returncode == 0 and "would stage" in res.stdout
    assert not (tmp_path / "staging").exists()
    res = run_cli("stage", "--spec", spec_path, "--tree", tree, "--staging", tmp_path / "staging")
    assert res.returncode == 0, res.stderr
    assert "libtorch" in res.stdout and "bytes copied: 0" in res.stdout

    res = run_cli("stage", "--spec", tmp_path / "nope.json", "--tree", tree, "--staging", tmp_path / "s2")
    assert res.returncode == 1 and "cannot read split spec" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("stage", "--tree", tree)
    assert res.returncode == 2  # argparse usage error


def test_mini_spec_is_not_mutated() -> None:
    assert MINI_SPEC["rules"][0]["pattern"] == "lib/libc10.so*"  # type: ignore[index]


@pytest.mark.parametrize(
    ("link", "target", "why"),
    [
        ("lib/libc10.so.5", "libtorch_python.so", "target goes to pytorch"),
        ("lib/libc10.so.2", "/usr/lib/libc10.so", "absolute"),
        ("lib/libc10.so.3", "../../elsewhere.so", "outside the tree"),
        ("lib/libc10.so.4", "libc10.so.gone", "dangling"),
    ],
)
def test_symlinks_must_still_resolve_after_staging(
    tmp_path: Path, spec_path: Path, link: str, target: str, why: str
) -> None:
    tree = make_tree(tmp_path / "torch")
    os.symlink(target, tree / link)
    _assert_refused(tmp_path, spec_path, tree, rf"symlinks would not resolve .*{link} -> .*\({why}\)")


def test_directory_symlink_moves_as_a_link(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    write(tree / "include/ATen/ops/add.h", b"//")
    os.symlink("ops", tree / "include/ATen/ops_alias")
    plan_stage(load_spec(spec_path), tree, tmp_path / "staging").run()
    alias = tmp_path / "staging/libtorch/include/ATen/ops_alias"
    assert alias.is_symlink() and os.readlink(alias) == "ops"
    assert (alias / "add.h").read_bytes() == b"//"


def test_stage_reports_every_problem_at_once(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    (tree / "lib/libtorch_cpu.so").unlink()
    write(tree / "lib/libstray.so")
    os.symlink("/usr/lib/libc10.so", tree / "lib/libc10.so.9")
    before = snapshot(tree)
    planned = plan_stage(load_spec(spec_path), tree, tmp_path / "staging")
    assert snapshot(tree) == before and not (tmp_path / "staging").exists()
    assert len(planned.plan.problems) == 3
    with pytest.raises(SplitProblems) as caught:
        check(planned.plan)
    message = str(caught.value)
    assert "lib/libstray.so" in message and "missing in the tree: lib/libtorch_cpu.so" in message
    assert "symlinks would not resolve" in message and message.endswith("; nothing was moved")


def test_stage_dry_run_prints_every_move(tmp_path: Path, spec_path: Path) -> None:
    tree = make_tree(tmp_path / "torch")
    staging = tmp_path / "staging"
    res = run_cli("stage", "--spec", spec_path, "--tree", tree, "--staging", staging, "--dry-run")
    assert res.returncode == 0, res.stderr
    moves = [line for line in res.stdout.splitlines() if line.startswith("  move ")]
    assert f"  move {tree / 'lib/libc10.so'} -> {staging / 'libtorch/lib/libc10.so'}" in moves
    assert f"  move {tree / 'bin/test_api'} -> {staging / '_dropped/bin/test_api'}" in moves
    assert len(moves) == 9 and not staging.exists()


def test_many_problems_are_capped() -> None:
    problems = tuple(f"problem {i}" for i in range(40))
    message = str(SplitProblems(problems, "nothing was moved"))
    assert message.count("problem ") == 12 and "and 28 more problem(s); nothing was moved" in message
