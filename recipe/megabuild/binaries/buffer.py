"""The bytes a reader works on: a file's memory map or bytes read from an archive."""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Union

from megabuild.errors import MegabuildError

Buffer = Union[bytes, mmap.mmap]


class BinaryFormatError(MegabuildError):
    """A file that starts like a binary format but whose headers cannot be read."""


def c_string(data: Buffer, offset: int, limit: int = 4096) -> str:
    """The NUL-terminated string at ``offset`` (at most ``limit`` bytes)."""
    if not 0 <= offset < len(data):
        raise BinaryFormatError(f"string offset {offset} lies outside the file")
    end = data.find(b"\0", offset, offset + limit)
    raw = data[offset : end if end >= 0 else offset + limit]
    return bytes(raw).decode("utf-8", "replace")


@contextmanager
def mapped(path: Path) -> Iterator[Buffer]:
    """The file's bytes, memory-mapped (a 500 MB library is never read into memory at once)."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            yield b""
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
            yield view
