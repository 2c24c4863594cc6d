"""``split install``: move one staged output into ``$PREFIX`` (the libtorch and
libtorch-cuda-linalg output scripts). Refuses to overwrite files in the prefix
unless asked, refuses staged files the spec (for the target platform) does not
give to that output, and checks everything before moving anything."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.split.fsmove import (
    COPY_LIMIT,
    Mover,
    MoveStats,
    human,
    prune_empty_dirs,
    same_filesystem,
    walk_entries,
)
from megabuild.split.spec import Classification, Spec, format_paths


@dataclass
class InstallReport:
    name: str
    prefix: Path
    files: int
    nbytes: int
    replaced: int
    stats: MoveStats
    target_platform: str = ""

    def lines(self) -> list[str]:
        s = self.stats
        return [
            f"split install ({self.target_platform}): {self.name} -> {self.prefix}: "
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
    result = spec.classify(relpath)
    return result.output if isinstance(result, Classification) else None


def install(
    spec: Spec,
    output: str,
    staging: Path,
    prefix: Path,
    *,
    linalg_variant: str | None = None,
    overwrite: bool = False,
) -> InstallReport:
    name = resolve_output(spec, output, linalg_variant)
    source = staging / name
    if not source.is_dir() or source.is_symlink():
        raise MegabuildError(f"no staged output at {source} (was it staged, or installed already?)")
    if os.path.lexists(prefix) and not prefix.is_dir():
        raise MegabuildError(f"prefix {prefix} is not a directory")
    entries = walk_entries(source)
    if not entries:
        raise MegabuildError(f"staged output {source} is empty")

    existing: list[str] = []
    not_files: list[str] = []
    blocked: set[str] = set()
    prefix_s = os.fspath(prefix)
    parents: set[str] = set()
    for entry in entries:
        dst = os.path.join(prefix_s, entry.relpath)
        if os.path.lexists(dst):
            if os.path.isdir(dst) and not os.path.islink(dst):
                not_files.append(entry.relpath)
            else:
                existing.append(entry.relpath)
        rel_dir = entry.relpath.rpartition("/")[0]
        while rel_dir and rel_dir not in parents:
            parents.add(rel_dir)
            rel_dir = rel_dir.rpartition("/")[0]
    for rel_dir in parents:
        path = os.path.join(prefix_s, rel_dir)
        if os.path.lexists(path) and not os.path.isdir(path):
            blocked.add(rel_dir)
    # A staging dir made for another platform (or with another spec) would put
    # files in the wrong package; stage checked this, but the two steps run in
    # different conda-build scripts.
    parsed = spec.parse_staging_name(name)
    output = parsed[0] if parsed else name
    foreign = [e.relpath for e in entries if _owner(spec, e.relpath) != output]
    problems = []
    if foreign:
        problems.append(
            f"{len(foreign)} staged file(s) the spec for {spec.target_platform} does not give to {name}: "
            f"{format_paths(foreign)}"
        )
    if existing and not overwrite:
        problems.append(f"would overwrite {len(existing)} file(s) in the prefix: {format_paths(existing)}")
    if not_files:
        problems.append(f"directories in the prefix where files go: {format_paths(not_files)}")
    if blocked:
        problems.append(f"not a directory in the prefix: {format_paths(sorted(blocked))}")
    if not same_filesystem(source, prefix):
        big = [e.relpath for e in entries if not e.is_link and e.size > COPY_LIMIT]
        if big:
            problems.append(
                f"prefix is on another file system than the staging dir; refusing to copy "
                f"{len(big)} file(s) over {COPY_LIMIT} bytes: {format_paths(big)}"
            )
    if problems:
        raise MegabuildError("; ".join(problems) + "; nothing was installed")

    mover = Mover()
    set_aside: list[tuple[str, str]] = []
    current = ""
    source_s = os.fspath(source)
    try:
        for entry in entries:
            current = entry.relpath
            dst = os.path.join(prefix_s, entry.relpath)
            mover.ensure_dir(prefix, entry.relpath.rpartition("/")[0], source)
            if os.path.lexists(dst):
                backup = dst + ".megabuild-old"
                os.replace(dst, backup)
                set_aside.append((dst, backup))
            mover.move(os.path.join(source_s, entry.relpath), dst, entry.size)
    except (OSError, MegabuildError) as exc:
        failed = mover.rollback()
        for dst, backup in set_aside:
            os.replace(backup, dst)
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        tail = f"; could not move back: {format_paths(failed)}" if failed else "; rolled back"
        raise MegabuildError(f"install failed at {current}: {detail}{tail}") from None
    for _dst, backup in set_aside:
        os.unlink(backup)
    mover.finish()
    prune_empty_dirs(source, [e.relpath for e in entries])
    with contextlib.suppress(OSError):
        source.rmdir()
    nbytes = sum(e.size for e in entries if not e.is_link)
    return InstallReport(name, prefix, len(entries), nbytes, len(existing), mover.stats, spec.target_platform)
