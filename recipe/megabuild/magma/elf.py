"""DT_NEEDED of an ELF shared library, read from the file (no binutils in the build env needed)."""

from __future__ import annotations

from pathlib import Path

from megabuild.binaries.buffer import mapped
from megabuild.binaries.elf import is_elf, read_elf
from megabuild.errors import MegabuildError


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit ELF file, in order (the reader of :mod:`megabuild.binaries`)."""
    with mapped(path) as data:
        if not is_elf(data) or len(data) < 5 or data[4] != 2:
            raise MegabuildError(f"{path}: not a 64-bit ELF file")
        return list(read_elf(data).needed)
