"""``restore``: put back the saved outputs that were replaced since, then Ninja's logs."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from megabuild.buildstate.snapshot import Recorded, State, load
from megabuild.errors import MegabuildError
from megabuild.ninja_tool import NINJA_DEPS, NINJA_LOG, recorded_deps

SHOWN = 5


@dataclass(frozen=True)
class RestorePlan:
    state_dir: Path
    state: State
    build_dir: Path
    unchanged: tuple[Recorded, ...]
    put_back: tuple[Recorded, ...]
    # replaced, and no saved copy to put back (the copy changed with the output: rewritten in
    # place through the hard link; or none could be made): removed, so that Ninja rebuilds it
    # instead of trusting a log entry that no longer describes it
    dropped: tuple[Recorded, ...]

    def lines(self, dry_run: bool = False) -> list[str]:
        verb = "would put back" if dry_run else "put back"
        out = [
            f"build state: Python {self.state.python}'s build from {self.state_dir}: {verb} "
            f"{len(self.put_back)} outputs replaced since, {len(self.unchanged)} unchanged, "
            f"{len(self.dropped)} without a saved copy (removed: Ninja rebuilds them)"
        ]
        out += [f"  put back: {rec.path}" for rec in self.put_back[:SHOWN]]
        out += [f"  removed:  {rec.path}" for rec in self.dropped[:SHOWN]]
        return out


def _classify(build_dir: Path, state_dir: Path, state: State) -> tuple[list[Recorded], ...]:
    unchanged: list[Recorded] = []
    put_back: list[Recorded] = []
    dropped: list[Recorded] = []
    for rec in state.outputs:
        try:
            now = (build_dir / rec.path).lstat()
        except FileNotFoundError:
            now = None
        if now is not None and now.st_ino == rec.inode and rec.matches(now):
            unchanged.append(rec)
            continue
        kept = state.kept_path(state_dir, rec)
        try:
            kept_ok = kept is not None and rec.matches(kept.lstat())
        except FileNotFoundError:
            kept_ok = False
        (put_back if kept_ok else dropped).append(rec)
    return unchanged, put_back, dropped


def plan(build_dir: Path, state_dir: Path, python: str) -> RestorePlan | None:
    """What ``apply`` would do; None when the state is another Python's (nothing to restore)."""
    state = load(state_dir)
    if state.python != python:
        return None
    build_dir = build_dir.resolve()
    if Path(state.build_dir) != build_dir:
        raise MegabuildError(f"the build state in {state_dir} is of {state.build_dir}, not {build_dir}")
    unchanged, put_back, dropped = _classify(build_dir, state_dir, state)
    return RestorePlan(state_dir, state, build_dir, tuple(unchanged), tuple(put_back), tuple(dropped))


def _replace(src: Path, dest: Path) -> None:
    """``dest`` becomes ``src``'s inode (a copy where no hard link can be made), in one rename."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = dest.with_name(f".{dest.name}.megabuild-restore")
    temporary.unlink(missing_ok=True)
    try:
        os.link(src, temporary)
    except OSError:
        shutil.copy2(src, temporary)
    os.replace(temporary, dest)


def apply(restore: RestorePlan) -> None:
    # Outputs first, the logs last: interrupted before the logs, Ninja still holds the newer
    # entries, whose command hashes do not match the put-back outputs, and rebuilds them.
    for rec in restore.put_back:
        kept = restore.state.kept_path(restore.state_dir, rec)
        assert kept is not None  # put_back holds kept outputs only
        _replace(kept, restore.build_dir / rec.path)
    for rec in restore.dropped:
        (restore.build_dir / rec.path).unlink(missing_ok=True)
    for log in (NINJA_LOG, NINJA_DEPS):
        temporary = restore.build_dir / f"{log}.megabuild-restore"
        shutil.copy2(restore.state_dir / log, temporary)  # a copy: Ninja appends in place
        os.replace(temporary, restore.build_dir / log)


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0  # gone: Ninja rebuilds for that reason, not for this one


def still_stale(restore: RestorePlan) -> list[str]:
    """Put-back outputs with a recorded input newer than themselves: Ninja rebuilds those anyway
    (e.g. a header the fresh host env installed with a new mtime). Said in the build log, so that
    a real build shows whether the restore saved anything."""
    by_path = {rec.path: rec for rec in restore.put_back}
    try:
        deps = recorded_deps(restore.build_dir, list(by_path))
    except MegabuildError as exc:
        return [f"build state: could not check the put-back outputs' inputs ({exc})"]
    stale: list[str] = []
    for output, inputs in deps.items():
        rec = by_path.get(output)
        newer = [name for name in inputs if rec and _mtime_ns(restore.build_dir / name) > rec.mtime_ns]
        if newer:
            stale.append(f"  {output}: {newer[0]} is newer")
    if not stale:
        return []
    which = "1 put-back output has" if len(stale) == 1 else f"{len(stale)} put-back outputs have"
    head = f"build state: {which} a newer input, so Ninja rebuilds them:"
    return [head, *stale[:SHOWN]]


def restore_for(build_dir: Path, state_dir: Path, python: str, dry_run: bool = False) -> list[str]:
    """Put back the saved build if it is ``python``'s (else nothing changes); the report."""
    planned = plan(build_dir, state_dir, python)
    if planned is None:
        saved = load(state_dir).python
        return [f"build state: the saved build is Python {saved}'s; {python} builds in the shared tree"]
    lines = planned.lines(dry_run=dry_run)
    if not dry_run:
        apply(planned)
        lines += still_stale(planned)
    return lines
