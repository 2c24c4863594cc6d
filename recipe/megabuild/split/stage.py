"""``split stage``: move the files of a built ``torch/`` tree into per-output
staging directories, as the split spec says.

Everything is validated before the first file moves (unmatched files in strict
areas, paths claimed by two outputs, missing required files, clashes in the
staging dir, file systems, permissions); a failure during the moves rolls the
moved files back.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.split.fsmove import (
    COPY_LIMIT,
    Entry,
    Mover,
    MoveStats,
    human,
    prune_empty_dirs,
    same_filesystem,
    walk_entries,
)
from megabuild.split.spec import Classification, Rule, Spec, format_paths


@dataclass
class OutputTotal:
    files: int = 0
    nbytes: int = 0
    _inodes: set[tuple[int, int]] = field(default_factory=set, repr=False)

    def add(self, entry: Entry) -> None:
        self.files += 1
        if not entry.is_link and (entry.dev, entry.ino) not in self._inodes:
            self._inodes.add((entry.dev, entry.ino))
            self.nbytes += entry.size


@dataclass
class StageReport:
    tree: Path
    staging: Path
    cuda: bool
    dry_run: bool
    totals: dict[str, OutputTotal]  # staging dir name (or default output) -> totals
    stays: str  # the default output's name (stays in the tree)
    stats: MoveStats
    # relpath -> (output, note of the deciding rule) for every file
    assignment: dict[str, tuple[str, str]]
    target_platform: str = ""

    def lines(self) -> list[str]:
        mode = "CUDA" if self.cuda else "CPU"
        head = "would stage" if self.dry_run else "staged"
        out = [f"split stage ({mode}, {self.target_platform}): {head} {self.tree} -> {self.staging}"]
        out.append(f"  {'output':<34} {'files':>7} {'bytes':>14}")
        for name, total in self.totals.items():
            label = f"{name} (stays in tree)" if name == self.stays else name
            out.append(f"  {label:<34} {total.files:>7} {total.nbytes:>14} {human(total.nbytes):>10}")
        s = self.stats
        out.append(
            f"  moves: {s.renamed} renamed, {s.linked} hard-linked, {s.copied} copied; "
            f"bytes copied: {s.bytes_copied}"
        )
        return out


def classify_entries(
    spec: Spec, entries: list[Entry]
) -> tuple[dict[str, Classification], list[str], list[str], dict[int, int]]:
    """Classify all entries: (assignments, conflicts, unmatched, matches per rule)."""
    assigned: dict[str, Classification] = {}
    conflicts: list[str] = []
    unmatched: list[str] = []
    hits: dict[int, int] = {rule.index: 0 for rule in spec.rules}
    for entry in entries:
        result = spec.classify(entry.relpath)
        if result is None:
            unmatched.append(entry.relpath)
            continue
        if isinstance(result, list):
            outs = " vs ".join(f"{r.output} ({r.shown})" for r in result)
            conflicts.append(f"{entry.relpath} [{outs}]")
            for rule in result:
                hits[rule.index] += 1
            continue
        for rule in result.rules:
            hits[rule.index] += 1
        assigned[entry.relpath] = result
    return assigned, conflicts, unmatched, hits


def missing_required(spec: Spec, hits: dict[int, int], outputs: set[str], cuda: bool) -> list[Rule]:
    return [r for r in spec.rules if r.output in outputs and r.required_for(cuda) and hits[r.index] == 0]


def stage(
    spec: Spec,
    tree: Path,
    staging: Path,
    *,
    cuda: bool = False,
    linalg_variant: str | None = None,
    only: list[str] | None = None,
    dry_run: bool = False,
) -> StageReport:
    if not tree.is_dir():
        raise MegabuildError(f"torch tree {tree} is not a directory")
    real_tree = Path(os.path.realpath(tree))
    real_staging = Path(os.path.realpath(staging))
    if real_staging == real_tree or real_tree in real_staging.parents or real_staging in real_tree.parents:
        raise MegabuildError(f"staging dir {staging} and torch tree {tree} must not contain each other")
    if os.path.lexists(staging) and not staging.is_dir():
        raise MegabuildError(f"staging dir {staging} exists and is not a directory")

    unknown = [name for name in (only or []) if name not in spec.outputs]
    if unknown:
        raise MegabuildError(
            f"--only: unknown output(s) {', '.join(unknown)} (spec has {', '.join(spec.outputs)})"
        )
    selected = set(only) if only else set(spec.outputs)
    variant_outputs = [name for name in selected if spec.variants(name)]
    for name in variant_outputs:
        if linalg_variant is not None and linalg_variant not in spec.variants(name):
            raise MegabuildError(
                f"--linalg-variant {linalg_variant!r} is not a variant of {name} "
                f"({', '.join(spec.variants(name))})"
            )

    entries = walk_entries(tree)
    assigned, conflicts, unmatched, hits = classify_entries(spec, entries)
    missing = missing_required(spec, hits, selected, cuda)

    problems: list[str] = []
    if unmatched:
        problems.append(
            f"{len(unmatched)} file(s) in strict areas match no rule for {spec.target_platform}: "
            f"{format_paths(unmatched)}"
        )
    if conflicts:
        problems.append(
            f"{len(conflicts)} file(s) match rules of different outputs: {format_paths(conflicts)}"
        )
    if missing:
        what = "CUDA" if cuda else "CPU"
        problems.append(
            f"required for {what} on {spec.target_platform} but missing in the tree: "
            + format_paths([f"{r.shown} ({r.output})" for r in missing])
        )
    for name in variant_outputs:
        has_files = any(c.output == name for c in assigned.values())
        if linalg_variant is None and (has_files or cuda):
            problems.append(f"output {name} needs --linalg-variant ({'/'.join(spec.variants(name))})")
    if problems:
        raise MegabuildError("; ".join(problems) + "; nothing was moved")

    by_rel = {e.relpath: e for e in entries}
    totals: dict[str, OutputTotal] = {}
    moves: list[tuple[Entry, Path, str]] = []  # entry, destination root, staging name
    roots: dict[str, Path] = {}  # one Path per output, not per file (~10k files)
    for rel, cls in assigned.items():
        if cls.output not in selected:
            continue
        entry = by_rel[rel]
        if cls.output == spec.default_output:
            totals.setdefault(spec.default_output, OutputTotal()).add(entry)
            continue
        name = spec.staging_name(cls.output, linalg_variant)
        totals.setdefault(name, OutputTotal()).add(entry)
        if name not in roots:
            roots[name] = staging / name
        moves.append((entry, roots[name], name))

    bad_links = _links_left_behind(tree, moves, assigned)
    if bad_links:
        problems.append(f"symlinks would not resolve after staging: {format_paths(bad_links)}")
    # Only output dirs that exist already can clash (the magma pass adds to a used staging root).
    existing_roots = {root for _, root, _ in moves if os.path.lexists(root)}
    old_moves = [m for m in moves if m[1] in existing_roots]
    clashes = [f"{name}/{e.relpath}" for e, root, name in old_moves if os.path.lexists(root / e.relpath)]
    blocked = _blocked_parents(old_moves)
    if clashes:
        problems.append(f"already in the staging dir: {format_paths(clashes)}")
    if blocked:
        problems.append(f"not a directory in the staging dir: {format_paths(blocked)}")
    if moves and not same_filesystem(tree, staging):
        big = [e.relpath for e, _, _ in moves if not e.is_link and e.size > COPY_LIMIT]
        if big:
            problems.append(
                f"staging dir is on another file system than the tree; refusing to copy "
                f"{len(big)} file(s) over {COPY_LIMIT} bytes: {format_paths(big)}"
            )
    source_dirs = {os.path.join(os.fspath(tree), e.relpath.rpartition("/")[0]) for e, _, _ in moves}
    unwritable = sorted(d for d in source_dirs if not os.access(d, os.W_OK))
    if unwritable:
        problems.append(f"cannot remove files from read-only directories: {format_paths(unwritable)}")
    if problems:
        raise MegabuildError("; ".join(problems) + "; nothing was moved")

    ordered = {name: totals[name] for name in sorted(totals, key=lambda n: (n == spec.default_output, n))}
    report = StageReport(
        tree=tree,
        staging=staging,
        cuda=cuda,
        dry_run=dry_run,
        totals=ordered,
        stays=spec.default_output,
        stats=MoveStats(),
        assignment={
            rel: (cls.output, cls.rules[0].note if cls.rules else "default") for rel, cls in assigned.items()
        },
        target_platform=spec.target_platform,
    )
    if dry_run:
        return report

    mover = Mover(stats=report.stats)
    current = ""
    tree_s = os.fspath(tree)
    try:
        for entry, root, _name in moves:
            current = entry.relpath
            parent = entry.relpath.rpartition("/")[0]
            mover.ensure_dir(root, parent, tree)
            src = os.path.join(tree_s, entry.relpath)
            mover.move(src, os.path.join(os.fspath(root), entry.relpath), entry.size)
    except (OSError, MegabuildError) as exc:
        failed = mover.rollback()
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if failed:
            raise MegabuildError(
                f"staging failed at {current}: {detail}; could not move back: {format_paths(failed)}"
            ) from None
        raise MegabuildError(
            f"staging failed at {current}: {detail}; all moved files were moved back"
        ) from None
    mover.finish()
    prune_empty_dirs(tree, [e.relpath for e, _, _ in moves])
    return report


def _blocked_parents(moves: list[tuple[Entry, Path, str]]) -> list[str]:
    """Existing non-directories where the moves need directories."""
    blocked: set[str] = set()
    seen: set[str] = set()
    for entry, root, _name in moves:
        path = os.path.dirname(os.path.join(os.fspath(root), entry.relpath))
        chain = []
        while path not in seen and path != os.path.dirname(path):
            seen.add(path)
            chain.append(path)
            path = os.path.dirname(path)
        for p in chain:
            if os.path.lexists(p) and not os.path.isdir(p):
                blocked.add(p)
    return sorted(blocked)


def _links_left_behind(
    tree: Path,
    moves: list[tuple[Entry, Path, str]],
    assigned: dict[str, Classification],
) -> list[str]:
    """Moved symlinks whose target does not move to the same output."""
    bad: list[str] = []
    for entry, _root, _name in moves:
        if not entry.is_link:
            continue
        target = os.readlink(os.path.join(os.fspath(tree), entry.relpath))
        if os.path.isabs(target):
            bad.append(f"{entry.relpath} -> {target} (absolute)")
            continue
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname(entry.relpath), target))
        if resolved == ".." or resolved.startswith("../"):
            bad.append(f"{entry.relpath} -> {target} (outside the tree)")
            continue
        cls = assigned.get(resolved)
        if cls is None:
            if not os.path.isdir(os.path.join(os.fspath(tree), resolved)):
                bad.append(f"{entry.relpath} -> {target} (dangling)")
            continue
        if cls.output != assigned[entry.relpath].output:
            bad.append(f"{entry.relpath} -> {target} (target goes to {cls.output})")
    return bad
