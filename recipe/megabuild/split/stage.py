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
    human,
    same_filesystem,
    walk_entries,
)
from megabuild.split.plan import Move, Plan, Planned, PlanReport
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
class StageReport(PlanReport):
    tree: Path
    staging: Path
    cuda: bool
    totals: dict[str, OutputTotal]  # staging dir name (or default output) -> totals
    stays: str  # the default output's name (stays in the tree)
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


@dataclass(frozen=True)
class Classified:
    """Every entry of a tree classified: where each goes and what stops the split."""

    assigned: dict[str, Classification]  # relpath -> a classification with an output
    conflicts: list[str]  # "relpath [out1 (rule) vs out2 (rule)]"
    unmatched: list[str]  # relpaths in strict areas no rule takes
    hits: dict[int, int]  # rule index -> matching entries


def classify_entries(spec: Spec, entries: list[Entry]) -> Classified:
    result = Classified({}, [], [], {rule.index: 0 for rule in spec.rules})
    for entry in entries:
        cls = spec.classify(entry.relpath)
        for rule in cls.rules:
            result.hits[rule.index] += 1
        if cls.unmatched:
            result.unmatched.append(entry.relpath)
        elif cls.conflict:
            outs = " vs ".join(f"{r.output} ({r.shown})" for r in cls.rules)
            result.conflicts.append(f"{entry.relpath} [{outs}]")
        else:
            result.assigned[entry.relpath] = cls
    return result


def missing_required(spec: Spec, hits: dict[int, int], outputs: set[str], cuda: bool) -> list[Rule]:
    return [r for r in spec.rules if r.output in outputs and r.required_for(cuda) and hits[r.index] == 0]


# A file to stage: the entry, its destination root, the staging dir name.
_Staged = tuple[Entry, Path, str]


StagePlan = Planned[StageReport]


def plan_stage(
    spec: Spec,
    tree: Path,
    staging: Path,
    *,
    cuda: bool = False,
    linalg_variant: str | None = None,
    only: list[str] | None = None,
) -> StagePlan:
    """What staging *tree* would move, and every problem that forbids it; changes nothing."""
    selected = _check_arguments(spec, tree, staging, only, linalg_variant)
    entries = walk_entries(tree)
    classified = classify_entries(spec, entries)
    problems = _classification_problems(spec, classified, selected, cuda, linalg_variant)
    totals: dict[str, OutputTotal] = {}
    staged = _files_to_stage(spec, entries, classified, selected, linalg_variant, staging, totals)
    problems += _move_problems(tree, staging, staged, classified.assigned)
    moves = tuple(Move(tree, root, entry.relpath, entry.size) for entry, root, _ in staged)
    plan = Plan(
        "staging",
        "nothing was moved",
        moves=moves,
        problems=tuple(problems),
        prune=((tree, tuple(move.rel for move in moves)),),
    )
    ordered = {name: totals[name] for name in sorted(totals, key=lambda n: (n == spec.default_output, n))}
    return Planned(
        StageReport(tree, staging, cuda, ordered, spec.default_output, spec.target_platform, plan=plan)
    )


def _check_arguments(
    spec: Spec, tree: Path, staging: Path, only: list[str] | None, linalg_variant: str | None
) -> set[str]:
    """The outputs to stage; a one-line error for arguments that cannot work."""
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
    for name in selected:
        variants = spec.variants(name)
        if variants and linalg_variant is not None and linalg_variant not in variants:
            raise MegabuildError(
                f"--linalg-variant {linalg_variant!r} is not a variant of {name} ({', '.join(variants)})"
            )
    return selected


def _classification_problems(
    spec: Spec, classified: Classified, selected: set[str], cuda: bool, linalg_variant: str | None
) -> list[str]:
    problems: list[str] = []
    if classified.unmatched:
        problems.append(
            f"{len(classified.unmatched)} file(s) in strict areas match no rule for {spec.target_platform}: "
            f"{format_paths(classified.unmatched)}"
        )
    if classified.conflicts:
        problems.append(
            f"{len(classified.conflicts)} file(s) match rules of different outputs: "
            f"{format_paths(classified.conflicts)}"
        )
    missing = missing_required(spec, classified.hits, selected, cuda)
    if missing:
        what = "CUDA" if cuda else "CPU"
        problems.append(
            f"required for {what} on {spec.target_platform} but missing in the tree: "
            + format_paths([f"{r.shown} ({r.output})" for r in missing])
        )
    for name in sorted(n for n in selected if spec.variants(n)):
        has_files = any(c.output == name for c in classified.assigned.values())
        if linalg_variant is None and (has_files or cuda):
            problems.append(f"output {name} needs --linalg-variant ({'/'.join(spec.variants(name))})")
    return problems


def _files_to_stage(
    spec: Spec,
    entries: list[Entry],
    classified: Classified,
    selected: set[str],
    linalg_variant: str | None,
    staging: Path,
    totals: dict[str, OutputTotal],
) -> list[_Staged]:
    """The entries leaving the tree (filling *totals*, which counts the default output too)."""
    staged: list[_Staged] = []
    roots: dict[str, Path] = {}  # one Path per output, not per file (~10k files)
    for entry in entries:
        cls = classified.assigned.get(entry.relpath)
        if cls is None or cls.output is None or cls.output not in selected:
            continue
        if cls.output == spec.default_output:
            totals.setdefault(spec.default_output, OutputTotal()).add(entry)
            continue
        if spec.variants(cls.output) and linalg_variant is None:
            continue  # reported as a problem: the variant decides the staging dir
        name = spec.staging_name(cls.output, linalg_variant)
        totals.setdefault(name, OutputTotal()).add(entry)
        if name not in roots:
            roots[name] = staging / name
        staged.append((entry, roots[name], name))
    return staged


def _move_problems(
    tree: Path, staging: Path, staged: list[_Staged], assigned: dict[str, Classification]
) -> list[str]:
    problems: list[str] = []
    bad_links = _links_left_behind(tree, staged, assigned)
    if bad_links:
        problems.append(f"symlinks would not resolve after staging: {format_paths(bad_links)}")
    # Only output dirs that exist already can clash (the magma pass adds to a used staging root).
    existing_roots = {root for _, root, _ in staged if os.path.lexists(root)}
    old_moves = [m for m in staged if m[1] in existing_roots]
    clashes = [f"{name}/{e.relpath}" for e, root, name in old_moves if os.path.lexists(root / e.relpath)]
    blocked = _blocked_parents(old_moves)
    if clashes:
        problems.append(f"already in the staging dir: {format_paths(clashes)}")
    if blocked:
        problems.append(f"not a directory in the staging dir: {format_paths(blocked)}")
    if staged and not same_filesystem(tree, staging):
        big = [e.relpath for e, _, _ in staged if not e.is_link and e.size > COPY_LIMIT]
        if big:
            problems.append(
                f"staging dir is on another file system than the tree; refusing to copy "
                f"{len(big)} file(s) over {COPY_LIMIT} bytes: {format_paths(big)}"
            )
    source_dirs = {os.path.join(os.fspath(tree), e.relpath.rpartition("/")[0]) for e, _, _ in staged}
    unwritable = sorted(d for d in source_dirs if not os.access(d, os.W_OK))
    if unwritable:
        problems.append(f"cannot remove files from read-only directories: {format_paths(unwritable)}")
    return problems


def _blocked_parents(moves: list[_Staged]) -> list[str]:
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
    moves: list[_Staged],
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
