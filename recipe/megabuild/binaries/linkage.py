"""Does every library a binary loads resolve inside the environment, and do its run paths stay there?

Resolution follows each loader's rules as far as they reach inside a prefix: ELF's DT_RUNPATH
(else DT_RPATH) with ``$ORIGIN``; Mach-O's ``@rpath`` (the file's LC_RPATHs), ``@loader_path`` and
``@executable_path`` (``$PREFIX/bin``: the Python); Windows' DLL search (the DLL's own directory,
``Library\\bin``, the prefix root, and the directories the caller adds, such as ``torch\\lib`` that
``torch/__init__.py`` adds). What does not resolve there must be on the system's allow-list
(:mod:`.system`); the default system directories (``/usr/lib``, ``ld.so.cache``) never count.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.binaries.elf import ElfFile
from megabuild.binaries.findings import Finding
from megabuild.binaries.macho import MachOSlice
from megabuild.binaries.pe import PeFile
from megabuild.binaries.system import system_reason


@dataclass
class Tree:
    """The environment's files: what exists, under ``prefix`` (absolute paths, ``/``-separated)."""

    prefix: Path
    dll_dirs: tuple[str, ...] = ()
    _listings: dict[str, set[str]] = field(default_factory=dict, repr=False)

    @property
    def root(self) -> str:
        return self.prefix.as_posix()

    def inside(self, path: str) -> bool:
        norm = posixpath.normpath(path)
        return norm == self.root or norm.startswith(self.root.rstrip("/") + "/")

    def exists(self, path: str) -> bool:
        return os.path.exists(posixpath.normpath(path))

    def exists_nocase(self, directory: str, name: str) -> bool:
        """Windows' case-insensitive lookup of ``name`` in ``directory``."""
        directory = posixpath.normpath(directory)
        if directory not in self._listings:
            try:
                self._listings[directory] = {n.lower() for n in os.listdir(directory)}
            except OSError:
                self._listings[directory] = set()
        return name.lower() in self._listings[directory]


def _expand_origin(entry: str, origin: str) -> str:
    return entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)


def elf_findings(tree: Tree, relpath: str, elf: ElfFile) -> list[Finding]:
    origin = posixpath.dirname(posixpath.join(tree.root, relpath))
    dirs = [_expand_origin(entry, origin) for entry in elf.search_path]
    out = [
        Finding("runpath", relpath, f"{entry} leaves the prefix")
        for entry, d in zip(elf.search_path, dirs)
        if not tree.inside(d)
    ]
    for name in elf.needed:
        if "/" in name:
            found = tree.inside(name) and tree.exists(name)
        else:
            found = any(tree.inside(d) and tree.exists(posixpath.join(d, name)) for d in dirs)
        if not found and system_reason("linux", name) is None:
            where = ":".join(elf.search_path) or "no RUNPATH"
            out.append(Finding("unresolved", relpath, f"{name} (searched {where})"))
    return out


def _macho_path(name: str, loader_dir: str, tree: Tree) -> str:
    if name.startswith("@loader_path"):
        return loader_dir + name[len("@loader_path") :]
    if name.startswith("@executable_path"):
        return posixpath.join(tree.root, "bin") + name[len("@executable_path") :]
    return name


def macho_findings(tree: Tree, relpath: str, image: MachOSlice) -> list[Finding]:
    loader_dir = posixpath.dirname(posixpath.join(tree.root, relpath))
    rpaths = [_macho_path(r, loader_dir, tree) for r in image.rpaths]
    out = [
        Finding("runpath", relpath, f"LC_RPATH {entry} leaves the prefix")
        for entry, d in zip(image.rpaths, rpaths)
        if not tree.inside(d) and system_reason("osx", d.rstrip("/") + "/") is None
    ]
    for dylib in image.dylibs:
        if dylib.name.startswith("@rpath/"):
            tail = dylib.name[len("@rpath/") :]
            candidates = [posixpath.join(d, tail) for d in rpaths]
        else:
            candidates = [_macho_path(dylib.name, loader_dir, tree)]
        found = any(tree.inside(c) and tree.exists(c) for c in candidates)
        if found or dylib.weak or system_reason("osx", dylib.name) is not None:
            continue
        where = (
            f" (LC_RPATH: {', '.join(image.rpaths) or 'none'})" if dylib.name.startswith("@rpath/") else ""
        )
        out.append(Finding("unresolved", relpath, f"{dylib.name}{where}"))
    return out


def pe_findings(tree: Tree, relpath: str, pe: PeFile) -> list[Finding]:
    own_dir = posixpath.dirname(posixpath.join(tree.root, relpath))
    dirs = [own_dir, posixpath.join(tree.root, "Library/bin"), tree.root]
    dirs += [posixpath.join(tree.root, d) for d in tree.dll_dirs]
    out = []
    for name, delayed in [(n, False) for n in pe.imports] + [(n, True) for n in pe.delay_imports]:
        if any(tree.exists_nocase(d, name) for d in dirs) or system_reason("win", name) is not None:
            continue
        kind = " (delay-loaded)" if delayed else ""
        out.append(Finding("unresolved", relpath, f"{name}{kind}"))
    return out
