"""The real spec against the real layout of the torch 2.14.1 linux-64 CUDA 13.0 wheel (PyPI).

The listing (``tests/data/torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv``) was
made by ``python -m feedstock list-wheel-files`` from the wheel; the tree is laid out with
sparse files of the real sizes where the top level's ``pip install .`` puts it
(scikit-build-core installs the wheel tree into ``$SP_DIR``).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from _split_util import DATA, REAL_SPEC, TORCH_VERSION, WHEEL_LISTING, lay_out_wheel, read_listing, run_cli
from feedstock import patch_check
from feedstock.wheel_files import list_wheel, sha256_of
from megabuild.split.spec import load_spec

CUDA_LIBS = ["c10_cuda", "torch_cuda", "caffe2_nvrtc", "torch_nvshmem"]
# All the wheel has that a conda build must not package: the wheel repair's OpenMP
# runtime and the bundled protobuf compiler. PyPI's CUDA wheels are built with
# BUILD_TEST=0, so the spec's test-library rules match nothing here.
DROPPED = {"lib/libgomp.so.1", "bin/protoc", "bin/protoc-3.21.12.0"}


def _listing() -> dict[str, int]:
    rows = read_listing(WHEEL_LISTING)
    return {p[len("torch/") :]: s for p, s, _x in rows if p.startswith("torch/")}


def _files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    sp_dir = tmp_path_factory.mktemp("wheel") / "prefix/lib/python3.12/site-packages"
    lay_out_wheel(sp_dir, tops=("torch/", "functorch/", "torchgen/"))
    return sp_dir / "torch"


def test_real_spec_assigns_every_wheel_file(wheel_tree: Path, tmp_path: Path) -> None:
    listing = _listing()
    assert len(listing) > 11000 and _files(wheel_tree) == set(listing)
    spec = load_spec(REAL_SPEC, "linux-64")
    verdicts = {rel: spec.classify(rel) for rel in listing}
    assert not [rel for rel, v in verdicts.items() if v.output is None]
    dropped = {rel: v.rules[0].note for rel, v in verdicts.items() if v.output == "_dropped"}
    assert set(dropped) == DROPPED
    assert "OpenMP" in dropped["lib/libgomp.so.1"]
    assert all(note for note in dropped.values())

    staging = tmp_path / "staging"
    res = run_cli(
        "stage", "--spec", REAL_SPEC, "--target-platform", "linux-64", "--tree", wheel_tree,
        "--staging", staging, "--cuda", "--linalg-variant", "nomagma",
    )  # fmt: skip
    print(res.stdout)  # bytes per output (shown with -rA / -s)
    assert res.returncode == 0, res.stderr
    assert "bytes copied: 0" in res.stdout

    linalg_dir = staging / "libtorch-cuda-linalg-nomagma"
    libtorch, drop, stays = _files(staging / "libtorch"), _files(staging / "_dropped"), _files(wheel_tree)
    linalg = _files(linalg_dir)
    assert sorted(p.name for p in staging.iterdir()) == ["_dropped", "libtorch", linalg_dir.name]
    # a partition of the wheel's torch/ tree
    parts = [libtorch, linalg, drop, stays]
    assert sum(map(len, parts)) == len(set().union(*parts)) == len(listing)
    assert set().union(*parts) == set(listing)

    for lib in ("c10", "torch", "torch_cpu", "torch_global_deps", "shm", *CUDA_LIBS):
        assert f"lib/lib{lib}.so" in libtorch, lib
    assert linalg == {"lib/libtorch_cuda_linalg.so"}
    assert {"bin/torch_shm_manager", "share/cmake/Torch/TorchConfig.cmake"} <= libtorch
    assert all(p.startswith(("lib/", "bin/", "share/cmake/", "include/")) for p in libtorch)
    for sub in ("ATen", "c10", "caffe2", "torch", "tensorpipe", "THC"):
        assert any(p.startswith(f"include/{sub}/") for p in libtorch), sub
    # third-party headers stay with pytorch only (conda packages provide them in $PREFIX/include)
    assert "include/pybind11/pybind11.h" in stays and "include/sleef.h" in stays

    assert {"lib/libtorch_python.so", "_C.cpython-312-x86_64-linux-gnu.so", "__init__.py"} <= stays
    py = {p for p in listing if p.endswith(".py")}
    assert py <= stays
    assert drop == DROPPED
    assert not any(p.startswith("bin/") for p in stays)
    # sizes survive the move
    for lib in ("libtorch_cpu.so", "libtorch_cuda.so"):
        assert (staging / "libtorch/lib" / lib).stat().st_size == listing[f"lib/{lib}"]

    # the magma pass relinks only the linalg library; then both variants are staged
    (wheel_tree / "lib/libtorch_cuda_linalg.so").write_bytes(b"magma")
    plat = ("--spec", REAL_SPEC, "--target-platform", "linux-64", "--cuda")
    res = run_cli(
        "stage", *plat, "--tree", wheel_tree, "--staging", staging,
        "--linalg-variant", "magma", "--only", "libtorch-cuda-linalg",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    res = run_cli("verify", *plat, "--staging", staging)
    assert res.returncode == 0, res.stderr


# No 2.14.1 wheel on PyPI is built with BUILD_TEST=1, so no real listing has these: the
# names are those of torch 2.13.0's CPU wheel (the last real listing that had them).
BUILD_TEST_FILES = [
    "lib/libaoti_custom_ops.so",
    "lib/libbackend_with_compiler.so",
    "lib/libjitbackend_test.so",
    "lib/libtorchbind_test.so",
    "bin/test_api",
    "bin/test_jit",
    "bin/TCPStoreTest",
    "bin/script_module_v4.ptl",
    "bin/test_interpreter_async.pt",
    "bin/upgrader_models/test_versioned_div_tensor_v2.ptl.ff",
]


@pytest.mark.parametrize("rel", BUILD_TEST_FILES)
def test_real_spec_drops_build_test_files(rel: str) -> None:
    verdict = load_spec(REAL_SPEC, "linux-64").classify(rel)
    assert verdict.output == "_dropped" and verdict.rules[0].note, rel


# The wheel each listing was made from: pip's --platform tag and ABI (tests/data/README.md).
WHEEL_PLATFORMS = {
    "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv": ("manylinux_2_28_x86_64", "cp312"),
    "torch-2.14.1-cp312-linux_aarch64-cu130-files.tsv": ("manylinux_2_28_aarch64", "cp312"),
    "torch-2.14.1-cp312-macosx_arm64-files.tsv": ("macosx_14_0_arm64", "cp312"),
    "torch-2.14.1-cp312-win_amd64-files.tsv": ("win_amd64", "cp312"),
    "torch-2.14.1-cp314-macosx_arm64-files.tsv": ("macosx_14_0_arm64", "cp314"),
    "torch-2.14.1-cp314t-linux_x86_64-cu130-files.tsv": ("manylinux_2_28_x86_64", "cp314t"),
    "torch-2.14.1-cp314t-macosx_arm64-files.tsv": ("macosx_14_0_arm64", "cp314t"),
    "torch-2.14.1-cp314t-win_amd64-files.tsv": ("win_amd64", "cp314t"),
}


def _cached_wheel(platform: str, abi: str) -> Path:
    """The wheel from python -m feedstock check-patches's cache, fetched from PyPI if missing (cp314 and
    cp314t wheels in their own dirs: check_patches takes any torch wheel of its platform dir)."""
    dest = patch_check.cache_dir() / (platform if abi == "cp312" else f"{platform}-{abi}")
    pattern = f"torch-{TORCH_VERSION}-*-{abi}-*.whl"
    if not sorted(dest.glob(pattern)):
        dest.mkdir(parents=True, exist_ok=True)
        python = f"{abi[2]}.{abi[3:].rstrip('t')}"
        try:
            patch_check.pip_download(f"torch=={TORCH_VERSION}", platform, python, dest, timeout=1800, abi=abi)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
            pytest.skip(f"torch {TORCH_VERSION} {abi} wheel for {platform} not reachable on PyPI: {exc}")
    return sorted(dest.glob(pattern))[0]


def test_every_listing_names_its_wheel() -> None:
    assert set(WHEEL_PLATFORMS) == {p.name for p in DATA.glob("*-files.tsv")}


@pytest.mark.slow  # fetches the real wheels (about 1.3 GB) into the cache once
@pytest.mark.parametrize("listing", sorted(WHEEL_PLATFORMS))
def test_listing_and_provenance_match_the_wheel(listing: str) -> None:
    wheel = _cached_wheel(*WHEEL_PLATFORMS[listing])
    rows = read_listing(DATA / listing)
    assert list_wheel(wheel) == rows
    readme = (DATA / "README.md").read_text(encoding="utf-8").splitlines()
    row = [line for line in readme if line.startswith(f"| `{listing}` |")]
    assert len(row) == 1, f"{listing}: no single provenance row in tests/data/README.md"
    assert f"`{wheel.name}`" in row[0] and f"`{sha256_of(wheel)}`" in row[0]
    assert row[0].rstrip().endswith(f"| {len(rows):,} |"), row[0]
