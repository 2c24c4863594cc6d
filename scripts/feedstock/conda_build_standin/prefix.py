"""conda-like prefixes for the harness, and the file snapshots that decide package contents."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from feedstock.conda_build_standin.cpythons import (
    CPython,
    abi_args,
    find_cpythons,
    keep_tree,
    make_conda_like_prefix,
    tree_key,
)


def pick_python(version: str, pythons: Sequence[CPython] | None = None) -> CPython:
    """The CPython ``X.Y`` (``X.Yt``: its free-threaded build) here, or the closest available
    minor version of the same kind (of the other kind only when there is none)."""
    pythons = list(pythons) if pythons is not None else find_cpythons()
    if not pythons:
        raise RuntimeError("no CPython >= 3.10 found (see tests/support/pythons.py)")
    freethreaded = version.endswith("t")
    major, minor = (int(p) for p in version.removesuffix("t").split(".")[:2])
    return min(
        pythons,
        key=lambda c: (
            c.freethreaded != freethreaded,
            abs(c.version[1] - minor) + 100 * abs(c.version[0] - major),
            c.version,
        ),
    )


def relocate_sysconfigdata(cpython: CPython, prefix: Path) -> None:
    """Rewrite ``_sysconfigdata_*.py`` so ``INCLUDEPY`` & co. point into ``prefix``.

    conda relocates these values when it installs python; make_conda_like_prefix symlinks the
    original module, so FindPython would find the headers of the original install (and a
    Python-version swap of the CMake cache would point at a directory that does not exist).
    """
    stdlib = prefix / "lib" / cpython.dirname
    for link in stdlib.glob("_sysconfigdata_*.py"):
        original = link.resolve()
        text = original.read_text()
        link.unlink()
        link.write_text(text.replace(str(cpython.root), str(prefix)))


def materialize_include(cpython: CPython, prefix: Path) -> None:
    """Make ``include/pythonX.Y`` a real directory (make_conda_like_prefix symlinks it).

    conda links a package's files into the env (hard links into the package cache), so the
    headers really are under ``$PREFIX``. With conda-forge's ``CMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY``
    CMake rejects a header directory that only reaches the prefix through a symlink pointing out
    of it (FindPython: "missing: Python_INCLUDE_DIRS").
    """
    include = prefix / "include" / cpython.dirname
    if include.is_symlink():
        target = include.resolve()
        include.unlink()
        shutil.copytree(target, include, symlinks=True)


# Installed separately from make_conda_like_prefix, which verifies its packages by importing each
# distribution name in one process: pyyaml imports as ``yaml``, and on Python < 3.12 importing
# setuptools after pip (which loaded the stdlib distutils) trips setuptools' distutils hack.
IMPORT_NAME_DIFFERS = {"pyyaml", "setuptools"}


# A directory kept across the harness's runs (tests/support/fixtures.py sets it for the session):
# pip's wheel cache and the site-packages trees the harness made, so that each run of a session
# does not download and byte-compile the same host packages again.
SHARED_CACHE_ENV = "FEEDSTOCK_HARNESS_CACHE"


def shared_cache(default: Path) -> Path:
    """The session's harness cache (``$FEEDSTOCK_HARNESS_CACHE``), else ``default`` (one run's)."""
    given = os.environ.get(SHARED_CACHE_ENV)
    return Path(given) if given else default


def python_prefix(
    cpython: CPython, prefix: Path, packages: Sequence[str] = (), cache_dir: Path | None = None
) -> Path:
    """A conda-like prefix of ``cpython`` with ``packages`` installed and byte-compiled, as conda
    would have linked them. With ``cache_dir`` the compiled site-packages is kept there (by
    interpreter and package list) and later prefixes get a copy: the interpreter fixes each code
    object's file name when it loads a cached .pyc, and copies keep the sources' mtimes."""
    site_packages = prefix / "lib" / cpython.dirname / "site-packages"
    key = tree_key(str(cpython.executable), cpython.tag, *packages)
    tree = cache_dir / "prefix-site-packages" / key if cache_dir is not None and packages else None
    if tree is not None and tree.is_dir():
        make_conda_like_prefix(cpython, prefix, packages=())
        relocate_sysconfigdata(cpython, prefix)
        materialize_include(cpython, prefix)
        shutil.copytree(tree, site_packages, symlinks=True, dirs_exist_ok=True)
        return prefix
    direct = [p for p in packages if p.lower() not in IMPORT_NAME_DIFFERS]
    others = [p for p in packages if p.lower() in IMPORT_NAME_DIFFERS]
    make_conda_like_prefix(cpython, prefix, packages=tuple(direct), cache_dir=cache_dir)
    relocate_sysconfigdata(cpython, prefix)
    materialize_include(cpython, prefix)
    if others:
        pip_install_target(cpython.short, site_packages, others, cache_dir, cpython.freethreaded)
    if packages:
        # conda packages ship their bytecode; without this, running pip in the prefix would
        # write __pycache__ files that look new to the package-contents snapshot.
        subprocess.run(
            [str(prefix / "bin" / "python"), "-m", "compileall", "-q", "-j0", str(site_packages)],
            check=True, capture_output=True,
        )  # fmt: skip
        if tree is not None:
            keep_tree(site_packages, tree)
    return prefix


def pip_install_target(
    short: str,
    target: Path,
    packages: Sequence[str],
    cache_dir: Path | None = None,
    freethreaded: bool = False,
) -> None:
    """``pip install --target`` binary wheels for Python ``short`` (no deps, no bytecode);
    ``freethreaded``: for its ``t`` build. With ``cache_dir`` what they install is kept there and
    a later call copies it."""
    if cache_dir is None:
        _pip_target(short, target, packages, None, freethreaded)
        return
    tree = cache_dir / "pip-target" / tree_key(short, str(freethreaded), *packages)
    if not tree.is_dir():
        with tempfile.TemporaryDirectory(prefix="pip-target-") as fresh:  # these packages only
            _pip_target(short, Path(fresh), packages, cache_dir, freethreaded)
            keep_tree(Path(fresh), tree)
    shutil.copytree(tree, target, symlinks=True, dirs_exist_ok=True)


def _pip_target(
    short: str, target: Path, packages: Sequence[str], cache_dir: Path | None, freethreaded: bool
) -> None:
    cmd = [
        sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
        "--target", str(target), "--python-version", short, "--implementation", "cp",
        *abi_args(short, freethreaded), "--only-binary=:all:", "--no-deps", *packages,
    ]  # fmt: skip
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(packages)} for Python {short} failed:\n{out.stderr}")


def empty_prefix(prefix: Path) -> Path:
    if prefix.is_symlink() or prefix.is_file():
        prefix.unlink()
    elif prefix.exists():
        shutil.rmtree(prefix)
    for sub in ("bin", "lib", "include"):
        (prefix / sub).mkdir(parents=True)
    return prefix


def snapshot(prefix: Path) -> set[str]:
    """Relative paths of every file and symlink under ``prefix`` (directories are not files)."""
    found: set[str] = set()
    for root, dirs, files in os.walk(prefix):
        rel_root = os.path.relpath(root, prefix)
        for name in files:
            found.add(os.path.normpath(os.path.join(rel_root, name)))
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):
                found.add(os.path.normpath(os.path.join(rel_root, name)))
                dirs.remove(name)
    return found


def copy_tree_files(src_root: Path, files: Sequence[str], dst_root: Path) -> None:
    """Copy ``files`` (relative) from ``src_root`` to ``dst_root``, keeping symlinks as symlinks."""
    for rel in files:
        src, dst = src_root / rel, dst_root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            if dst.is_symlink() or dst.exists():
                dst.unlink()
            dst.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, dst)
