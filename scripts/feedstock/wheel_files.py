"""A torch wheel's file listing (path, size, executable) and the helpers that keep listings
(the logic of ``python -m feedstock list-wheel-files``; the version-bump check uses it too)."""

from __future__ import annotations

import csv
import hashlib
import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

from .errors import FeedstockError

HEADER = ("path", "size", "executable")
"""A listing's first line, tab-separated (tests/data/*-files.tsv)."""


class Row(NamedTuple):
    """One line of a listing: a file of the wheel outside its ``.dist-info`` (a tuple, so
    ``path, size, executable = row`` reads it too)."""

    path: str
    size: int
    executable: bool


def list_wheel(wheel: Path) -> list[Row]:
    """Every file outside ``.dist-info`` / ``.data``, sorted."""
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
            rows.append(Row(info.filename, info.file_size, executable))
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


def read_listing(path: Path) -> list[Row]:
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t")
            if tuple(next(reader, ())) != HEADER:
                raise FeedstockError(f"{path}: not a listing (header is not {' '.join(HEADER)})")
            return [Row(p, int(size), flag == "1") for p, size, flag in reader]
    except (OSError, ValueError) as exc:
        raise FeedstockError(f"cannot read listing {path}: {exc}") from None


def listing_text(rows: list[Row]) -> str:
    lines = ["\t".join(HEADER)] + [f"{r.path}\t{r.size}\t{int(r.executable)}" for r in rows]
    return "\n".join(lines) + "\n"
