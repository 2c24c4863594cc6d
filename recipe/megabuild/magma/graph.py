"""The linalg target's commands, asked of Ninja itself (``ninja -t query|commands|deps``)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from megabuild import ninja_tool
from megabuild.errors import MegabuildError

CONFIG_HEADER = "ATen/cuda/CUDAConfig.h"


@dataclass(frozen=True)
class Command:
    """One edge's command: its argv (without CMake's ``: && ... && :`` wrapper) and output."""

    output: str
    argv: tuple[str, ...]


def unwrap(command: str) -> tuple[str, ...]:
    """argv of a CMake-generated command line: one program, no shell operators."""
    parts: list[list[str]] = [[]]
    for token in shlex.split(command):
        if token == "&&":
            parts.append([])
        else:
            parts[-1].append(token)
    programs = [p for p in parts if p and p != [":"]]
    if len(programs) != 1:
        raise MegabuildError(f"expected one program in the command, found {len(programs)}: {command[:200]}")
    return tuple(programs[0])


def command_of(build_dir: Path, output: str) -> Command:
    lines = [line for line in ninja_tool.tool(build_dir, "-t", "commands", "-s", output).splitlines() if line]
    if len(lines) != 1:
        raise MegabuildError(f"no single command builds {output} ({len(lines)} found)")
    return Command(output, unwrap(lines[0]))


def inputs_of(build_dir: Path, output: str) -> list[str]:
    """Explicit inputs of the edge that builds ``output`` (``ninja -t query``)."""
    inputs: list[str] = []
    section = ""
    for line in ninja_tool.tool(build_dir, "-t", "query", output).splitlines():
        stripped = line.strip()
        if line.startswith("  ") and not line.startswith("    "):  # "  input: <rule>", "  outputs:"
            section = stripped.split(":", 1)[0]
        elif section == "input" and line.startswith("    ") and not stripped.startswith("|"):
            inputs.append(stripped)  # "| implicit" and "|| order-only" inputs are not linked
    return inputs


def target_objects(build_dir: Path, library: str, target: str) -> list[str]:
    """The objects of CMake target ``target`` that the link of ``library`` takes."""
    own = re.compile(rf"(^|/)CMakeFiles/{re.escape(target)}\.dir/.+\.o(bj)?$")
    objects = [i for i in inputs_of(build_dir, library) if own.search(i)]
    if not objects:
        raise MegabuildError(f"the link of {library} takes no object of target {target}")
    return objects


def config_header_in_deps(build_dir: Path, obj: str) -> list[str]:
    """The paths ending in ATen/cuda/CUDAConfig.h among the recorded header deps of ``obj``."""
    deps = ninja_tool.recorded_deps(build_dir, [obj]).get(obj, [])
    return [path for path in deps if path.endswith(CONFIG_HEADER)]
