"""ELF headers: dependencies, run paths, the stack segment and the symbol versions a file needs.

Reads program headers and the dynamic section only (what the loader reads), 32- and 64-bit, either
byte order; section headers may be stripped.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from megabuild.binaries.buffer import BinaryFormatError, Buffer, c_string, mapped

MAGIC = b"\x7fELF"
ET_EXEC, ET_DYN = 2, 3
PT_LOAD, PT_DYNAMIC, PT_GNU_STACK = 1, 2, 0x6474E551
PF_X = 1
DT_NEEDED, DT_STRTAB, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 5, 14, 15, 29
DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF


@dataclass(frozen=True)
class Segment:
    kind: int
    flags: int
    offset: int
    vaddr: int
    filesz: int


@dataclass(frozen=True)
class ElfFile:
    elf_type: int
    needed: tuple[str, ...]
    soname: str
    rpath: tuple[str, ...]
    runpath: tuple[str, ...]
    stack_flags: int | None
    """``p_flags`` of PT_GNU_STACK; ``None`` when the segment is missing (an executable stack)."""
    version_needs: tuple[tuple[str, str], ...]
    """(library, version) pairs of ``.gnu.version_r``: ``("libc.so.6", "GLIBC_2.17")``."""

    @property
    def loadable(self) -> bool:
        """An executable or shared object (not a relocatable object or core file)."""
        return self.elf_type in (ET_EXEC, ET_DYN)

    @property
    def search_path(self) -> tuple[str, ...]:
        """Where the loader looks for ``needed``: DT_RUNPATH, else DT_RPATH."""
        return self.runpath or self.rpath


@dataclass(frozen=True)
class _Layout:
    order: str
    wide: bool

    def unpack(self, fmt: str, data: Buffer, offset: int) -> tuple[int, ...]:
        try:
            return struct.unpack_from(self.order + fmt, data, offset)
        except struct.error:
            raise BinaryFormatError(f"ELF structure at offset {offset} lies outside the file") from None


def is_elf(data: Buffer) -> bool:
    return data[:4] == MAGIC


def read_elf_file(path: Path) -> ElfFile:
    """:func:`read_elf` of the file at ``path`` (memory-mapped); a file that is not ELF is a
    :class:`BinaryFormatError` naming it."""
    with mapped(path) as data:
        if not is_elf(data):
            raise BinaryFormatError(f"{path}: not an ELF file")
        try:
            return read_elf(data)
        except BinaryFormatError as exc:
            raise BinaryFormatError(f"{path}: {exc}") from None


def read_elf(data: Buffer) -> ElfFile:
    """The dynamic facts of an ELF file (:class:`BinaryFormatError` when it is not readable)."""
    if len(data) < 52 or not is_elf(data) or data[4] not in (1, 2) or data[5] not in (1, 2):
        raise BinaryFormatError("not a readable ELF file")
    layout = _Layout("<" if data[5] == 1 else ">", data[4] == 2)
    elf_type = layout.unpack("H", data, 16)[0]
    segments = _segments(data, layout)
    stack = next((s.flags for s in segments if s.kind == PT_GNU_STACK), None)
    dynamic = next((s for s in segments if s.kind == PT_DYNAMIC), None)
    entries = _dynamic_entries(data, layout, dynamic) if dynamic is not None else []
    strtab = next((v for t, v in entries if t == DT_STRTAB), None)
    if strtab is None:
        return ElfFile(elf_type, (), "", (), (), stack, ())
    base = _file_offset(segments, strtab)

    def text(tag: int) -> list[str]:
        return [c_string(data, base + v) for t, v in entries if t == tag]

    return ElfFile(
        elf_type,
        tuple(text(DT_NEEDED)),
        next(iter(text(DT_SONAME)), ""),
        tuple(p for value in text(DT_RPATH) for p in value.split(":") if p),
        tuple(p for value in text(DT_RUNPATH) for p in value.split(":") if p),
        stack,
        _version_needs(data, layout, segments, entries, base),
    )


def _segments(data: Buffer, layout: _Layout) -> list[Segment]:
    if layout.wide:
        phoff = layout.unpack("Q", data, 0x20)[0]
        phentsize, phnum = layout.unpack("HH", data, 0x36)
    else:
        phoff = layout.unpack("I", data, 0x1C)[0]
        phentsize, phnum = layout.unpack("HH", data, 0x2A)
    out = []
    for i in range(phnum):
        at = phoff + i * phentsize
        if layout.wide:
            kind, flags, offset, vaddr, _paddr, filesz = layout.unpack("IIQQQQ", data, at)
        else:
            kind, offset, vaddr, _paddr, filesz, _memsz, flags = layout.unpack("IIIIIII", data, at)
        out.append(Segment(kind, flags, offset, vaddr, filesz))
    return out


def _dynamic_entries(data: Buffer, layout: _Layout, dynamic: Segment) -> list[tuple[int, int]]:
    size, fmt = (16, "qQ") if layout.wide else (8, "iI")
    entries = []
    for at in range(dynamic.offset, dynamic.offset + dynamic.filesz - size + 1, size):
        tag, value = layout.unpack(fmt, data, at)
        if tag == 0:
            break
        entries.append((tag, value))
    return entries


def _file_offset(segments: list[Segment], vaddr: int) -> int:
    """A virtual address as a file offset, through the PT_LOAD segment holding it."""
    for seg in segments:
        if seg.kind == PT_LOAD and seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
            return vaddr - seg.vaddr + seg.offset
    raise BinaryFormatError(f"ELF address {vaddr:#x} is in no loaded segment")


def _version_needs(
    data: Buffer, layout: _Layout, segments: list[Segment], entries: list[tuple[int, int]], strtab: int
) -> tuple[tuple[str, str], ...]:
    """Elf_Verneed records (16 bytes) each with Elf_Vernaux records (16 bytes), both word-sized."""
    verneed = next((v for t, v in entries if t == DT_VERNEED), None)
    count = next((v for t, v in entries if t == DT_VERNEEDNUM), 0)
    if verneed is None:
        return ()
    out = []
    at = _file_offset(segments, verneed)
    for _ in range(count):
        _version, aux_count, file_name, aux, next_need = layout.unpack("HHIII", data, at)
        library = c_string(data, strtab + file_name)
        aux_at = at + aux
        for _ in range(aux_count):
            _hash, _flags, _other, name, next_aux = layout.unpack("IHHII", data, aux_at)
            out.append((library, c_string(data, strtab + name)))
            aux_at += next_aux
        if not next_need:
            break
        at += next_need
    return tuple(out)
