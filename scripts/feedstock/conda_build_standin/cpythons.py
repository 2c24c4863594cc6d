"""Find the CPythons on this machine and build conda-like prefixes from them.

Shared test support (other test suites import it; keep this API stable):

``CPython``
    ``@dataclass(frozen=True)`` with ``version: tuple[int, int, int]``,
    ``executable: Path`` (the real interpreter binary), ``root: Path``
    (its installation prefix, ``sys.base_prefix``) and ``freethreaded: bool``
    (a ``--disable-gil`` build, default False); ``.short`` is ``"3.12"`` (also
    ``"3.13"`` for 3.13t), ``.tag`` is ``"3.12"`` or ``"3.13t"`` and ``.dirname``
    ``"python3.12"`` or ``"python3.13t"`` (its ``lib/``, ``include/`` and ``bin/`` names).

``find_freethreaded() -> CPython | None``
    The free-threaded CPython ``.ci/provision-freethreaded-python.sh`` builds:
    ``FEEDSTOCK_FREETHREADED_PYTHON`` (an executable) when set, else the
    provisioning script's cache dir. Never one of ``find_cpythons()``'s.

``find_cpythons() -> list[CPython]``
    CPython >= 3.10, one per minor version (the newest patch), sorted by
    version. Candidates come from ``MEGABUILD_TEST_PYTHONS`` (``os.pathsep``
    separated executables) when that variable is set; otherwise from
    ``<pyenv root>/versions/*/bin/python3.X`` (pyenv root from ``PYENV_ROOT``
    or ``pyenv root``), plus ``sys.executable``. Every candidate is run once
    to verify it; results are cached for the process.

``make_conda_like_prefix(cpython, prefix, packages=("numpy",), cache_dir=None) -> Path``
    (Re)creates, at exactly ``prefix``, the layout conda gives a host env:
    ``bin/python``, ``bin/python3``, ``bin/python3.X`` (real copies of the
    binary so ``sys.prefix`` resolves to ``prefix``), ``lib/python3.X/`` with
    the stdlib entries symlinked and a real, empty ``site-packages``,
    ``include/python3.X`` and ``lib/libpython3.X.so*``. Then installs
    ``packages`` (binary wheels for that Python, no deps) into site-packages
    with the running interpreter's pip; with ``cache_dir``, pip's wheel cache
    and a copy of the installed tree are kept there, so repeated calls copy
    instead of running pip. Verifies ``prefix/bin/python`` reports
    ``sys.prefix == prefix`` and an include path under ``prefix``. Raises
    ``PrefixError`` on failure.

Known difference from a real conda env: the copied interpreter still loads
its ``libpython`` through the original build's RUNPATH, and ``sysconfig``
config vars such as ``LIBDIR``/``INCLUDEPY`` keep the original install's
paths (conda relocates them). Path-based ``sysconfig.get_path()`` values do
follow ``prefix``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from feedstock.errors import FeedstockError

MIN_VERSION = (3, 10)

_QUERY = (
    "import json, platform, sys; "
    "print(json.dumps({'impl': platform.python_implementation(), "
    "'version': list(sys.version_info[:3]), 'base_prefix': sys.base_prefix, "
    "'executable': sys.executable, "
    "'freethreaded': bool(__import__('sysconfig').get_config_var('Py_GIL_DISABLED'))}))"
)
FREETHREADED_ENV = "FEEDSTOCK_FREETHREADED_PYTHON"
# where .ci/provision-freethreaded-python.sh installs it (keep the two in sync)
FREETHREADED_VERSION = "3.13.5"


class PrefixError(FeedstockError):
    """A conda-like prefix could not be created or does not behave as one."""


@dataclass(frozen=True)
class CPython:
    version: tuple[int, int, int]
    executable: Path
    root: Path
    freethreaded: bool = False

    @property
    def short(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    @property
    def tag(self) -> str:
        """``3.13`` or ``3.13t``: the build, as megabuild's steps name it."""
        return self.short + ("t" if self.freethreaded else "")

    @property
    def dirname(self) -> str:
        """``python3.13t``: the interpreter's, stdlib's and include dir's name."""
        return f"python{self.tag}"

    def __str__(self) -> str:
        flag = "t" if self.freethreaded else ""
        return f"CPython {'.'.join(map(str, self.version))}{flag} ({self.executable})"


def _pyenv_root() -> Path | None:
    env = os.environ.get("PYENV_ROOT")
    if env:
        return Path(env)
    pyenv = shutil.which("pyenv")
    if not pyenv:
        return None
    try:
        out = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    root = out.stdout.strip()
    return Path(root) if root else None


def _candidates() -> list[Path]:
    env = os.environ.get("MEGABUILD_TEST_PYTHONS")
    if env is not None:
        return [Path(p) for p in env.split(os.pathsep) if p]
    found: list[Path] = []
    root = _pyenv_root()
    if root is not None and (root / "versions").is_dir():
        for bindir in sorted((root / "versions").glob("*/bin")):
            found.extend(p for p in sorted(bindir.glob("python3.*")) if re.fullmatch(r"python3\.\d+", p.name))
    found.append(Path(sys.executable))
    return found


def _probe(executable: Path) -> CPython | None:
    try:
        out = subprocess.run(
            [str(executable), "-I", "-c", _QUERY], capture_output=True, text=True, timeout=60, check=True
        )
        info = json.loads(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if info.get("impl") != "CPython":
        return None
    version = tuple(int(v) for v in info["version"])
    if version[:2] < MIN_VERSION:
        return None
    real = Path(info["executable"] or executable).resolve()
    return CPython(
        version=(version[0], version[1], version[2]),
        executable=real,
        root=Path(info["base_prefix"]),
        freethreaded=bool(info.get("freethreaded")),
    )


@functools.cache
def _find_cached(key: str) -> tuple[CPython, ...]:
    del key  # only part of the cache key
    best: dict[tuple[int, int], CPython] = {}
    seen: set[Path] = set()
    for candidate in _candidates():
        try:
            resolved = candidate.resolve()
        except OSError:
            continue
        if resolved in seen or not resolved.is_file():
            continue
        seen.add(resolved)
        cpython = _probe(candidate)
        if cpython is None or cpython.freethreaded:  # see find_freethreaded
            continue
        minor = cpython.version[:2]
        if minor not in best or cpython.version > best[minor].version:
            best[minor] = cpython
    return tuple(best[k] for k in sorted(best))


def find_cpythons() -> list[CPython]:
    """CPython >= 3.10 available here, one per minor version (newest patch), oldest first."""
    key = f"{os.environ.get('MEGABUILD_TEST_PYTHONS')!r}:{os.environ.get('PYENV_ROOT')!r}"
    return list(_find_cached(key))


def freethreaded_cache_dir() -> Path:
    """Where ``.ci/provision-freethreaded-python.sh`` installs the free-threaded CPython."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "pytorch-feedstock" / f"cpython-{FREETHREADED_VERSION}t"


def find_freethreaded() -> CPython | None:
    """The provisioned free-threaded CPython, or None when it is not on this machine."""
    given = os.environ.get(FREETHREADED_ENV)
    major_minor = ".".join(FREETHREADED_VERSION.split(".")[:2])
    candidate = Path(given) if given else freethreaded_cache_dir() / "bin" / f"python{major_minor}t"
    if not candidate.is_file():
        return None
    cpython = _probe(candidate)
    return cpython if cpython is not None and cpython.freethreaded else None


def _run(cmd: Sequence[str], what: str, timeout: float = 600) -> str:
    try:
        out = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise PrefixError(f"{what}: {exc}") from exc
    if out.returncode != 0:
        raise PrefixError(f"{what} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out.stdout


def _clear(prefix: Path) -> None:
    if prefix.is_symlink() or prefix.is_file():
        prefix.unlink()
    elif prefix.exists():
        shutil.rmtree(prefix)


def make_conda_like_prefix(
    cpython: CPython,
    prefix: Path,
    packages: Sequence[str] = ("numpy",),
    cache_dir: Path | None = None,
) -> Path:
    """(Re)create a conda-like env for ``cpython`` at exactly ``prefix``; see the module docstring."""
    prefix = Path(os.path.abspath(prefix))
    name = cpython.dirname  # python3.12, or python3.13t for a free-threaded build
    src_lib = cpython.root / "lib" / name
    src_include = cpython.root / "include" / name
    if not src_lib.is_dir() or not (src_include / "Python.h").is_file():
        raise PrefixError(f"{cpython}: no stdlib at {src_lib} or no Python.h in {src_include}")

    _clear(prefix)
    bindir = prefix / "bin"
    bindir.mkdir(parents=True)
    for exe in ("python", "python3", name):
        shutil.copy2(cpython.executable, bindir / exe)

    libdir = prefix / "lib"
    stdlib = libdir / name
    stdlib.mkdir(parents=True)
    for entry in src_lib.iterdir():
        if entry.name != "site-packages":
            (stdlib / entry.name).symlink_to(entry)
    site_packages = stdlib / "site-packages"
    site_packages.mkdir()
    for lib in sorted((cpython.root / "lib").glob(f"lib{name}.so*")):
        (libdir / lib.name).symlink_to(lib)
    (prefix / "include").mkdir()
    (prefix / "include" / name).symlink_to(src_include)

    if packages:
        _install_packages(cpython, site_packages, packages, cache_dir)

    check = (
        "import json, sys, sysconfig\n"
        "mods = {}\n"
        f"for name in {list(_import_names(packages))!r}:\n"
        "    __import__(name); mods[name] = sys.modules[name].__file__\n"
        "print(json.dumps({'prefix': sys.prefix, 'exec_prefix': sys.exec_prefix,\n"
        "    'include': sysconfig.get_path('include'), 'purelib': sysconfig.get_path('purelib'),\n"
        "    'mods': mods}))\n"
    )
    info = json.loads(_run([str(bindir / "python"), "-c", check], f"checking {prefix}"))
    for key in ("prefix", "exec_prefix"):
        if Path(info[key]) != prefix:
            raise PrefixError(f"{prefix}/bin/python reports sys.{key}={info[key]!r}, expected {prefix}")
    for key in ("include", "purelib"):
        if not Path(info[key]).is_relative_to(prefix):
            raise PrefixError(f"{prefix}/bin/python reports {key} path {info[key]!r} outside the prefix")
    for name, path in info["mods"].items():
        if not Path(path).is_relative_to(site_packages):
            raise PrefixError(f"{name} imported from {path}, not from {site_packages}")
    return prefix


def _install_packages(
    cpython: CPython, site_packages: Path, packages: Sequence[str], cache_dir: Path | None
) -> None:
    """pip-install binary wheels for ``cpython`` into ``site_packages``.

    With ``cache_dir``, pip's wheel cache lives there and the installed tree is
    kept too (keyed by Python version and package list), so later calls copy it
    instead of running pip again.
    """
    tree = None if cache_dir is None else cache_dir / "site-packages" / f"{cpython.tag}-{tree_key(*packages)}"
    if tree is not None and tree.is_dir():
        shutil.copytree(tree, site_packages, symlinks=True, dirs_exist_ok=True)
        return
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--root-user-action=ignore",
        "--no-compile",
        "--target",
        str(site_packages),
        "--python-version",
        cpython.short,
        "--implementation",
        "cp",
        *abi_args(cpython.short, cpython.freethreaded),
        "--only-binary=:all:",
        "--no-deps",
    ]
    if cache_dir is not None:
        cmd += ["--cache-dir", str(cache_dir / "pip")]
    _run([*cmd, *packages], f"pip install {' '.join(packages)} for Python {cpython.short}")
    if tree is not None:
        keep_tree(site_packages, tree)


def tree_key(*parts: str) -> str:
    """A short name for a cached installed tree: what it was made for."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def keep_tree(made: Path, tree: Path) -> None:
    """Keep a copy of ``made`` as ``tree``, atomically (a concurrent run that won keeps its own)."""
    tree.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{tree.name}.", dir=tree.parent))
    try:
        shutil.copytree(made, tmp, symlinks=True, dirs_exist_ok=True)
        os.replace(tmp, tree)
    except OSError:  # another process won the race: fine
        shutil.rmtree(tmp, ignore_errors=True)


def abi_args(short: str, freethreaded: bool) -> list[str]:
    """pip's ``--abi`` for a free-threaded target (``cp313t``); pip's default ABI is the GIL one."""
    return ["--abi", f"cp{short.replace('.', '')}t"] if freethreaded else []


def _import_names(packages: Sequence[str]) -> list[str]:
    """Importable module names for requirement strings such as ``numpy<2``."""
    names = []
    for spec in packages:
        name = re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0]
        names.append(name.replace("-", "_").lower())
    return names
