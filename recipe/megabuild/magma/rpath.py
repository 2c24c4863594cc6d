"""The install-time RPATH CMake gives a library, read from the build's ``cmake_install.cmake``.

CMake links build-tree libraries with an RPATH into the build tree and rewrites it when
installing (``file(RPATH_CHANGE ... OLD_RPATH ... NEW_RPATH ...)``). A replayed link installs
nothing, so it links with the install RPATH directly.
"""

from __future__ import annotations

import re
from pathlib import Path

from megabuild.errors import MegabuildError

_ARG = r'(?:"(?P<{0}q>(?:[^"\\]|\\.)*)"|\[(?P<{0}eq>=*)\[(?P<{0}b>.*?)\](?P={0}eq)\])'
_CHANGE = re.compile(
    r'file\(RPATH_CHANGE\s+FILE\s+"(?P<file>[^"]*)"\s+OLD_RPATH\s+'
    + _ARG.format("old")
    + r"\s+NEW_RPATH\s+"
    + _ARG.format("new")
    + r"\s*\)",
    re.S,
)


def _value(match: re.Match[str], name: str) -> str:
    quoted = match.group(f"{name}q")
    if quoted is not None:
        return re.sub(r"\\(.)", r"\1", quoted)  # "\$ORIGIN" in older CMake
    return match.group(f"{name}b") or ""


def install_rpath_change(build_dir: Path, library_name: str) -> tuple[str, str] | None:
    """(build RPATH, install RPATH) of ``library_name``, or None if CMake installs it unchanged."""
    found: set[tuple[str, str]] = set()
    for script in build_dir.rglob("cmake_install.cmake"):
        for match in _CHANGE.finditer(script.read_text(encoding="utf-8", errors="replace")):
            if match.group("file").endswith("/" + library_name):
                found.add((_value(match, "old"), _value(match, "new")))
    if len(found) > 1:
        raise MegabuildError(f"{len(found)} different install RPATHs for {library_name} in {build_dir}")
    return found.pop() if found else None


def with_install_rpath(argv: list[str], change: tuple[str, str] | None) -> list[str]:
    """The link ``argv`` with its build RPATH replaced by the install RPATH (and kept for linking)."""
    if change is None:
        return argv
    old, new = change
    flag = f"-Wl,-rpath,{old}"
    if flag not in argv:
        raise MegabuildError(f"the link command has no '{flag}' to turn into the install RPATH")
    at = argv.index(flag)
    # -rpath-link still lets the linker find the build tree's libraries' own dependencies
    replaced = [f"-Wl,-rpath,{new}"] if new else []
    return [*argv[:at], *replaced, f"-Wl,-rpath-link,{old}", *argv[at + 1 :]]
