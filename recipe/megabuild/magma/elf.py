"""DT_NEEDED of an ELF shared library, read from the file (no binutils in the build env needed)."""

from __future__ import annotations

import struct
from pathlib import Path

from megabuild.errors import MegabuildError

_PT_DYNAMIC = 2
_PT_LOAD = 1
_DT_NEEDED = 1
_DT_STRTAB = 5


def needed(path: Path) -> list[str]:
    """The DT_NEEDED entries of a 64-bit ELF file, in order."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise MegabuildError(f"{path}: not a 64-bit ELF file")
    order = "<" if data[5] == 1 else ">"
    phoff, phentsize, phnum = (
        struct.unpack_from(order + "Q", data, 0x20)[0],
        *struct.unpack_from(order + "HH", data, 0x36),
    )
    headers = [struct.unpack_from(order + "IIQQQQQQ", data, phoff + i * phentsize) for i in range(phnum)]
    dynamic = [h for h in headers if h[0] == _PT_DYNAMIC]
    if not dynamic:
        return []  # statically linked
    entries = []
    offset, size = dynamic[0][2], dynamic[0][5]
    for pos in range(offset, offset + size, 16):
        tag, value = struct.unpack_from(order + "qQ", data, pos)
        if tag == 0:
            break
        entries.append((tag, value))
    strtab = next(v for t, v in entries if t == _DT_STRTAB)
    # DT_STRTAB is a virtual address: map it to a file offset through its PT_LOAD segment
    load = next(h for h in headers if h[0] == _PT_LOAD and h[3] <= strtab < h[3] + h[5])
    base = strtab - load[3] + load[2]
    return [data[base + v : data.index(b"\0", base + v)].decode() for t, v in entries if t == _DT_NEEDED]
