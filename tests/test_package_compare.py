"""The comparison that holds the harness to the real conda-build (``feedstock.package_compare``),
on two package sets made here: it passes on equal sets and fails on each planted harness mistake.

The packages are written by the harness's own ``write_info`` (``info/index.json``, ``paths.json``),
so what the comparison reads is what the harness writes; conda-build's side is the same writer
given conda-build's answer. No conda-build is needed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from feedstock.conda_build_standin.packaging import Package, write_info
from feedstock.package_compare import KNOWN, Known, PackageView, compare, view_from_dir

PLACEHOLDER = "/opt/some-host-prefix_placehold"


def _package(
    root: Path,
    *,
    build: str = "cpu_generic_h1234567_0",
    extra: str | None = None,
    absolute_link: bool = False,
    depends: tuple[str, ...] = ("libgcc >=14",),
) -> PackageView:
    """libtorch-like: a library, its link, a text file with the prefix; ``extra``: one more file."""
    (root / "lib").mkdir(parents=True)
    (root / "share").mkdir()
    (root / "lib" / "libc10.so.2").write_bytes(b"not an ELF, but a library's bytes")
    target = str(root / "lib" / "libc10.so.2") if absolute_link else "libc10.so.2"
    os.symlink(target, root / "lib" / "libc10.so")
    (root / "share" / "TorchConfig.cmake").write_text(f"set(PREFIX {PLACEHOLDER})\n")
    files = ["lib/libc10.so.2", "lib/libc10.so", "share/TorchConfig.cmake"]
    if extra:
        (root / extra).parent.mkdir(parents=True, exist_ok=True)
        (root / extra).write_text("x\n")
        files.append(extra)
    record = {
        "name": "libtorch",
        "version": "2.14.1",
        "build": build,
        "build_number": 0,
        "depends": list(depends),
        "constrains": [],
        "subdir": "linux-64",
    }
    write_info(Package(record, root, files, placeholders={"share/TorchConfig.cmake": PLACEHOLDER}))
    (root / "info" / "run_exports.json").write_text(json.dumps({"weak": ["libtorch >=2.14.1,<2.15.0a0"]}))
    return view_from_dir(root)


def test_equal_sets_compare_equal(tmp_path: Path) -> None:
    ours = _package(tmp_path / "harness")
    theirs = _package(tmp_path / "conda-build", build="cpu_generic_habcdef0_0")  # another hash: paired
    unexplained, explained = compare([ours], [theirs])
    assert [(d.package, d.field, d.harness, d.real) for d in unexplained] == [
        (
            "libtorch-2.14.1-cpu_generic_h*_0",
            "index.build",
            "cpu_generic_h1234567_0",
            "cpu_generic_habcdef0_0",
        )
    ]
    assert explained == []
    same, _ = compare([ours], [_package(tmp_path / "again")])
    assert same == []


def test_a_file_the_harness_packs_and_conda_build_leaves_out_fails(tmp_path: Path) -> None:
    ours = _package(tmp_path / "harness", extra="lib/python3.12/site-packages/torch/__pycache__/x.pyc")
    theirs = _package(tmp_path / "conda-build")
    unexplained, _ = compare([ours], [theirs])
    assert [(d.field, d.item, d.harness, d.real) for d in unexplained] == [
        ("files", "lib/python3.12/site-packages/torch/__pycache__/x.pyc", "present", "absent")
    ]


def test_a_link_absolute_in_one_and_relative_in_the_other_fails(tmp_path: Path) -> None:
    ours = _package(tmp_path / "harness", absolute_link=True)
    theirs = _package(tmp_path / "conda-build")
    unexplained, _ = compare([ours], [theirs])
    assert [(d.field, d.item) for d in unexplained] == [("file.target", "lib/libc10.so")]
    assert unexplained[0].real == "libc10.so.2"


def test_depends_and_a_missing_package_fail(tmp_path: Path) -> None:
    ours = _package(tmp_path / "harness")
    theirs = _package(tmp_path / "conda-build", depends=("libgcc >=14", "libblas >=3.9.0,<4.0a0"))
    unexplained, _ = compare([ours], [theirs])
    assert [(d.field, d.item, d.harness) for d in unexplained] == [
        ("index.depends", "libblas >=3.9.0,<4.0a0", "absent")
    ]
    missing, _ = compare([], [theirs])
    assert [(d.field, d.real) for d in missing] == [("packages", "present")]


def test_a_known_difference_is_reported_with_its_reason_not_failed(tmp_path: Path) -> None:
    ours = _package(tmp_path / "harness", absolute_link=True)
    theirs = _package(tmp_path / "conda-build")
    known = [Known("libtorch-*", "file.target", "lib/*.so", "a planted reason")]
    unexplained, explained = compare([ours], [theirs], known)
    assert unexplained == []
    assert [k.reason for _, k in explained] == ["a planted reason"]


@pytest.mark.parametrize("key", ["CMAKE_ARGS", "FEEDSTOCK_COMPILER_CACHE"])
def test_the_env_each_script_saw_is_compared_with_its_own_paths_masked(tmp_path: Path, key: str) -> None:
    def env(root: str, **more: str) -> dict[str, str]:
        return {
            "PREFIX": f"{root}/h_env",
            "BUILD_PREFIX": f"{root}/b_env",
            "SRC_DIR": f"{root}/work",
            "PKG_NAME": "pytorch",
            "CMAKE_ARGS": f"-DCMAKE_INSTALL_PREFIX={root}/h_env",
            **more,
        }

    same, _ = compare([], [], envs=([("pytorch-py312", env("/a"))], [("pytorch-py312", env("/bb/c"))]))
    assert same == []
    planted = {key: "-DX=1" if key == "CMAKE_ARGS" else "/cache"}
    diffs, _ = compare(
        [], [], envs=([("pytorch-py312", env("/a", **planted))], [("pytorch-py312", env("/b"))])
    )
    assert [d.field for d in diffs] == [f"env.{key}"]
    order, _ = compare([], [], envs=([("top", {}), ("libtorch", {})], [("libtorch", {}), ("top", {})]))
    assert [d.field for d in order] == ["scripts"]


def test_the_known_differences_cover_no_planted_harness_mistake(tmp_path: Path) -> None:
    """KNOWN explains what the real conda-build does differently; the same fields going wrong
    elsewhere (another script's PY_VER, SRC_DIR, a package's license file) still fail."""
    env = {"PREFIX": "/a/h_env", "BUILD_PREFIX": "/a/b_env", "SRC_DIR": "/a/work", "PKG_NAME": "pytorch"}
    real = [("libtorch-split", {**env, "PY_VER": "3.13"}), ("pytorch-3.12", {**env, "PY_VER": "3.12"})]
    ours = [("libtorch-split", {**env, "PY_VER": "3.12"}), ("pytorch-3.12", {**env, "PY_VER": "3.11"})]
    unexplained, explained = compare([], [], KNOWN, (ours, real))
    assert [d.package for d, _ in explained] == ["env:libtorch-split"]
    assert [(d.package, d.field) for d in unexplained] == [("env:pytorch-3.12", "env.PY_VER")]
    moved = [("pytorch-3.12", {**env, "SRC_DIR": "/a/elsewhere"})]
    unexplained, _ = compare([], [], KNOWN, (moved, [("pytorch-3.12", env)]))
    assert [d.field for d in unexplained] == ["env.SRC_DIR"]
    ours_pkg = _package(tmp_path / "harness", extra="lib/python3.12/site-packages/torch/licenses/LICENSE")
    unexplained, _ = compare([ours_pkg], [_package(tmp_path / "conda-build")], KNOWN)
    assert [d.field for d in unexplained] == ["files"]
