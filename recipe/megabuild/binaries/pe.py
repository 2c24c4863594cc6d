"""PE/COFF headers: the DLLs a DLL, .pyd or .exe imports, directly or delay-loaded."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from megabuild.binaries.buffer import BinaryFormatError, Buffer, c_string

PE32, PE32_PLUS = 0x10B, 0x20B
IMPORT_DIRECTORY, DELAY_IMPORT_DIRECTORY = 1, 13


@dataclass(frozen=True)
class Section:
    vaddr: int
    vsize: int
    raw_offset: int
    raw_size: int


@dataclass(frozen=True)
class PeFile:
    machine: int
    imports: tuple[str, ...]
    delay_imports: tuple[str, ...]


def is_pe(data: Buffer) -> bool:
    if len(data) < 0x40 or data[:2] != b"MZ":
        return False
    lfanew = struct.unpack_from("<I", data, 0x3C)[0]
    return data[lfanew : lfanew + 4] == b"PE\0\0"


def _unpack(fmt: str, data: Buffer, offset: int) -> tuple[int, ...]:
    try:
        return struct.unpack_from("<" + fmt, data, offset)
    except struct.error:
        raise BinaryFormatError(f"PE structure at offset {offset} lies outside the file") from None


def read_pe(data: Buffer) -> PeFile:
    if not is_pe(data):
        raise BinaryFormatError("not a PE file")
    coff = _unpack("I", data, 0x3C)[0] + 4
    machine, nsections, _ts, _symtab, _nsyms, opt_size, _chars = _unpack("HHIIIHH", data, coff)
    opt = coff + 20
    magic = _unpack("H", data, opt)[0]
    if magic not in (PE32, PE32_PLUS):
        raise BinaryFormatError(f"unknown PE optional header magic {magic:#x}")
    dirs_at = opt + (112 if magic == PE32_PLUS else 96)
    ndirs = _unpack("I", data, dirs_at - 4)[0]
    sections = [_section(data, opt + opt_size + i * 40) for i in range(nsections)]

    def directory(index: int) -> int:
        return _unpack("I", data, dirs_at + index * 8)[0] if index < ndirs else 0

    imports = _names(data, sections, directory(IMPORT_DIRECTORY), 20, 12)
    delayed = _names(data, sections, directory(DELAY_IMPORT_DIRECTORY), 32, 4)
    return PeFile(machine, imports, delayed)


def _section(data: Buffer, at: int) -> Section:
    """A section header: Name[8], VirtualSize, VirtualAddress, SizeOfRawData, PointerToRawData."""
    vsize, vaddr, raw_size, raw_offset = _unpack("IIII", data, at + 8)
    return Section(vaddr, vsize, raw_offset, raw_size)


def _offset(sections: list[Section], rva: int) -> int:
    for s in sections:
        if s.vaddr <= rva < s.vaddr + max(s.vsize, s.raw_size):
            return rva - s.vaddr + s.raw_offset
    raise BinaryFormatError(f"PE address {rva:#x} is in no section")


def _names(data: Buffer, sections: list[Section], rva: int, size: int, name_at: int) -> tuple[str, ...]:
    """The DLL names of an import (20-byte) or delay-import (32-byte) descriptor table."""
    if not rva:
        return ()
    at, out = _offset(sections, rva), list[str]()
    while True:
        record = bytes(data[at : at + size])
        if len(record) < size:
            raise BinaryFormatError("PE import table runs past the end of the file")
        if record == b"\0" * size:
            return tuple(out)
        name_rva = struct.unpack_from("<I", record, name_at)[0]
        out.append(c_string(data, _offset(sections, name_rva)))
        at += size
