"""Replay the linalg target's compile and link commands with MAGMA enabled, into ``out_dir``.

Everything is read from the nomagma build's own Ninja graph, so the flags, defines and the
compiler launcher are the ones the build used; only four things change: a MAGMA-enabled
``ATen/cuda/CUDAConfig.h`` is searched first, MAGMA's include dir and defines are added, every
output goes to ``out_dir``, and libmagma joins the link. The build tree is only read.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from megabuild.binaries.elf import read_elf_file
from megabuild.errors import MegabuildError
from megabuild.magma.graph import CONFIG_HEADER, Command, command_of, config_header_in_deps, target_objects
from megabuild.magma.rpath import install_rpath_change, with_install_rpath

_MAGMA_LINE = re.compile(r"^(\s*#\s*define\s+AT_MAGMA_ENABLED\(\)\s+)[01](\s*)$", re.M)

# the lazy CUDA linalg library's Ninja output and CMake target
LIBRARY = "lib/libtorch_cuda_linalg.so"
TARGET = "torch_cuda_linalg"


@dataclass(frozen=True)
class Replay:
    """What :func:`run` executes: the rewritten commands and the files they produce."""

    build_dir: Path
    out_dir: Path
    config_header: Path  # the nomagma build's generated header
    compiles: tuple[Command, ...]
    link: Command
    library: Path

    def lines(self) -> list[str]:
        out = [f"magma linalg: {len(self.compiles)} compiles + 1 link into {self.out_dir}"]
        out += [f"  {' '.join(c.argv)}" for c in (*self.compiles, self.link)]
        return out


def magma_config(text: str) -> str:
    """The generated config header with AT_MAGMA_ENABLED() 1; exactly one such define expected."""
    found = _MAGMA_LINE.findall(text)
    if len(found) != 1:
        raise MegabuildError(
            f"{CONFIG_HEADER}: expected one '#define AT_MAGMA_ENABLED() 0|1', found {len(found)}"
        )
    return _MAGMA_LINE.sub(r"\g<1>1\g<2>", text)


def _replace_value(argv: list[str], flag: str, value: str) -> None:
    if flag in argv[:-1]:
        argv[argv.index(flag) + 1] = value


def rewrite_compile(cmd: Command, obj: Path, include_first: list[str]) -> Command:
    """``cmd`` writing ``obj`` (and its depfile next to it), with ``include_first`` before all flags."""
    argv = list(cmd.argv)
    if "-o" not in argv[:-1]:
        raise MegabuildError(f"compile command of {cmd.output} has no -o")
    _replace_value(argv, "-o", str(obj))
    _replace_value(argv, "-MT", str(obj))
    _replace_value(argv, "-MF", str(obj) + ".d")
    first_flag = next((i for i, token in enumerate(argv) if token.startswith("-")), len(argv))
    return Command(str(obj), tuple(argv[:first_flag] + include_first + argv[first_flag:]))


def rewrite_link(
    cmd: Command,
    objects: dict[str, Path],
    library: Path,
    magma_library: Path,
    rpath_change: tuple[str, str] | None = None,
) -> Command:
    """``cmd`` linking the replayed ``objects`` and libmagma into ``library``, with the install RPATH."""
    argv = with_install_rpath(list(cmd.argv), rpath_change)
    missing = sorted(set(objects) - set(argv))
    if missing:
        raise MegabuildError(f"the link command of {cmd.output} does not name {missing[0]} (response file?)")
    positions = [i for i, token in enumerate(argv) if token in objects]
    argv = [str(objects[t]) if t in objects else t for t in argv]
    argv.insert(positions[-1] + 1, str(magma_library))
    _replace_value(argv, "-o", str(library))
    return Command(str(library), tuple(argv))


def _config_header(build_dir: Path, objects: list[str]) -> Path:
    headers = {h for obj in objects for h in config_header_in_deps(build_dir, obj)}
    if len(headers) != 1:
        raise MegabuildError(f"the linalg objects see {len(headers)} copies of {CONFIG_HEADER}, expected 1")
    header = Path(headers.pop())
    return header if header.is_absolute() else build_dir / header


def plan(
    build_dir: Path,
    out_dir: Path,
    library: str,
    target: str,
    magma_home: Path,
    defines: list[str],
    lib_dir: Path | None = None,
) -> Replay:
    """Read the graph and rewrite the commands; runs nothing. The library goes to ``lib_dir``."""
    objects = target_objects(build_dir, library, target)
    out_dir = out_dir.resolve()
    include_first = ["-I", str(out_dir / "include"), "-isystem", str(magma_home / "include")]
    include_first += [f"-D{d}" for d in defines]
    new_objects = {o: out_dir / "obj" / o for o in objects}
    compiles = tuple(
        rewrite_compile(command_of(build_dir, o), new_objects[o], include_first) for o in objects
    )
    out_library = (lib_dir.resolve() if lib_dir else out_dir / "lib") / Path(library).name
    link = rewrite_link(
        command_of(build_dir, library),
        new_objects,
        out_library,
        magma_home / "lib" / "libmagma.so",
        install_rpath_change(build_dir, Path(library).name),
    )
    return Replay(build_dir, out_dir, _config_header(build_dir, objects), compiles, link, out_library)


def _depfile_headers(obj: Path) -> list[str]:
    text = Path(str(obj) + ".d").read_text(encoding="utf-8").replace("\\\n", " ")
    return [token for token in text.split() if token.endswith(CONFIG_HEADER)]


def _check_headers(replay: Replay) -> None:
    """Every replayed object that reads the config header read the MAGMA-enabled one."""
    ours = str(replay.out_dir / "include" / CONFIG_HEADER)
    seen = [(c.output, h) for c in replay.compiles for h in _depfile_headers(Path(c.output))]
    wrong = [f"{obj} read {header}" for obj, header in seen if os.path.realpath(header) != ours]
    if wrong or not seen:
        raise MegabuildError(wrong[0] if wrong else f"no linalg object includes {CONFIG_HEADER}")


def run(replay: Replay) -> list[str]:
    """Write the header, run every command in the build dir, check the result."""
    header = replay.out_dir / "include" / CONFIG_HEADER
    header.parent.mkdir(parents=True, exist_ok=True)
    header.write_text(magma_config(replay.config_header.read_text(encoding="utf-8")), encoding="utf-8")
    started = time.monotonic()
    for cmd in (*replay.compiles, replay.link):
        Path(cmd.output).parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(cmd.argv, cwd=replay.build_dir, check=False)
        if proc.returncode != 0:
            raise MegabuildError(f"replayed command for {cmd.output} failed (exit {proc.returncode})")
    _check_headers(replay)
    needed = read_elf_file(replay.library).needed
    if not any(n.startswith("libmagma") for n in needed):
        raise MegabuildError(f"{replay.library} does not link libmagma (NEEDED: {', '.join(needed)})")
    record = {"compiles": [list(c.argv) for c in replay.compiles], "link": list(replay.link.argv)}
    (replay.out_dir / "commands.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    took = time.monotonic() - started
    return [
        f"magma linalg: {len(replay.compiles)} compiles + 1 link in {took:.1f} s -> {replay.library}",
        f"magma linalg: NEEDED {', '.join(needed)}",
    ]
