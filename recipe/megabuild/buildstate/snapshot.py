"""``save``: a build dir's logged outputs as hard links, Ninja's logs as copies, a manifest."""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.ninja_tool import NINJA_DEPS, NINJA_LOG, log_outputs

MANIFEST = "manifest.json"
FILES = "files"
FORMAT = 1


@dataclass(frozen=True)
class Recorded:
    """One output as the save found it; ``kept`` names its hard link in the state dir (``files/N``)."""

    path: str  # as Ninja names it: relative to the build dir, or absolute
    kept: str  # "" when no hard link could be made
    size: int
    mtime_ns: int
    inode: int

    def matches(self, st: os.stat_result) -> bool:
        return st.st_size == self.size and st.st_mtime_ns == self.mtime_ns


@dataclass(frozen=True)
class State:
    python: str
    build_dir: str  # resolved
    outputs: tuple[Recorded, ...]

    @property
    def not_kept(self) -> int:
        return sum(1 for rec in self.outputs if not rec.kept)

    def kept_path(self, state_dir: Path, rec: Recorded) -> Path | None:
        return state_dir / FILES / rec.kept if rec.kept else None


def _keep(src: Path, dest: Path) -> bool:
    """A hard link shares the inode, so nothing is copied. Where the file system refuses one (the
    state on another device), nothing is kept: copying would double a CUDA build's disk use, and
    a replaced output without a kept copy is simply rebuilt, as before."""
    try:
        os.link(src, dest)
    except OSError:
        return False
    return True


def _record(build_dir: Path, files: Path, outputs: list[str]) -> list[Recorded]:
    recorded: list[Recorded] = []
    for path in outputs:
        full = build_dir / path
        try:
            st = full.lstat()
        except FileNotFoundError:
            continue  # phony-like outputs (CMakeFiles/install.util) never exist
        if not stat.S_ISREG(st.st_mode):
            continue  # symlinks and directories: a restore drops them if they changed
        kept = str(len(recorded))
        if not _keep(full, files / kept):
            kept = ""
        recorded.append(Recorded(path, kept, st.st_size, st.st_mtime_ns, st.st_ino))
    return recorded


def save(build_dir: Path, state_dir: Path, python: str) -> State:
    """Replace ``state_dir`` with the state of ``build_dir`` built for ``python``."""
    build_dir = build_dir.resolve()
    for log in (NINJA_LOG, NINJA_DEPS):
        if not (build_dir / log).is_file():
            raise MegabuildError(f"{build_dir} has no {log}: not a finished Ninja build dir")
    partial = state_dir.with_name(state_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / FILES).mkdir(parents=True)
    recorded = _record(build_dir, partial / FILES, log_outputs(build_dir))
    for log in (NINJA_LOG, NINJA_DEPS):
        shutil.copy2(build_dir / log, partial / log)  # copies: Ninja appends to them in place
    state = State(python, str(build_dir), tuple(recorded))
    manifest = {"format": FORMAT, "python": python, "build_dir": state.build_dir}
    manifest["outputs"] = [asdict(rec) for rec in recorded]
    (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(state_dir, ignore_errors=True)
    partial.rename(state_dir)
    return state


def load(state_dir: Path) -> State:
    path = state_dir / MANIFEST
    try:
        data = json.loads(path.read_text())
        if data.get("format") != FORMAT:
            raise MegabuildError(f"{path}: manifest format {data.get('format')!r}, expected {FORMAT}")
        outputs = tuple(Recorded(**rec) for rec in data["outputs"])
        return State(str(data["python"]), str(data["build_dir"]), outputs)
    except FileNotFoundError:
        raise MegabuildError(f"no build state in {state_dir} (the top-level build saves it)") from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MegabuildError(f"{path}: not a build-state manifest ({exc})") from None


def save_report(state: State, state_dir: Path) -> str:
    """The one line ``build-state save`` prints."""
    linked = len(state.outputs) - state.not_kept
    unlinked = f", {state.not_kept} not (another file system: rebuilt if replaced)" if state.not_kept else ""
    return (f"build state: saved Python {state.python}'s build of {state.build_dir} to {state_dir} "
            f"({len(state.outputs)} outputs, {linked} hard-linked{unlinked})")  # fmt: skip
