"""macOS: ``wheel.exclude`` and link-back with the real osx-arm64 ``.dylib`` names and load commands.

The real 2.14.1 macOS arm64 wheel (from PyPI at test time, as tests/test_metal_headers.py gets
it) gives each Mach-O file's load commands, read here with a small parser of the Mach-O header
(``LC_ID_DYLIB``, ``LC_LOAD_DYLIB``, ``LC_LOAD_WEAK_DYLIB``, ``LC_RPATH``). Upstream links its
libraries to each other as ``@loader_path/libX.dylib`` (``_C`` as ``@loader_path/lib/...``,
``torch_shm_manager`` as ``@loader_path/../lib/...``), names them ``@rpath/libX.dylib`` and
bundles ``libomp.dylib``. The conda prefix is laid out by the real split of the real listing
(tests/test_metal_headers.py's ``split_prefix``: stage, install libtorch, link-back), with
llvm-openmp's ``lib/libomp.dylib`` as a stand-in (a run dependency of libtorch). Every
``@loader_path``/``@rpath`` dependency of every packaged Mach-O file must then resolve, whether
dyld takes ``@loader_path`` from the file a link-back symlink points to (what the recipe relies
on); taken from the symlink's own directory only libtorch_cpu's ``libomp.dylib`` would be missing
(asserted, so that any other gap fails); without link-back libtorch_python does not load.

What only a Mac shows: conda-build's own install-name and rpath post-processing of the built
files, and dyld itself.
"""

from __future__ import annotations

import os
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest
from _split_util import DATA, REAL_SPEC, read_listing, write
from feedstock import patch_check
from megabuild.pipeline.wheel_settings import libtorch_excludes
from megabuild.split.spec import DROPPED, compile_patterns, load_spec
from test_metal_headers import split_prefix

LISTING = DATA / "torch-2.14.1-cp312-macosx_arm64-files.tsv"
C_EXT = "torch/_C.cpython-312-darwin.so"
MH_MAGIC_64 = 0xFEEDFACF
LC_ID_DYLIB, LC_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_RPATH = 0xD, 0xC, 0x80000018, 0x8000001C

pytestmark = pytest.mark.slow  # may fetch the real macOS arm64 wheel (127 MB) once


def load_commands(data: bytes) -> dict[str, list[str]]:
    """``id``, ``needs`` (load and weak-load dylibs) and ``rpaths`` of a thin 64-bit Mach-O file."""
    magic, _cpu, _sub, _type, ncmds = struct.unpack_from("<5I", data, 0)
    assert magic == MH_MAGIC_64, f"not a thin 64-bit Mach-O file: {magic:#x}"
    found: dict[str, list[str]] = {"id": [], "needs": [], "rpaths": []}
    kinds = {LC_ID_DYLIB: "id", LC_LOAD_DYLIB: "needs", LC_LOAD_WEAK_DYLIB: "needs", LC_RPATH: "rpaths"}
    offset = 32  # sizeof(mach_header_64)
    for _ in range(ncmds):
        cmd, size = struct.unpack_from("<2I", data, offset)
        if cmd in kinds:
            (name_at,) = struct.unpack_from("<I", data, offset + 8)
            name = data[offset + name_at : offset + size].split(b"\0", 1)[0].decode()
            found[kinds[cmd]].append(name)
        offset += size
    return found


def is_macho(path: str, executable: bool) -> bool:
    return path.endswith((".dylib", ".so")) or (path.startswith("torch/bin/") and executable)


@pytest.fixture(scope="module")
def wheel_macho() -> dict[str, dict[str, list[str]]]:
    """Load commands of every Mach-O file of the real wheel (first 256 KiB of each)."""
    try:
        path = patch_check.download_wheel(patch_check.DEFAULT_PLATFORM)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} macOS wheel not reachable on PyPI: {exc}")
    rows = read_listing(LISTING)
    out = {}
    with zipfile.ZipFile(path) as zf:
        for name, _size, executable in rows:
            if name.startswith("torch/") and is_macho(name, executable):
                with zf.open(name) as fh:
                    out[name] = load_commands(fh.read(256 * 1024))
    return out


@pytest.fixture(scope="module")
def conda_prefix(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("dylibs")
    prefix, sp_dir = split_prefix({}, root)
    write(prefix / "lib/libomp.dylib", b"llvm-openmp stand-in", 0o755)
    return prefix, sp_dir


def placed(path: str, prefix: Path, sp_dir: Path) -> list[Path]:
    """Where the packages put a wheel file: $PREFIX (libtorch) and/or site-packages (pytorch)."""
    rel = path.removeprefix("torch/")
    found = [p for p in (prefix / rel, sp_dir / path) if os.path.lexists(p)]
    return found


def resolve(dep: str, image: Path, rpaths: list[str], real: bool) -> Path | None:
    """dyld's lookup of ``dep`` for ``image`` (loaded by that path; ``real``: by its target)."""
    loader = (image.resolve() if real else image).parent
    if dep.startswith("@loader_path/"):
        candidates = [loader / dep.removeprefix("@loader_path/")]
    elif dep.startswith("@rpath/"):
        dirs = [Path(str(r).replace("@loader_path", str(loader))) for r in rpaths]
        candidates = [d / dep.removeprefix("@rpath/") for d in dirs]
    else:
        return Path(dep)  # the system's (/usr/lib, /System/Library): not in the env
    return next((c for c in candidates if c.exists()), None)


def unresolved(
    macho: dict[str, dict[str, list[str]]], prefix: Path, sp_dir: Path, real: bool = True
) -> list[str]:
    """``image: dependency`` for each dependency that finds no file (``real``: see resolve)."""
    problems = []
    for name, commands in macho.items():
        for image in placed(name, prefix, sp_dir):
            for dep in commands["needs"]:
                if resolve(dep, image, commands["rpaths"], real) is None:
                    problems.append(f"{image.relative_to(prefix)}: {dep}")
    return problems


def test_upstream_links_by_loader_path_and_names_by_rpath(
    wheel_macho: dict[str, dict[str, list[str]]],
) -> None:
    """The facts the layout has to satisfy (a change upstream makes this test say so)."""
    assert wheel_macho[C_EXT]["needs"][0] == "@loader_path/lib/libtorch_python.dylib"
    python = wheel_macho["torch/lib/libtorch_python.dylib"]
    assert python["id"] == ["@rpath/libtorch_python.dylib"]
    assert "@loader_path/libc10.dylib" in python["needs"]
    assert "@loader_path/libomp.dylib" in wheel_macho["torch/lib/libtorch_cpu.dylib"]["needs"]
    assert wheel_macho["torch/bin/torch_shm_manager"]["rpaths"] == ["@loader_path/../lib"]


def test_every_dependency_resolves_in_the_split_prefix(
    wheel_macho: dict[str, dict[str, list[str]]], conda_prefix: tuple[Path, Path]
) -> None:
    prefix, sp_dir = conda_prefix
    spec = load_spec(REAL_SPEC, "osx-arm64")
    assert spec.classify("lib/libomp.dylib").output == DROPPED  # conda's llvm-openmp instead
    assert not os.path.lexists(sp_dir / "torch/lib/libomp.dylib")
    packaged = [name for name in wheel_macho if placed(name, prefix, sp_dir)]
    assert C_EXT in packaged and "torch/lib/libtorch_cpu.dylib" in packaged
    # dyld taking @loader_path from the file a link points to (what the recipe's design relies
    # on, recipe/patches/README.md "macOS: libomp and omp.h"): everything resolves
    assert unresolved(wheel_macho, prefix, sp_dir) == []
    # Were it the path an image was loaded by, libtorch_cpu loaded through its link in
    # site-packages (libtorch_python's @loader_path/libtorch_cpu.dylib) would look for the
    # dropped torch/lib/libomp.dylib: the one open question only a Mac answers (docs/testing.md)
    assert unresolved(wheel_macho, prefix, sp_dir, real=False) == [
        "lib/python3.12/site-packages/torch/lib/libtorch_cpu.dylib: @loader_path/libomp.dylib"
    ]
    # libtorch_python stays a real file next to _C; libtorch's are links into $PREFIX/lib
    assert not (sp_dir / "torch/lib/libtorch_python.dylib").is_symlink()
    assert (sp_dir / "torch/lib/libc10.dylib").resolve() == (prefix / "lib/libc10.dylib").resolve()


def test_without_link_back_libtorch_python_does_not_load(
    wheel_macho: dict[str, dict[str, list[str]]], tmp_path: Path
) -> None:
    """The control: the pytorch wheel alone (wheel.exclude applied) next to libtorch in $PREFIX."""
    prefix, sp_dir = tmp_path / "prefix", tmp_path / "prefix/lib/python3.12/site-packages"
    spec = load_spec(REAL_SPEC, "osx-arm64")
    excluded = compile_patterns(libtorch_excludes(spec))
    for name, _size, _x in read_listing(LISTING):
        rel = name.removeprefix("torch/")
        if name.startswith("torch/") and excluded.match(name):
            target = spec.install_path(rel) if spec.classify(rel).output != DROPPED else None
            if target is not None:
                write(prefix / target, b"libtorch")
        elif name.startswith("torch/"):
            write(sp_dir / name, b"pytorch")
    write(prefix / "lib/libomp.dylib", b"llvm-openmp stand-in")
    missing = unresolved(
        {
            C_EXT: wheel_macho[C_EXT],
            "torch/lib/libtorch_python.dylib": wheel_macho["torch/lib/libtorch_python.dylib"],
        },
        prefix,
        sp_dir,
    )
    assert any("@loader_path/libc10.dylib" in m for m in missing), missing


def test_wheel_exclude_keeps_only_pytorchs_own_binaries(wheel_macho: dict[str, dict[str, list[str]]]) -> None:
    """The pytorch step packs no libtorch dylib: with the real .dylib names, only _C and
    libtorch_python of the Mach-O files stay in the wheel; libomp.dylib and omp.h are left out."""
    excluded = compile_patterns(libtorch_excludes(load_spec(REAL_SPEC, "osx-arm64")))
    kept = sorted(name for name in wheel_macho if not excluded.match(name))
    assert kept == [C_EXT, "torch/lib/libtorch_python.dylib"], kept
    assert excluded.match("torch/lib/libomp.dylib") and excluded.match("torch/include/omp.h")
