"""The static checks of one package's files: every file is scanned, every code file is read."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass

from megabuild.binaries import elf, macho, pe
from megabuild.binaries.buffer import BinaryFormatError, Buffer, mapped
from megabuild.binaries.findings import Finding
from megabuild.binaries.linkage import Tree, elf_findings, macho_findings, pe_findings
from megabuild.binaries.prefix_strings import COMPILER, FLAGS, PATH, SOURCE, scan
from megabuild.errors import MegabuildError

Opener = Callable[[str], AbstractContextManager[Buffer]]
"""Opens a file by its path relative to the prefix (default: memory-maps it)."""
_GLIBC = re.compile(r"GLIBC_(\d+(?:\.\d+)+)")
# the detail of a prefix finding by kind (prefix_strings); known.json names all but PATH by their
# words, which a PATH finding (it starts with its count) never begins with
PREFIX_DETAILS = {
    PATH: "{} build-prefix string(s), e.g. {!r}",
    SOURCE: "__FILE__ source path(s) under the build's work dir: {}, e.g. {!r}",
    COMPILER: "compiler path the build settings record: {}, e.g. {!r}",
    FLAGS: "build path(s) in the compiler flags the build settings record: {}, e.g. {!r}",
}


@dataclass(frozen=True)
class Options:
    target_platform: str
    c_stdlib_version: str | None = None
    """glibc version of the config's sysroot (Linux): no GLIBC_x.y symbol version may be newer."""
    extra_strings: tuple[str, ...] = ()
    """More build paths that must not be left in any file (the build's SRC_DIR)."""

    @property
    def family(self) -> str:
        return self.target_platform.split("-")[0]


def version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split("."))
    except ValueError:
        raise MegabuildError(f"{text!r} is not a version such as 2.17") from None


def check_files(
    tree: Tree, files: Iterable[str], options: Options, opener: Opener | None = None
) -> list[Finding]:
    """Findings of every file of ``files`` (paths relative to the prefix); symlinks must resolve."""
    out: list[Finding] = []
    for rel in files:
        path = tree.prefix / rel
        if path.is_symlink():
            if not path.exists():
                out.append(Finding("unresolved", rel, f"dangling symlink -> {os.readlink(path)}"))
            continue
        if not path.is_file():
            continue
        with (opener or (lambda r: mapped(tree.prefix / r)))(rel) as data:
            out += check_data(tree, rel, data, options)
    return out


def check_data(tree: Tree, rel: str, data: Buffer, options: Options) -> list[Finding]:
    binary = elf.is_elf(data) or macho.is_macho(data) or pe.is_pe(data)
    hits = scan(data, tuple(s.encode() for s in options.extra_strings), binary)
    out = [
        Finding("prefix", rel, PREFIX_DETAILS[kind].format(hit.count, hit.example))
        for kind, hit in hits.items()
    ]
    try:
        out += _code_findings(tree, rel, data, options)
    except BinaryFormatError as exc:
        out.append(Finding("unreadable", rel, str(exc)))
    return out


def _code_findings(tree: Tree, rel: str, data: Buffer, options: Options) -> list[Finding]:
    if elf.is_elf(data):
        found = elf.read_elf(data)
        if not found.loadable:
            return []
        return elf_findings(tree, rel, found) + _stack(rel, found) + _glibc(rel, found, options)
    if macho.is_macho(data):
        out: list[Finding] = []
        for image in macho.read_macho(data):
            if not image.loadable:
                continue
            out += macho_findings(tree, rel, image)
            if image.flags & macho.MH_ALLOW_STACK_EXECUTION:
                out.append(Finding("execstack", rel, "MH_ALLOW_STACK_EXECUTION is set"))
        return list(dict.fromkeys(out))  # a fat file's slices repeat each other's findings
    if pe.is_pe(data):
        return pe_findings(tree, rel, pe.read_pe(data))
    return []


def _stack(rel: str, found: elf.ElfFile) -> list[Finding]:
    if found.stack_flags is None:
        return [Finding("execstack", rel, "no PT_GNU_STACK: the loader gives it an executable stack")]
    if found.stack_flags & elf.PF_X:
        return [Finding("execstack", rel, "PT_GNU_STACK is executable (linked with -z execstack)")]
    return []


def _glibc(rel: str, found: elf.ElfFile, options: Options) -> list[Finding]:
    if options.c_stdlib_version is None:
        return []
    limit = version_tuple(options.c_stdlib_version)
    newer = {
        version
        for _library, version in found.version_needs
        if (m := _GLIBC.fullmatch(version)) and version_tuple(m.group(1)) > limit
    }
    if not newer:
        return []
    newest = max(newer, key=lambda v: version_tuple(v.split("_", 1)[1]))
    return [Finding("glibc", rel, f"needs {newest} (c_stdlib_version {options.c_stdlib_version})")]
