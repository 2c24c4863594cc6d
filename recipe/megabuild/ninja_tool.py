"""Ninja's own tools (``ninja -t ...``) and its ``.ninja_log``, as the helpers read them."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from megabuild.errors import MegabuildError

NINJA_LOG = ".ninja_log"
NINJA_DEPS = ".ninja_deps"

# How CMake's Ninja generator names outputs: objects under CMakeFiles/<target>.dir/, libraries
# lib<target>.so/.dylib/.a, executables under bin/.
_OBJ = re.compile(r"CMakeFiles/(?P<target>[^/]+)\.dir/")
_LIB = re.compile(r"(?:^|/)lib(?P<target>[A-Za-z0-9_]+)\.(?:so|dylib|a)(?:\.[0-9.]+)?$")
_EXE = re.compile(r"^bin/(?P<target>[^/]+)$")
# a Python extension module named with its SOABI (torch._C, a CMake target since 2.14)
_EXT = re.compile(r"(?:^|/)(?P<target>[A-Za-z0-9_]+)\.(?:cpython-|cp)\d+[-A-Za-z0-9_]*\.(?:so|pyd)$")
_COMPILE_SUFFIXES = (".o", ".obj")


def edge_kind(output: str) -> str:
    """``compile``, ``link`` or ``other``, from an edge's output."""
    if output.endswith(_COMPILE_SUFFIXES):
        return "compile"
    if _LIB.search(output) or _EXE.match(output) or _EXT.search(output):
        return "link"
    return "other"


def edge_target(output: str) -> str:
    """The CMake target an output belongs to (``torch_cpu``); the output itself otherwise."""
    m = _OBJ.search(output) or _LIB.search(output) or _EXE.match(output) or _EXT.search(output)
    return m["target"] if m else output


def tool(build_dir: Path, *args: str) -> str:
    """stdout of ``ninja -C build_dir ARGS``; a failure is one line naming the tool."""
    proc = subprocess.run(["ninja", "-C", str(build_dir), *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise MegabuildError(f"ninja {' '.join(args)} failed in {build_dir}: {detail[-1] if detail else '?'}")
    return proc.stdout


def log_outputs(build_dir: Path) -> list[str]:
    """Every output ``.ninja_log`` has an entry for (``start end mtime output hash``, v5-v7),
    as Ninja names it: relative to the build dir, or absolute."""
    path = build_dir / NINJA_LOG
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        raise MegabuildError(f"cannot read {path}: {exc.strerror}") from None
    outputs: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) != 5:
            raise MegabuildError(f"{path}:{number}: not a .ninja_log entry: {line[:80]!r}")
        outputs[fields[3]] = None
    return list(outputs)


def recorded_deps(build_dir: Path, outputs: list[str]) -> dict[str, list[str]]:
    """``ninja -t deps OUTPUT...``: the inputs (source and headers) each output was last built
    from, for the outputs that have a deps record."""
    if not outputs:
        return {}
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in tool(build_dir, "-t", "deps", *outputs).splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" ") and ": #deps " in line:
            current = found.setdefault(line.split(": #deps ", 1)[0], [])
        elif current is not None:
            current.append(line.strip())
    return found
