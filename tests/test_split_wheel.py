"""The real spec against the real layout of the torch 2.13.0 CPU wheel.

The listing (``tests/data/torch-2.13.0-cp311-linux_x86_64-files.tsv``) was made
by ``scripts/list_wheel_files.py`` from the wheel; the tree is laid out with
sparse files of the real sizes where ``setup.py build`` puts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _split_util import REAL_SPEC, WHEEL_LISTING, lay_out_wheel, read_listing, run_cli
from megabuild.split.spec import load_spec

TEST_ONLY = [
    "libaoti_custom_ops.so",
    "libbackend_with_compiler.so",
    "libjitbackend_test.so",
    "libtorchbind_test.so",
]


def _listing() -> dict[str, int]:
    rows = read_listing(WHEEL_LISTING)
    return {p[len("torch/") :]: s for p, s, _x in rows if p.startswith("torch/")}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build_lib = tmp_path_factory.mktemp("wheel") / "build/lib.linux-x86_64-cpython-311"
    lay_out_wheel(build_lib, tops=("torch/", "functorch/", "torchgen/"))
    return build_lib / "torch"


def test_real_spec_assigns_every_wheel_file(wheel_tree: Path, tmp_path: Path) -> None:
    listing = _listing()
    assert len(listing) > 11000 and _files(wheel_tree) == set(listing)
    spec = load_spec(REAL_SPEC, "linux-64")
    verdicts = {rel: spec.classify(rel) for rel in listing}
    assert not [rel for rel, v in verdicts.items() if v.output is None]
    dropped = {rel: v.rules[0].note for rel, v in verdicts.items() if v.output == "_dropped"}
    for name in TEST_ONLY:
        assert "test-only" in dropped[f"lib/{name}"]
    assert "OpenMP" in dropped["lib/libgomp.so.1"]
    assert all(note for note in dropped.values())

    staging = tmp_path / "staging"
    res = run_cli(
        "stage",
        "--spec",
        REAL_SPEC,
        "--target-platform",
        "linux-64",
        "--tree",
        wheel_tree,
        "--staging",
        staging,
    )
    print(res.stdout)  # bytes per output (shown with -rA / -s)
    assert res.returncode == 0, res.stderr
    assert "bytes copied: 0" in res.stdout

    libtorch, drop, stays = _files(staging / "libtorch"), _files(staging / "_dropped"), _files(wheel_tree)
    assert sorted(p.name for p in (staging).iterdir()) == ["_dropped", "libtorch"]
    # a partition of the wheel's torch/ tree
    assert not (libtorch & drop) and not (libtorch & stays) and not (drop & stays)
    assert libtorch | drop | stays == set(listing)

    for lib in ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_global_deps.so", "libshm.so"):
        assert f"lib/{lib}" in libtorch
    assert {"bin/torch_shm_manager", "share/cmake/Torch/TorchConfig.cmake"} <= libtorch
    assert all(p.startswith(("lib/", "bin/", "share/cmake/", "include/")) for p in libtorch)
    for sub in ("ATen", "c10", "caffe2", "torch", "tensorpipe"):
        assert any(p.startswith(f"include/{sub}/") for p in libtorch), sub
    # third-party headers stay with pytorch only (conda packages provide them in $PREFIX/include)
    assert "include/pybind11/pybind11.h" in stays and "include/sleef.h" in stays

    assert {"lib/libtorch_python.so", "_C.cpython-311-x86_64-linux-gnu.so", "__init__.py"} <= stays
    py = {p for p in listing if p.endswith(".py")}
    assert py <= stays
    assert {f"lib/{n}" for n in TEST_ONLY} | {"lib/libgomp.so.1", "bin/test_api", "bin/TCPStoreTest"} <= drop
    assert not any(p.startswith("bin/") for p in stays)
    # sizes survive the move
    assert (staging / "libtorch/lib/libtorch_cpu.so").stat().st_size == listing["lib/libtorch_cpu.so"]

    res = run_cli("verify", "--spec", REAL_SPEC, "--target-platform", "linux-64", "--staging", staging)
    assert res.returncode == 0, res.stderr
