"""The recipe's Windows test commands that inspect files, run on this (Linux) machine.

conda-build runs a win-64 output's ``test: commands:`` in cmd. The only ones that look at files
are ``if [not] exist PATH exit 1``; with conda-build's Windows variables pointing into a prefix
laid out here, each becomes a bash ``test`` argv. Used by the version-bump check
(``feedstock.split_check.split_run``) and ``tests/test_split_real_layouts.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

# cmd's `if [not] exist PATH exit 1`
EXIST = re.compile(r"if (not )?exist (\S+) exit 1")
VARIABLES = ("PREFIX", "LIBRARY_PREFIX", "LIBRARY_BIN", "LIBRARY_LIB", "LIBRARY_INC", "SP_DIR")


def conda_test_env(prefix: Path, python: str) -> dict[str, str]:
    """conda-build's Windows test variables for a prefix laid out on this machine."""
    library = prefix / "Library"
    return {
        "PREFIX": str(prefix),
        "LIBRARY_PREFIX": str(library),
        "LIBRARY_BIN": str(library / "bin"),
        "LIBRARY_LIB": str(library / "lib"),
        "LIBRARY_INC": str(library / "include"),
        "SP_DIR": str(prefix / "Lib" / "site-packages"),
        "PY_VER": python,
    }


def file_test(command: str, env: dict[str, str]) -> list[str] | None:
    """``if [not] exist %VAR%\\a\\b exit 1`` as a bash ``test`` argv (backslashes to ``/``,
    ``%VAR%`` from *env*); ``None`` for every other command. On Windows ``exist`` ignores case
    and accepts directories: ``test -e`` here is the case-sensitive, stricter reading."""
    match = EXIST.fullmatch(command.strip())
    if match is None:
        return None
    path = re.sub(
        r"%([A-Za-z_]+)%", lambda m: env[m.group(1)] if m.group(1) in VARIABLES else m.group(0), match[2]
    )
    if "%" in path:
        return None
    path = path.replace("\\", "/")
    return ["test", "-e", path] if match[1] else ["test", "!", "-e", path]
