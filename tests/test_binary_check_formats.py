"""check-binaries on Mach-O (thin and fat) and PE files built byte by byte: the readers see what
the headers say, and the linkage check passes a good layout and fails its planted mistakes (a
missing @rpath dylib, an LC_RPATH into the build machine, a DLL in no searched directory).
The real files of the upstream wheels are read in tests/test_binary_check_wheels.py."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from megabuild.binaries import macho, pe
from megabuild.binaries.checks import Options, check_files
from megabuild.binaries.findings import Finding
from megabuild.binaries.linkage import Tree

ARM64, X86_64 = 0x0100000C, 0x01000007


def _padded(raw: bytes, align: int) -> bytes:
    return raw + b"\0" * (-len(raw) % align)


def macho_file(commands: list[tuple[int, str]], cputype: int = ARM64, flags: int = 0) -> bytes:
    """A 64-bit MH_DYLIB with the given (load command, path) pairs."""
    body = b""
    for cmd, name in commands:
        head = (
            struct.pack("<III", cmd, 0, 12)
            if cmd == macho.LC_RPATH
            else struct.pack("<IIIIII", cmd, 0, 24, 2, 0x10000, 0x10000)
        )
        blob = bytearray(_padded(head + name.encode() + b"\0", 8))
        blob[4:8] = struct.pack("<I", len(blob))  # cmdsize
        body += bytes(blob)
    header = struct.pack(
        "<IIIIIIII", macho.MH_MAGIC_64, cputype, 0, macho.MH_DYLIB, len(commands), len(body), flags, 0
    )
    return header + body


def fat_file(*slices: bytes) -> bytes:
    offset, arches, data = 4096, b"", b""
    for cputype, blob in slices_with_types(slices):
        arches += struct.pack(">IIIII", cputype, 0, offset + len(data), len(blob), 12)
        data += _padded(blob, 4096)
    header = struct.pack(">II", macho.FAT_MAGIC, len(slices)) + arches
    return _padded(header, 4096) + data


def slices_with_types(slices: tuple[bytes, ...]) -> list[tuple[int, bytes]]:
    return [(struct.unpack_from("<I", blob, 4)[0], blob) for blob in slices]


def pe_file(imports: list[str], delayed: tuple[str, ...] = ()) -> bytes:
    """A PE32+ DLL with one section holding the import and delay-import tables."""
    rva, raw_at = 0x1000, 0x200
    names, descriptors = b"", b""
    table = (len(imports) + 1) * 20
    delay_at = table
    delay_table = (len(delayed) + 1) * 32
    names_at = delay_at + delay_table
    for dll in imports:
        descriptors += struct.pack("<IIIII", 0, 0, 0, rva + names_at + len(names), 0)
        names += dll.encode() + b"\0"
    descriptors += b"\0" * 20
    delay = b""
    for dll in delayed:
        delay += struct.pack("<8I", 1, rva + names_at + len(names), 0, 0, 0, 0, 0, 0)
        names += dll.encode() + b"\0"
    delay += b"\0" * 32
    section = descriptors + delay + names
    dirs = [(0, 0)] * 16
    dirs[pe.IMPORT_DIRECTORY] = (rva, table)
    if delayed:
        dirs[pe.DELAY_IMPORT_DIRECTORY] = (rva + delay_at, delay_table)
    optional = struct.pack("<H", pe.PE32_PLUS).ljust(108, b"\0") + struct.pack("<I", 16)
    optional += b"".join(struct.pack("<II", a, s) for a, s in dirs)
    coff = struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, len(optional), 0x2022)
    header = struct.pack("<II", len(section), rva) + struct.pack("<II", len(_padded(section, 0x200)), raw_at)
    section_header = b".idata\0\0" + header.ljust(32, b"\0")
    dos = bytearray(64)
    dos[0:2] = b"MZ"
    dos[0x3C:0x40] = struct.pack("<I", 64)
    head = bytes(dos) + b"PE\0\0" + coff + optional + section_header
    return _padded(head, raw_at) + _padded(section, 0x200)


def run(prefix: Path, target: str, dll_dirs: tuple[str, ...] = ()) -> list[Finding]:
    files = sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file())
    return check_files(Tree(prefix, dll_dirs), files, Options(target))


# -- Mach-O --------------------------------------------------------------------------------------

TORCH_CPU = [
    (macho.LC_ID_DYLIB, "@rpath/libtorch_cpu.dylib"),
    (macho.LC_LOAD_DYLIB, "@rpath/libc10.dylib"),
    (macho.LC_LOAD_DYLIB, "@rpath/libomp.dylib"),
    (macho.LC_LOAD_DYLIB, "/usr/lib/libc++.1.dylib"),
    (macho.LC_LOAD_DYLIB, "/System/Library/Frameworks/Accelerate.framework/Versions/A/Accelerate"),
    (macho.LC_LOAD_WEAK_DYLIB, "@rpath/libnot_there.dylib"),
    (macho.LC_RPATH, "@loader_path"),
]


@pytest.fixture
def osx_prefix(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libtorch_cpu.dylib").write_bytes(macho_file(TORCH_CPU))
    for name in ("libc10", "libomp"):
        (lib / f"{name}.dylib").write_bytes(macho_file([(macho.LC_ID_DYLIB, f"@rpath/{name}.dylib")]))
    return tmp_path


def test_the_macho_reader() -> None:
    (image,) = macho.read_macho(macho_file(TORCH_CPU, flags=macho.MH_ALLOW_STACK_EXECUTION))
    assert image.install_name == "@rpath/libtorch_cpu.dylib" and image.rpaths == ("@loader_path",)
    assert [d.name for d in image.dylibs][:2] == ["@rpath/libc10.dylib", "@rpath/libomp.dylib"]
    assert [d.weak for d in image.dylibs] == [False] * 4 + [True]
    assert image.loadable and image.flags & macho.MH_ALLOW_STACK_EXECUTION
    fat = fat_file(macho_file(TORCH_CPU), macho_file(TORCH_CPU, cputype=X86_64))
    assert [s.cputype for s in macho.read_macho(fat)] == [ARM64, X86_64]
    assert not macho.is_macho(b"\xca\xfe\xba\xbe\x00\x00\x00\x34")  # a Java class file (version 52)


def test_a_good_macos_layout(osx_prefix: Path) -> None:
    assert run(osx_prefix, "osx-arm64") == []


def test_a_missing_rpath_dylib(osx_prefix: Path) -> None:
    (osx_prefix / "lib/libomp.dylib").unlink()
    assert run(osx_prefix, "osx-arm64") == [
        Finding("unresolved", "lib/libtorch_cpu.dylib", "@rpath/libomp.dylib (LC_RPATH: @loader_path)")
    ]


def test_an_rpath_into_the_build_machine_in_one_slice_of_a_fat_file(osx_prefix: Path) -> None:
    leak = [*TORCH_CPU, (macho.LC_RPATH, "/Users/runner/work/pytorch/build/lib")]
    path = osx_prefix / "lib/libtorch_cpu.dylib"
    path.write_bytes(fat_file(macho_file(TORCH_CPU), macho_file(leak, cputype=X86_64)))
    assert run(osx_prefix, "osx-64") == [
        Finding(
            "runpath",
            "lib/libtorch_cpu.dylib",
            "LC_RPATH /Users/runner/work/pytorch/build/lib leaves the prefix",
        )
    ]


def test_an_absolute_install_name_outside_the_prefix(osx_prefix: Path) -> None:
    brew = [*TORCH_CPU, (macho.LC_LOAD_DYLIB, "/opt/homebrew/opt/libomp/lib/libomp.dylib")]
    (osx_prefix / "lib/libtorch_cpu.dylib").write_bytes(macho_file(brew))
    assert [f.detail for f in run(osx_prefix, "osx-arm64")] == ["/opt/homebrew/opt/libomp/lib/libomp.dylib"]


def test_an_executable_stack_flag(osx_prefix: Path) -> None:
    data = macho_file(TORCH_CPU, flags=macho.MH_ALLOW_STACK_EXECUTION)
    (osx_prefix / "lib/libtorch_cpu.dylib").write_bytes(data)
    assert [f.check for f in run(osx_prefix, "osx-arm64")] == ["execstack"]


# -- PE ------------------------------------------------------------------------------------------


@pytest.fixture
def win_prefix(tmp_path: Path) -> Path:
    (tmp_path / "Library/bin").mkdir(parents=True)
    (tmp_path / "Lib/site-packages/torch/lib").mkdir(parents=True)
    (tmp_path / "Library/bin/c10.dll").write_bytes(pe_file(["KERNEL32.dll", "VCRUNTIME140.dll"]))
    (tmp_path / "vcruntime140.dll").write_bytes(pe_file(["KERNEL32.dll"]))
    imports = ["C10.DLL", "torch_cpu.dll", "api-ms-win-crt-runtime-l1-1-0.dll", "KERNEL32.dll"]
    (tmp_path / "Library/bin/torch_cpu.dll").write_bytes(pe_file(["c10.dll", "KERNEL32.dll"]))
    (tmp_path / "Lib/site-packages/torch/lib/torch_python.dll").write_bytes(pe_file(imports, ("nvcuda.dll",)))
    (tmp_path / "Lib/site-packages/torch/_C.cp312-win_amd64.pyd").write_bytes(pe_file(["torch_python.dll"]))
    return tmp_path


def test_the_pe_reader() -> None:
    found = pe.read_pe(pe_file(["c10.dll", "KERNEL32.dll"], ("nvcuda.dll",)))
    assert found.machine == 0x8664
    assert found.imports == ("c10.dll", "KERNEL32.dll") and found.delay_imports == ("nvcuda.dll",)


def test_a_good_windows_layout(win_prefix: Path) -> None:
    """Same directory, Library\\bin (case-insensitive), the prefix root, and torch\\lib, which
    torch/__init__.py adds."""
    assert run(win_prefix, "win-64", ("Lib/site-packages/torch/lib",)) == []


def test_a_dll_in_no_searched_directory(win_prefix: Path) -> None:
    """Without torch\\lib among the DLL directories, _C.pyd cannot find torch_python.dll."""
    assert run(win_prefix, "win-64") == [
        Finding("unresolved", "Lib/site-packages/torch/_C.cp312-win_amd64.pyd", "torch_python.dll")
    ]


def test_a_missing_delay_loaded_dll(win_prefix: Path) -> None:
    (win_prefix / "Library/bin/torch_cpu.dll").write_bytes(pe_file(["c10.dll"], ("cudart64_13.dll",)))
    assert [f.line() for f in run(win_prefix, "win-64", ("Lib/site-packages/torch/lib",))] == [
        "unresolved: Library/bin/torch_cpu.dll: cudart64_13.dll (delay-loaded)"
    ]


def test_a_truncated_pe_is_one_finding(win_prefix: Path) -> None:
    path = win_prefix / "Library/bin/c10.dll"
    path.write_bytes(path.read_bytes()[:0x180])
    found = run(win_prefix, "win-64", ("Lib/site-packages/torch/lib",))
    assert [(f.check, f.path) for f in found] == [("unreadable", "Library/bin/c10.dll")]
