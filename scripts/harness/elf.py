"""Read DT_NEEDED, DT_SONAME and DT_RUNPATH from a 64-bit little-endian ELF file (no tools needed)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from feedstock.errors import FeedstockError

DT_NEEDED = 1
DT_STRTAB = 5
DT_SONAME = 14
DT_RPATH = 15
DT_RUNPATH = 29
PT_LOAD = 1
PT_DYNAMIC = 2


class ElfError(FeedstockError, ValueError):
    """Not an ELF file this reader understands."""


@dataclass
class DynamicInfo:
    needed: list[str] = field(default_factory=list)
    soname: str | None = None
    runpath: list[str] = field(default_factory=list)


def dynamic_info(path: Path) -> DynamicInfo:
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF":
        raise ElfError(f"{path}: not an ELF file")
    if data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: only ELF64 little-endian is supported")
    e_phoff = struct.unpack_from("<Q", data, 0x20)[0]
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 0x36)
    loads: list[tuple[int, int, int]] = []  # (vaddr, offset, filesz)
    dynamic: tuple[int, int] | None = None
    for i in range(e_phnum):
        p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, e_phoff + i * e_phentsize
        )
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
    info = DynamicInfo()
    if dynamic is None:
        return info
    entries: list[tuple[int, int]] = []
    offset, size = dynamic
    for pos in range(offset, offset + size, 16):
        tag, value = struct.unpack_from("<qQ", data, pos)
        if tag == 0:
            break
        entries.append((tag, value))
    strtab_vaddr = next((v for t, v in entries if t == DT_STRTAB), None)
    if strtab_vaddr is None:
        raise ElfError(f"{path}: dynamic section without DT_STRTAB")
    strtab = _vaddr_to_offset(strtab_vaddr, loads, path)

    def string(index: int) -> str:
        start = strtab + index
        return data[start : data.index(b"\0", start)].decode()

    for tag, value in entries:
        if tag == DT_NEEDED:
            info.needed.append(string(value))
        elif tag == DT_SONAME:
            info.soname = string(value)
        elif tag in (DT_RUNPATH, DT_RPATH):
            info.runpath += [p for p in string(value).split(":") if p]
    return info


def _vaddr_to_offset(vaddr: int, loads: list[tuple[int, int, int]], path: Path) -> int:
    for seg_vaddr, seg_offset, filesz in loads:
        if seg_vaddr <= vaddr < seg_vaddr + filesz:
            return vaddr - seg_vaddr + seg_offset
    raise ElfError(f"{path}: address {vaddr:#x} is in no PT_LOAD segment")
