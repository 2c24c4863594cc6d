"""Reading caches and writing them atomically; the pristine ``.orig`` copy.

Every write goes to a temporary file in the target's directory, is flushed
and fsync'ed, gets the old file's permission bits, and then replaces the
target with one ``os.replace`` (followed by an fsync of the directory). A
crash at any point leaves either the old or the new complete file, never a
mixture; a failed write removes its temporary file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from megabuild.cache.model import CacheFile
from megabuild.errors import MegabuildError

ORIG_SUFFIX = ".orig"


def read_cache(path: Path) -> CacheFile:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise MegabuildError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise MegabuildError(f"{path}: is a directory") from None
    except OSError as exc:
        raise MegabuildError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return CacheFile.parse_bytes(data, str(path))


def _fsync_dir(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not supported everywhere (e.g. Windows)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, mode_from: Path | None = None) -> None:
    """Replace ``path`` with ``data`` in one rename; keep the mode of ``mode_from`` (default: ``path``)."""
    directory = path.parent if str(path.parent) else Path(".")
    reference = mode_from if mode_from is not None else path
    try:
        mode: int | None = stat.S_IMODE(os.stat(reference).st_mode)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise MegabuildError(f"{reference}: cannot stat: {exc.strerror or exc}") from None
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise MegabuildError(
            f"{path}: cannot create a temporary file in {directory}: {exc.strerror or exc}"
        ) from None
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError):
            raise MegabuildError(f"{path}: cannot write: {exc.strerror or exc}") from None
        raise
    _fsync_dir(directory)


def write_cache(path: Path, cache: CacheFile, mode_from: Path | None = None) -> None:
    atomic_write(path, cache.to_bytes(), mode_from=mode_from)


def orig_path(path: Path) -> Path:
    return path.with_name(path.name + ORIG_SUFFIX)


def save(path: Path, force: bool = False) -> tuple[bool, str]:
    """Copy ``path`` to ``path.orig`` unless it exists (first save wins). Returns (saved, message)."""
    target = orig_path(path)
    cache = read_cache(path)  # never save something that is not a cache
    if target.exists() and not force:
        return False, f"{target} already exists; kept the first saved copy (use --force to overwrite)"
    atomic_write(target, cache.to_bytes(), mode_from=path)
    return True, f"saved {path} as {target}"
