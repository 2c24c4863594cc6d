"""Upstream's real binaries as a conda build of the recipe would hold them, for the package-test gates.

A conda-forge build compiles in ``<croot>/<name>_<timestamp>/work``, so every ``__FILE__`` and
every recorded build path in its binaries names that work dir. Upstream's wheels name their CI's
checkout instead (``/__w/pytorch/pytorch/`` on Linux, measured per wheel in
``tests/data/binary-check-upstream-wheels.json``'s ``build_roots``), which none of the gates'
patterns matches. :func:`conda_work_root` gives a conda-build work dir of the same length, and
:func:`rewrite_roots` puts it in place of upstream's, byte for byte (same length: no offset in the
file moves, so every ELF, Mach-O and PE structure stays valid and the fatbins still list).

The planted defects change a real binary the way a broken build would: a RUNPATH into the work
dir (:func:`plant_runpath`), a cubin of an architecture nobody asked for (:func:`plant_cubin`:
one fatbin entry replaced, in place, by a cubin nvcc compiled here and relabelled).
"""

from __future__ import annotations

import json
import struct
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

from megabuild.binaries import elf, macho, pe

from support.wheel_binaries import SplitWheel

DATA = Path(__file__).parents[1] / "data" / "binary-check-upstream-wheels.json"
# what conda-build's work dirs are called: the recipe's top level and a 13-digit ms timestamp
PACKAGE, TIMESTAMP = "libtorch-split", "1764000000000"
FATBIN_MAGIC = struct.pack("<I", 0xBA55ED50)


def build_roots(subdir: str) -> tuple[bytes, ...]:
    """Upstream's build roots in the ``subdir`` wheel's binaries, each with its trailing separator."""
    roots = json.loads(DATA.read_text(encoding="utf-8"))["build_roots"]["roots"]
    return tuple(root.encode() for root in roots[subdir])


def conda_work_root(root: bytes) -> bytes:
    """A conda-build work dir (``<croot>/<name>_<digits>/work/``, what ``prefix_strings`` looks for)
    exactly as long as ``root``, with its drive and separators."""
    sep = b"\\" if b"\\" in root else b"/"
    drive = root[:2] if root[1:2] == b":" else b""
    tail = sep + b"work" + sep
    room = len(root) - len(drive) - 1 - len(tail)  # for [croot<sep>]<name>_<digits>
    whole = f"{PACKAGE}_{TIMESTAMP}".encode()
    if room >= len(whole) + 2:
        middle = b"c" * (room - len(whole) - 1) + sep + whole
    elif room >= len(TIMESTAMP) + 2:
        middle = PACKAGE.encode()[: room - len(TIMESTAMP) - 1].ljust(room - len(TIMESTAMP) - 1, b"x")
        middle += b"_" + TIMESTAMP.encode()
    else:  # prefix_strings takes 10 digits or more
        middle = b"t" * (room - 11) + b"_" + TIMESTAMP.encode()[:10]
    out = drive + sep + middle + tail
    assert len(out) == len(root) and room >= 12, (root, out)
    return out


def rewrite_roots(data: bytes, roots: tuple[bytes, ...]) -> bytes:
    """``data`` with every build root of ``roots`` made a conda-build work dir, if it is a compiled
    file: a text file is a copy of a source file (a comment may quote a build log) or generated with
    upstream's paths, not what a conda build would write there."""
    if not (elf.is_elf(data) or macho.is_macho(data) or pe.is_pe(data)):
        return data
    for root in roots:
        data = data.replace(root, conda_work_root(root))
    return data


@dataclass(frozen=True)
class Materialized:
    prefix: Path
    rewritten: dict[str, int]  # file -> how many build roots were rewritten in it


def materialize(split: SplitWheel, files: tuple[str, ...], subdir: str) -> Materialized:
    """Writes the real bytes of ``files`` (paths relative to the prefix) from the wheel into the
    split's prefix, upstream's build roots rewritten; files the split wrote itself stay."""
    roots = build_roots(subdir)
    counts: dict[str, int] = {}
    with zipfile.ZipFile(split.wheel) as archive:
        for rel in files:
            member = split.members.get(rel)
            path = split.prefix / rel
            if member is None or path.is_symlink():
                continue
            data = archive.read(member)
            counts[rel] = sum(data.count(root) for root in roots)
            path.unlink()  # the split's placeholders can be hard links of one another
            path.write_bytes(rewrite_roots(data, roots) if counts[rel] else data)
    return Materialized(split.prefix, counts)


def write_record(prefix: Path, name: str, version: str, build: str, files: tuple[str, ...]) -> None:
    """The ``conda-meta`` record an install writes (what ``check-binaries --package`` reads)."""
    meta = prefix / "conda-meta"
    meta.mkdir(exist_ok=True)
    record = {"name": name, "version": version, "build": build, "files": list(files)}
    (meta / f"{name}-{version}-{build}.json").write_text(json.dumps(record), encoding="utf-8")


def plant_runpath(library: Path, entry: bytes) -> None:
    """Overwrites ``library``'s RUNPATH (or RPATH) string with ``entry`` (no longer than it, NUL-padded)."""
    data = bytearray(library.read_bytes())
    found = elf.read_elf(bytes(data))
    old = b":".join(p.encode() for p in found.search_path)
    assert old and len(entry) <= len(old) and data.count(old + b"\0") == 1, (old, entry)
    at = data.index(old + b"\0")
    data[at : at + len(old)] = entry.ljust(len(old), b"\0")
    library.write_bytes(bytes(data))


def _cubin_entry(nvcc: Path, work: Path, sm: int) -> bytes:
    """One uncompressed fatbin entry (header and cubin) of a kernel nvcc compiles for sm_75,
    relabelled as ``sm``: the entry header's arch and the cubin's ELF ``e_flags`` (bits 8-15), which
    cuobjdump lists it by."""
    source = work / "planted.cu"
    source.write_text("__global__ void planted(int *p) { *p = 1; }\n")
    obj = work / "planted.o"
    gencode = "-gencode=arch=compute_75,code=sm_75"
    subprocess.run([str(nvcc), "-c", gencode, str(source), "-o", str(obj)], check=True, capture_output=True)
    data = obj.read_bytes()
    entry = data.index(FATBIN_MAGIC) + 16  # the fatbin header is 16 bytes
    header_size, payload = struct.unpack_from("<IQ", data, entry + 4)
    out = bytearray(data[entry : entry + header_size + payload])
    struct.pack_into("<I", out, 28, sm)
    flags = struct.unpack_from("<I", out, header_size + 48)[0]
    struct.pack_into("<I", out, header_size + 48, (flags & ~0xFF00) | (sm << 8))
    return bytes(out)


def plant_cubin(library: Path, nvcc: Path, sm: int) -> None:
    """Replaces the first fatbin entry of ``library`` by an sm_``sm`` cubin, in place: the planted
    entry's payload size is padded to the replaced entry's, so every later entry stays where it is."""
    planted = bytearray(_cubin_entry(nvcc, library.parent, sm))
    data = bytearray(library.read_bytes())
    fatbin = data.index(FATBIN_MAGIC)
    entry = fatbin + struct.unpack_from("<H", data, fatbin + 6)[0]
    header_size, payload = struct.unpack_from("<IQ", data, entry + 4)
    span = header_size + payload
    planted_header = struct.unpack_from("<I", planted, 4)[0]
    assert len(planted) <= span, (len(planted), span)
    struct.pack_into("<Q", planted, 8, span - planted_header)
    data[entry : entry + span] = bytes(planted).ljust(span, b"\0")
    library.write_bytes(bytes(data))
