"""Plan, check, apply: the shape every ``split`` command that changes files shares.

A ``plan_*`` function (:mod:`.stage`, :mod:`.install`, :mod:`.link_back`) reads
the file system and returns a frozen :class:`Plan`: the moves, symlinks and
removals to make and every problem that forbids them. :func:`check` raises all
problems at once; :func:`apply` runs a plan through a journalled
:class:`~megabuild.split.fsmove.Mover`, so a failure half-way puts every file
back; :meth:`Planned.run` does both, or only the check for ``--dry-run``,
which prints :meth:`Plan.lines`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from megabuild.errors import MegabuildError
from megabuild.split.fsmove import Mover, MoveStats, prune_empty_dirs
from megabuild.split.spec import format_paths

MAX_PROBLEMS = 12  # more would not fit one readable line


@dataclass(frozen=True)
class Move:
    """Move ``src_root/rel`` to ``dest_root/dest_rel`` (``dest_rel``: ``rel`` unless given, e.g.
    ``Library/bin/c10.dll`` for ``lib/c10.dll`` on Windows), setting aside what is there if
    ``replaces``."""

    src_root: Path
    dest_root: Path
    rel: str
    size: int
    replaces: bool = False
    dest_rel: str = ""

    @property
    def target_rel(self) -> str:
        """The path under ``dest_root``."""
        return self.dest_rel or self.rel

    @property
    def src(self) -> str:
        return os.path.join(os.fspath(self.src_root), self.rel)

    @property
    def dst(self) -> str:
        return os.path.join(os.fspath(self.dest_root), self.target_rel)


@dataclass(frozen=True)
class Link:
    """Create the symlink ``root/rel -> target``, setting aside the file there if ``replaces``."""

    root: Path
    rel: str
    target: str
    replaces: bool = False


@dataclass(frozen=True)
class Plan:
    """Everything one command would change, and why it must not (``problems``)."""

    command: str  # "staging", "install", "link-back": names the failure in messages
    unchanged: str  # what a refusal leaves untouched: "nothing was moved"
    moves: tuple[Move, ...] = ()
    links: tuple[Link, ...] = ()
    removals: tuple[Path, ...] = ()
    problems: tuple[str, ...] = ()
    # (root, relpaths): directories under root that the plan leaves empty are removed afterwards
    prune: tuple[tuple[Path, tuple[str, ...]], ...] = ()

    def lines(self) -> list[str]:
        """The plan, one change a line (what ``--dry-run`` prints)."""
        out = [f"plan: {len(self.moves)} moves, {len(self.links)} symlinks, {len(self.removals)} removals"]
        for move in self.moves:
            out.append(f"  move {move.src} -> {move.dst}" + (" (replacing)" if move.replaces else ""))
        for link in self.links:
            path = os.path.join(os.fspath(link.root), link.rel)
            out.append(f"  link {path} -> {link.target}" + (" (replacing)" if link.replaces else ""))
        out.extend(f"  remove {path}" for path in self.removals)
        return out


class SplitProblems(MegabuildError):
    """Every problem a plan found, reported together on one line."""

    def __init__(self, problems: tuple[str, ...], unchanged: str) -> None:
        shown = list(problems[:MAX_PROBLEMS])
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"and {len(problems) - MAX_PROBLEMS} more problem(s)")
        super().__init__("; ".join([*shown, unchanged]))
        self.problems = problems


def check(plan: Plan) -> None:
    """Raise :class:`SplitProblems` if the plan found any problem."""
    if plan.problems:
        raise SplitProblems(plan.problems, plan.unchanged)


def apply(plan: Plan, mover: Mover) -> None:
    """Check and run *plan*; on any failure undo every change made and raise one line."""
    check(plan)
    current = ""
    try:
        for move in plan.moves:
            current = move.rel
            # a relocated file's new directories have no counterpart in the source to copy modes from
            src_root = move.src_root if move.target_rel == move.rel else None
            mover.ensure_dir(move.dest_root, move.target_rel.rpartition("/")[0], src_root)
            if move.replaces:
                mover.set_aside(move.dst)
            mover.move(move.src, move.dst, move.size)
        for link in plan.links:
            current = link.rel
            mover.ensure_dir(link.root, link.rel.rpartition("/")[0])
            path = os.path.join(os.fspath(link.root), link.rel)
            if link.replaces:
                mover.set_aside(path)
            mover.symlink(link.target, path)
        for removal in plan.removals:
            current = os.fspath(removal)
            mover.set_aside(removal)
    except (OSError, MegabuildError) as exc:
        failed = mover.rollback()
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        tail = (
            f"could not move back: {format_paths(failed)}"
            if failed
            else "rolled back: every file was moved back"
        )
        raise MegabuildError(f"{plan.command} failed at {current}: {detail}; {tail}") from None
    mover.commit()
    for root, relpaths in plan.prune:
        prune_empty_dirs(root, list(relpaths))


@dataclass(kw_only=True)
class PlanReport:
    """What a command reports: its plan, and once run, how the moves went."""

    plan: Plan
    stats: MoveStats = field(default_factory=MoveStats)
    dry_run: bool = False


ReportT = TypeVar("ReportT", bound=PlanReport)


@dataclass(frozen=True)
class Planned(Generic[ReportT]):
    """What a ``plan_*`` function returns: the plan inside the report the command prints."""

    report: ReportT

    @property
    def plan(self) -> Plan:
        return self.report.plan

    def run(self, dry_run: bool = False) -> ReportT:
        """Check the plan and, unless *dry_run*, apply it (a failure half-way is rolled back)."""
        check(self.plan)
        mover = Mover()
        if not dry_run:
            apply(self.plan, mover)
        self.report.stats = mover.stats
        self.report.dry_run = dry_run
        return self.report
