"""Move files without copying their data.

``os.rename`` first; a hard link plus unlink when the rename is refused (some
overlay/union file systems reject cross-directory renames); a byte copy only
across file systems and only for small files (:data:`COPY_LIMIT`). Symlinks
stay symlinks, modes stay as they are. Every move is journalled so a failure
half-way can be rolled back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError

COPY_LIMIT = 1024 * 1024  # bytes; bigger files are never copied


@dataclass(frozen=True)
class Entry:
    """A file or symlink found under a root (directories are implied)."""

    relpath: str  # POSIX, relative to the root
    size: int  # bytes of a regular file; 0 for a symlink
    is_link: bool
    mode: int
    dev: int
    ino: int


def walk_entries(root: Path) -> list[Entry]:
    """All regular files and symlinks under *root* (symlinks are not followed)."""
    entries: list[Entry] = []
    odd: list[str] = []
    root_s = os.fspath(root)
    cut = len(os.path.join(root_s, ""))

    def on_error(exc: OSError) -> None:
        raise MegabuildError(f"cannot read {exc.filename}: {exc.strerror}")

    for dirpath, dirnames, filenames in os.walk(root_s, onerror=on_error):
        # os.walk lists symlinks to directories among dirnames: treat them as entries.
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        if links:
            dirnames[:] = [d for d in dirnames if d not in links]
        for name in filenames + links:
            full = os.path.join(dirpath, name)
            st = os.lstat(full)
            rel = full[cut:].replace(os.sep, "/")
            if stat.S_ISLNK(st.st_mode):
                entries.append(Entry(rel, 0, True, st.st_mode, st.st_dev, st.st_ino))
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, st.st_size, False, st.st_mode, st.st_dev, st.st_ino))
            else:
                odd.append(rel)
    if odd:
        from megabuild.split.spec import format_paths

        raise MegabuildError(f"not a regular file or symlink under {root}: {format_paths(sorted(odd))}")
    entries.sort(key=lambda e: e.relpath)
    return entries


def nearest_existing(path: Path) -> Path:
    while not os.path.lexists(path) and path != path.parent:
        path = path.parent
    return path


def device_of(path: Path) -> int:
    return nearest_existing(path).stat().st_dev


def same_filesystem(a: Path, b: Path) -> bool:
    return device_of(a) == device_of(b)


@dataclass
class MoveStats:
    renamed: int = 0
    linked: int = 0
    copied: int = 0
    bytes_copied: int = 0


SET_ASIDE_SUFFIX = ".megabuild-old"


@dataclass
class Mover:
    """Moves entries, creates symlinks and sets files aside, remembering each
    step so :meth:`rollback` can undo the lot; :meth:`commit` makes it final."""

    stats: MoveStats = field(default_factory=MoveStats)
    # (src, dst) of a move, or (link, "") for a symlink created
    journal: list[tuple[str | Path, str | Path]] = field(default_factory=list)
    created_dirs: list[tuple[Path, int]] = field(default_factory=list)
    set_aside_paths: list[str] = field(default_factory=list)
    _known_dirs: set[str] = field(default_factory=set, repr=False)

    def ensure_dir(self, dest_root: Path, rel_dir: str, src_root: Path | None = None) -> None:
        """Create ``dest_root/rel_dir`` and missing parents; each directory
        created below *dest_root* later gets the mode of the same directory
        under *src_root* (applied by :meth:`finish`, after the moves)."""
        # Called once per moved file (~10k): the common "already made" case stays on strings.
        key = os.path.join(os.fspath(dest_root), rel_dir)
        if key in self._known_dirs:
            return
        dest_root.mkdir(parents=True, exist_ok=True)
        current = dest_root
        source = src_root
        for part in (p for p in rel_dir.split("/") if p):
            current = current / part
            source = source / part if source is not None else None
            if os.path.lexists(current):
                continue
            current.mkdir()
            if source is not None and source.is_dir() and not source.is_symlink():
                self.created_dirs.append((current, stat.S_IMODE(source.lstat().st_mode)))
            else:
                self.created_dirs.append((current, -1))
        self._known_dirs.add(key)

    def move(self, src: str | Path, dst: str | Path, size: int, allow_big_copy: bool = False) -> None:
        _move_one(src, dst, size, self.stats, allow_big_copy)
        self.journal.append((src, dst))

    def set_aside(self, path: str | Path) -> None:
        """Rename *path* next to itself; :meth:`commit` deletes it, :meth:`rollback` puts it back."""
        backup = os.fspath(path) + SET_ASIDE_SUFFIX
        _move_one(path, backup, 0, MoveStats(), allow_big_copy=True)
        self.journal.append((path, backup))
        self.set_aside_paths.append(backup)

    def symlink(self, target: str, path: str | Path) -> None:
        os.symlink(target, path)
        self.journal.append((path, ""))

    def finish(self) -> None:
        """Give created directories the modes of their source directories."""
        for path, mode in sorted(self.created_dirs, key=lambda item: -len(item[0].parts)):
            if mode >= 0:
                os.chmod(path, mode)
        self.created_dirs.clear()

    def commit(self) -> None:
        """Delete what was set aside and finish the directories; nothing can be rolled back after."""
        for backup in self.set_aside_paths:
            os.unlink(backup)
        self.set_aside_paths.clear()
        self.journal.clear()
        self.finish()

    def rollback(self) -> list[str]:
        """Undo every step, newest first; return the paths that could not be restored."""
        failed: list[str] = []
        scratch = MoveStats()
        for src, dst in reversed(self.journal):
            try:
                if dst == "":
                    os.unlink(src)
                    continue
                os.makedirs(os.path.dirname(src), exist_ok=True)
                size = os.lstat(dst).st_size
                _move_one(dst, src, size, scratch, allow_big_copy=True)
            except (OSError, MegabuildError):
                failed.append(os.fspath(dst or src))
        self.journal.clear()
        self.set_aside_paths.clear()
        for path, _mode in sorted(self.created_dirs, key=lambda item: -len(item[0].parts)):
            with contextlib.suppress(OSError):
                path.rmdir()
        self.created_dirs.clear()
        self._known_dirs.clear()
        return failed


def _move_one(src: str | Path, dst: str | Path, size: int, stats: MoveStats, allow_big_copy: bool) -> None:
    if os.path.lexists(dst):
        raise MegabuildError(f"refusing to overwrite {dst}")
    try:
        os.rename(src, dst)
        stats.renamed += 1
        return
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EISDIR):
            raise MegabuildError(f"cannot move {src} to {dst}: {exc.strerror}") from None
        rename_error = exc
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError as exc:
        if exc.errno != errno.EXDEV and rename_error.errno != errno.EXDEV:
            raise MegabuildError(f"cannot move {src} to {dst}: {rename_error.strerror}") from None
    else:
        try:
            os.unlink(src)
        except OSError as exc:
            os.unlink(dst)
            raise MegabuildError(f"cannot remove {src} after linking it: {exc.strerror}") from None
        stats.linked += 1
        return
    # Different file systems: only small files may be copied.
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        os.unlink(src)
        stats.copied += 1
        return
    if size > COPY_LIMIT and not allow_big_copy:
        raise MegabuildError(f"{src} ({size} bytes) would have to be copied across file systems")
    shutil.copy2(src, dst, follow_symlinks=False)
    os.unlink(src)
    stats.copied += 1
    stats.bytes_copied += size


def prune_empty_dirs(root: Path, relpaths: list[str]) -> None:
    """Remove directories under *root* that moving *relpaths* left empty."""
    dirs: set[str] = set()
    for rel in relpaths:
        rel_dir = rel.rpartition("/")[0]
        while rel_dir and rel_dir not in dirs:
            dirs.add(rel_dir)
            rel_dir = rel_dir.rpartition("/")[0]
    root_s = os.fspath(root)
    for rel_dir in sorted(dirs, key=lambda d: -d.count("/")):
        with contextlib.suppress(OSError):
            os.rmdir(os.path.join(root_s, rel_dir))


def human(nbytes: int) -> str:
    value = float(nbytes)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{nbytes} B"
