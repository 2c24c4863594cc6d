"""A torch wheel's file listing (path, size, executable) and the helpers that keep listings
(the logic of ``scripts/list_wheel_files.py``; the version-bump check uses it too)."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zipfile
from pathlib import Path


def list_wheel(wheel: Path) -> list[tuple[str, int, bool]]:
    """(path, size, executable) of every file outside ``.dist-info`` / ``.data``, sorted."""
    rows = []
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            if info.is_dir():
                continue
            top = info.filename.split("/", 1)[0]
            if top.endswith((".dist-info", ".data")) or "/" not in info.filename:
                continue
            mode = info.external_attr >> 16
            executable = bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH))
            rows.append((info.filename, info.file_size, executable))
    rows.sort()
    return rows


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` in one step, so a failed write never leaves half a listing behind."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
