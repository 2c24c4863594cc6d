"""``split install``: move one staged output into ``$PREFIX`` (the libtorch and
libtorch-cuda-linalg output scripts). Refuses to overwrite files in the prefix
unless asked, refuses staged files the spec (for the target platform) does not
give to that output, and checks everything before moving anything."""

from __future__ import annotations

import os
from dataclasses import dataclass
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
from megabuild.split.spec import Spec, format_paths


@dataclass
class InstallReport(PlanReport):
    name: str
    prefix: Path
    files: int
    nbytes: int
    replaced: int
    target_platform: str = ""

    def lines(self) -> list[str]:
        s = self.stats
        head = "would install " if self.dry_run else ""
        return [
            f"split install ({self.target_platform}): {head}{self.name} -> {self.prefix}: "
            f"{self.files} files, {self.nbytes} bytes "
            f"({human(self.nbytes)}), {self.replaced} replaced",
            f"  moves: {s.renamed} renamed, {s.linked} hard-linked, {s.copied} copied; "
            f"bytes copied: {s.bytes_copied}",
        ]


def resolve_output(spec: Spec, output: str, variant: str | None) -> str:
    """The staging dir name for OUTPUT (``libtorch``, ``libtorch-cuda-linalg``
    with ``--linalg-variant``, or a full name such as ``libtorch-cuda-linalg-magma``)."""
    parsed = spec.parse_staging_name(output)
    if parsed is not None:
        name, parsed_variant = parsed
        if variant is not None and parsed_variant != variant:
            raise MegabuildError(f"output {output} does not match --linalg-variant {variant}")
    elif output in spec.outputs:
        name = output
        if variant is not None and variant not in spec.variants(output):
            raise MegabuildError(f"{variant!r} is not a variant of {output}")
    else:
        raise MegabuildError(f"unknown output {output!r}")
    if name == spec.default_output:
        raise MegabuildError(f"{name} is not staged: pip installs it from the build tree")
    return spec.staging_name(name, variant if parsed is None else parsed[1])


def _owner(spec: Spec, relpath: str) -> str | None:
    return spec.classify(relpath).output


InstallPlan = Planned[InstallReport]


def plan_install(
    spec: Spec,
    output: str,
    staging: Path,
    prefix: Path,
    *,
    linalg_variant: str | None = None,
    overwrite: bool = False,
) -> InstallPlan:
    """What installing the staged *output* would move, and every problem that forbids it."""
    name = resolve_output(spec, output, linalg_variant)
    source = staging / name
    if not source.is_dir() or source.is_symlink():
        raise MegabuildError(f"no staged output at {source} (was it staged, or installed already?)")
    if os.path.lexists(prefix) and not prefix.is_dir():
        raise MegabuildError(f"prefix {prefix} is not a directory")
    entries = walk_entries(source)
    if not entries:
        raise MegabuildError(f"staged output {source} is empty")
    dests, problems = _destinations(spec, entries)
    existing, prefix_problems = _prefix_problems(entries, dests, prefix)
    problems += prefix_problems
    if existing and not overwrite:
        problems.insert(0, f"would overwrite {len(existing)} file(s) in the prefix: {format_paths(existing)}")
    problems[:0] = _foreign_problems(spec, name, entries)
    if not same_filesystem(source, prefix):
        big = [e.relpath for e in entries if not e.is_link and e.size > COPY_LIMIT]
        if big:
            problems.append(
                f"prefix is on another file system than the staging dir; refusing to copy "
                f"{len(big)} file(s) over {COPY_LIMIT} bytes: {format_paths(big)}"
            )
    replaced = set(existing)
    moves = tuple(
        Move(source, prefix, e.relpath, e.size, dests[e.relpath] in replaced, _relocated(e.relpath, dests))
        for e in entries
    )
    plan = Plan(
        "install",
        "nothing was installed",
        moves=moves,
        problems=tuple(problems),
        # the staged output's directory goes too once it is empty
        prune=((staging, tuple(f"{name}/{e.relpath}" for e in entries)),),
    )
    nbytes = sum(e.size for e in entries if not e.is_link)
    return Planned(
        InstallReport(name, prefix, len(entries), nbytes, len(existing), spec.target_platform, plan=plan)
    )


def _foreign_problems(spec: Spec, name: str, entries: list[Entry]) -> list[str]:
    # A staging dir made for another platform (or with another spec) would put
    # files in the wrong package; stage checked this, but the two steps run in
    # different conda-build scripts.
    parsed = spec.parse_staging_name(name)
    output = parsed[0] if parsed else name
    foreign = [e.relpath for e in entries if _owner(spec, e.relpath) != output]
    if not foreign:
        return []
    return [
        f"{len(foreign)} staged file(s) the spec for {spec.target_platform} does not give to {name}: "
        f"{format_paths(foreign)}"
    ]


def _relocated(relpath: str, dests: dict[str, str]) -> str:
    """The Move's ``dest_rel``: empty when the file keeps its tree path."""
    dest = dests[relpath]
    return "" if dest == relpath else dest


def _destinations(spec: Spec, entries: list[Entry]) -> tuple[dict[str, str], list[str]]:
    """(staged path -> path in the prefix, problems): the spec's install roots for the target
    family (Windows: ``lib/*.dll`` -> ``Library/bin``, ...); elsewhere every path stays."""
    dests: dict[str, str] = {}
    unplaced: list[str] = []
    by_dest: dict[str, list[str]] = {}
    for entry in entries:
        dest = spec.install_path(entry.relpath)
        if dest is None:
            unplaced.append(entry.relpath)
            dest = entry.relpath
        dests[entry.relpath] = dest
        by_dest.setdefault(dest, []).append(entry.relpath)
    problems: list[str] = []
    family = spec.target_platform.partition("-")[0]
    if unplaced:
        problems.append(
            f"{len(unplaced)} staged file(s) match no install root of {family} in the split spec: "
            f"{format_paths(unplaced)}"
        )
    clashes = [f"{' and '.join(srcs)} -> {dest}" for dest, srcs in sorted(by_dest.items()) if len(srcs) > 1]
    if clashes:
        problems.append(f"staged files with the same place in the prefix: {format_paths(clashes)}")
    moved_links = [
        e.relpath for e in entries if e.is_link and _dirname(dests[e.relpath]) != _dirname(e.relpath)
    ]
    if moved_links:
        problems.append(f"symlinks an install root moves to another directory: {format_paths(moved_links)}")
    return dests, problems


def _dirname(relpath: str) -> str:
    return relpath.rpartition("/")[0]


def _prefix_problems(
    entries: list[Entry], dests: dict[str, str], prefix: Path
) -> tuple[list[str], list[str]]:
    """(files the install would replace, what in the prefix stands in the way); paths in the prefix."""
    existing: list[str] = []
    not_files: list[str] = []
    prefix_s = os.fspath(prefix)
    parents: set[str] = set()
    for entry in entries:
        rel = dests[entry.relpath]
        dst = os.path.join(prefix_s, rel)
        if os.path.lexists(dst):
            if os.path.isdir(dst) and not os.path.islink(dst):
                not_files.append(rel)
            else:
                existing.append(rel)
        rel_dir = rel.rpartition("/")[0]
        while rel_dir and rel_dir not in parents:
            parents.add(rel_dir)
            rel_dir = rel_dir.rpartition("/")[0]
    blocked = sorted(
        d
        for d in parents
        if os.path.lexists(os.path.join(prefix_s, d)) and not os.path.isdir(os.path.join(prefix_s, d))
    )
    problems: list[str] = []
    if not_files:
        problems.append(f"directories in the prefix where files go: {format_paths(not_files)}")
    if blocked:
        problems.append(f"not a directory in the prefix: {format_paths(blocked)}")
    return existing, problems
