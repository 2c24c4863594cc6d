"""Helpers shared by the tests of ``megabuild split`` (not a test module)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from feedstock import wheel_files
from feedstock.paths import RECIPE, REPO
from feedstock.split_check.layout import Placeholders
from feedstock.wheel_files import Row
from support.megabuild_cli import run_megabuild

REAL_SPEC = RECIPE / "split_spec.json"
DATA = REPO / "tests" / "data"
# Listings of the real torch 2.14.1 wheels (python -m feedstock list-wheel-files; see tests/data/README.md).
TORCH_VERSION = "2.14.1"
WHEEL_LISTING = DATA / "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv"  # linux-64 CUDA 13.0 (PyPI)


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_megabuild("split", *args)


def write(path: Path, data: bytes | int = b"x", mode: int | None = None) -> Path:
    """Create a file with *data* (or a sparse file of *data* bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        if isinstance(data, int):
            fh.truncate(data)
        else:
            fh.write(data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Everything observable about a tree: kind, mode, inode, size, link target, content."""
    out: dict[str, tuple[object, ...]] = {}
    if not root.exists():
        return out
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            st = path.lstat()
            rel = path.relative_to(root).as_posix()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", stat.S_IMODE(st.st_mode))
            else:
                data = path.read_bytes() if st.st_size < 4096 else b""
                out[rel] = ("file", stat.S_IMODE(st.st_mode), st.st_ino, st.st_size, data)
    return out


MINI_SPEC = {
    "version": 1,
    "default_output": "pytorch",
    "outputs": {
        "libtorch": {},
        "libtorch-cuda-linalg": {"variants": ["magma", "nomagma"]},
        "pytorch": {},
        "_dropped": {},
    },
    "strict_areas": ["lib/**", "bin/**", "share/**"],
    "rules": [
        {"pattern": "lib/libc10.so*", "output": "libtorch", "required": "always"},
        {"pattern": "lib/libtorch_cpu.so", "output": "libtorch", "required": "always"},
        {"pattern": "lib/libtorch_cuda.so", "output": "libtorch", "required": "cuda"},
        {"pattern": "lib/libtorch_cuda_linalg.so", "output": "libtorch-cuda-linalg", "required": "cuda"},
        {"pattern": "lib/libtorch_python.so", "output": "pytorch", "required": "always", "prefix_link": True},
        {"pattern": "bin/torch_shm_manager", "output": "libtorch", "required": "always"},
        {"pattern": "share/cmake/**", "output": "libtorch", "required": "always"},
        {"pattern": "include/ATen/**", "output": "libtorch", "required": "always"},
        {"pattern": "lib/libtorchbind_test.so", "output": "_dropped", "note": "test-only"},
        {"pattern": "bin/test_*", "output": "_dropped", "note": "test binaries"},
    ],
}


def write_spec(
    path: Path, spec: dict[str, object] | None = None, extra_rules: list[dict[str, object]] = ()
) -> Path:
    data = json.loads(json.dumps(spec or MINI_SPEC))
    data["rules"] = list(data["rules"]) + list(extra_rules)  # type: ignore[call-overload]
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def make_tree(root: Path, cuda: bool = False) -> Path:
    """A small torch/ tree with symlinks, a hard link and unusual modes."""
    write(root / "lib/libc10.so.2.13.0", b"c10" * 100, 0o755)
    os.symlink("libc10.so.2.13.0", root / "lib/libc10.so")
    write(root / "lib/libtorch_cpu.so", b"cpu" * 1000, 0o750)
    write(root / "lib/libtorch_python.so", b"py", 0o755)
    write(root / "lib/libtorchbind_test.so", b"t", 0o755)
    write(root / "bin/torch_shm_manager", b"shm", 0o755)
    write(root / "bin/test_api", b"test", 0o755)
    write(root / "share/cmake/Torch/TorchConfig.cmake", b"cmake", 0o444)
    os.link(
        root / "share/cmake/Torch/TorchConfig.cmake", root / "share/cmake/Torch/TorchConfigHardlink.cmake"
    )
    write(root / "include/ATen/ATen.h", b"#pragma once\n", 0o644)
    write(root / "include/pybind11/pybind11.h", b"//", 0o644)
    write(root / "__init__.py", b"", 0o644)
    write(root / "_C.cpython-311-x86_64-linux-gnu.so", b"C", 0o755)
    if cuda:
        write(root / "lib/libtorch_cuda.so", b"cuda", 0o755)
        write(root / "lib/libtorch_cuda_linalg.so", b"linalg", 0o755)
    return root


def read_listing(listing: Path) -> list[Row]:
    """Rows ``(path, size, executable)`` of a wheel listing: the version-bump check's reader."""
    return wheel_files.read_listing(listing)


def _with_parent(root: Path, path: str, made: set[str]) -> str:
    """``root/path``, its directory created once per run (``made`` remembers)."""
    full = os.path.join(root, path)
    parent = os.path.dirname(full)
    if parent not in made:
        os.makedirs(parent, exist_ok=True)
        made.add(parent)
    return full


def lay_out_files(root: Path, rows: Sequence[tuple[str, int, bool]], *, sparse: bool = True) -> int:
    """Create *rows* under *root*: sparse files of the real size, or empty placeholders.
    Executables get mode 0755, everything else 0644. Returns the count."""
    made: set[str] = set()
    for path, size, executable in rows:
        full = _with_parent(root, path, made)
        fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            if sparse:
                os.ftruncate(fd, size)  # real size, no data blocks
            os.fchmod(fd, 0o755 if executable else 0o644)
        finally:
            os.close(fd)
    return len(rows)


def lay_out_placeholders(root: Path, rows: Sequence[Row], blanks: Path) -> int:
    """Create *rows* under *root* as empty placeholders, as the split procedure lays out a listing
    (``feedstock.split_check.layout.Placeholders``: hard links to one blank file per mode in *blanks*).
    Never write into a placeholder. Returns the count."""
    Placeholders(tuple(rows)).lay_out(rows, root, blanks)
    return len(rows)


def lay_out_wheel(sp_dir: Path, tops: tuple[str, ...] = ("torch/",)) -> int:
    """Create the linux-64 CUDA wheel's files (sparse, real sizes) under *sp_dir*, as
    ``pip install .`` leaves them in site-packages; return the count."""
    rows = [row for row in read_listing(WHEEL_LISTING) if row[0].startswith(tops)]
    return lay_out_files(sp_dir, rows)
