"""Mach-O load commands: the dylibs a file loads, its LC_RPATHs and install name; fat files too."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from megabuild.binaries.buffer import BinaryFormatError, Buffer, c_string

MH_MAGIC, MH_MAGIC_64 = 0xFEEDFACE, 0xFEEDFACF
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
MH_EXECUTE, MH_DYLIB, MH_BUNDLE = 2, 6, 8
MH_ALLOW_STACK_EXECUTION = 0x20000
LC_REQ_DYLD = 0x80000000
LC_LOAD_DYLIB, LC_ID_DYLIB, LC_LAZY_LOAD_DYLIB = 0xC, 0xD, 0x20
LC_LOAD_WEAK_DYLIB = 0x18 | LC_REQ_DYLD
LC_RPATH = 0x1C | LC_REQ_DYLD
LC_REEXPORT_DYLIB = 0x1F | LC_REQ_DYLD
LC_LOAD_UPWARD_DYLIB = 0x23 | LC_REQ_DYLD
_LOADS = {LC_LOAD_DYLIB, LC_LAZY_LOAD_DYLIB, LC_LOAD_WEAK_DYLIB, LC_REEXPORT_DYLIB, LC_LOAD_UPWARD_DYLIB}
# A Java class file starts with 0xCAFEBABE too; its next word is a version >= 45, a fat file's is
# its number of architectures.
_MAX_FAT_ARCHES = 30


@dataclass(frozen=True)
class Dylib:
    name: str
    weak: bool


@dataclass(frozen=True)
class MachOSlice:
    """One architecture of a Mach-O file."""

    cputype: int
    filetype: int
    flags: int
    install_name: str
    dylibs: tuple[Dylib, ...]
    rpaths: tuple[str, ...]

    @property
    def loadable(self) -> bool:
        return self.filetype in (MH_EXECUTE, MH_DYLIB, MH_BUNDLE)


def is_macho(data: Buffer) -> bool:
    if len(data) < 8:
        return False
    le, be = struct.unpack_from("<I", data)[0], struct.unpack_from(">I", data)[0]
    if le in (MH_MAGIC, MH_MAGIC_64) or be in (MH_MAGIC, MH_MAGIC_64):
        return True
    return be in (FAT_MAGIC, FAT_MAGIC_64) and 0 < struct.unpack_from(">I", data, 4)[0] < _MAX_FAT_ARCHES


def read_macho(data: Buffer) -> tuple[MachOSlice, ...]:
    """Every architecture's slice (one for a thin file)."""
    if not is_macho(data):
        raise BinaryFormatError("not a Mach-O file")
    magic = struct.unpack_from(">I", data)[0]
    if magic not in (FAT_MAGIC, FAT_MAGIC_64):
        return (_read_slice(data, 0),)
    wide = magic == FAT_MAGIC_64
    count = struct.unpack_from(">I", data, 4)[0]
    slices = []
    for i in range(count):
        # fat_arch_64: cputype, cpusubtype, offset (8), size (8), align, reserved; fat_arch: all 4 bytes
        offset = _unpack(">IIQ", data, 8 + i * 32)[2] if wide else _unpack(">III", data, 8 + i * 20)[2]
        slices.append(_read_slice(data, offset))
    return tuple(slices)


def _unpack(fmt: str, data: Buffer, offset: int) -> tuple[int, ...]:
    try:
        return struct.unpack_from(fmt, data, offset)
    except struct.error:
        raise BinaryFormatError(f"Mach-O structure at offset {offset} lies outside the file") from None


def _read_slice(data: Buffer, base: int) -> MachOSlice:
    le = _unpack("<I", data, base)[0]
    order = "<" if le in (MH_MAGIC, MH_MAGIC_64) else ">"
    magic = _unpack(order + "I", data, base)[0]
    if magic not in (MH_MAGIC, MH_MAGIC_64):
        raise BinaryFormatError(f"no Mach-O header at offset {base}")
    _magic, cputype, _sub, filetype, ncmds, _size, flags = _unpack(order + "7I", data, base)
    at = base + (32 if magic == MH_MAGIC_64 else 28)
    dylibs, rpaths, install_name = [], [], ""
    for _ in range(ncmds):
        cmd, cmdsize = _unpack(order + "II", data, at)
        if cmdsize < 8:
            raise BinaryFormatError(f"Mach-O load command at offset {at} has size {cmdsize}")
        if cmd in _LOADS or cmd in (LC_ID_DYLIB, LC_RPATH):
            name = c_string(data, at + _unpack(order + "I", data, at + 8)[0], cmdsize)
            if cmd == LC_RPATH:
                rpaths.append(name)
            elif cmd == LC_ID_DYLIB:
                install_name = name
            else:
                dylibs.append(Dylib(name, cmd == LC_LOAD_WEAK_DYLIB))
        at += cmdsize
    return MachOSlice(cputype, filetype, flags, install_name, tuple(dylibs), tuple(rpaths))
