"""The new wheels' file listings against the ones in tests/data, in the split spec's terms.

A listing (``python -m feedstock list-wheel-files``) is a TSV of ``path``, ``size``, ``executable`` for
every file of a wheel outside its ``.dist-info``. The comparison names what a person must look
at: libraries, headers, top-level directories, and new files the spec gives to no package.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from megabuild.model import PYTORCH

from ..errors import FeedstockError, capped
from ..wheel_files import Row, listing_text
from .platforms import Platform
from .report import Finding, Level
from .split_spec import SplitSpec
from .wheels import WheelFacts, version_key

SECTION = "listings"
LIBRARY = re.compile(r"^torch/lib/[^/]+\.(?:so(?:\.\d+)*|dylib|dll)$")
INCLUDE = "torch/include/"
# Up to this many changed headers are named one by one; more are counted per directory.
NAMED_HEADERS = 12
# Unplaceable files named one line each before the rest is counted in one line.
NAMED_FILES = 8


def listing_name(wheel: WheelFacts, platform: Platform) -> str:
    """tests/data/README.md's naming: ``torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv``."""
    variant = f"-{wheel.local_version}" if wheel.local_version.startswith(("cu", "rocm")) else ""
    tag = wheel.python_build.abi_tag  # cp314t next to cp314: two listings
    return f"torch-{wheel.version}-{tag}-{platform.listing_tag}{variant}-files.tsv"


def listing_version(path: Path) -> str:
    """``2.14.1`` for ``torch-2.14.1-cp312-...-files.tsv``."""
    return path.name.split("-")[1]


def current_listing(listings_dir: Path, version: str, platform: Platform) -> Path | None:
    """The platform's listing of ``version``; else its newest one (tests/data may be a step ahead
    of the recipe while a bump is under way)."""
    found = sorted(listings_dir.glob(f"torch-*-cp*-{platform.listing_tag}*-files.tsv"))
    same = [p for p in found if listing_version(p) == version]
    newest = sorted(found, key=lambda p: version_key(listing_version(p)))
    chosen = same or newest
    return chosen[-1] if chosen else None


def write_listings(listings_dir: Path, listings: dict[str, list[Row]]) -> list[Path]:
    """Write every listing or none: all go to temporary files first, then each is renamed."""
    pending: list[tuple[str, Path]] = []
    try:
        for name, rows in listings.items():
            fd, tmp = tempfile.mkstemp(dir=listings_dir, prefix=f".{name}.", suffix=".tmp")
            pending.append((tmp, listings_dir / name))
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(listing_text(rows))
        for tmp, final in pending:
            os.replace(tmp, final)
    except OSError as exc:
        for tmp, _final in pending:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise FeedstockError(f"cannot write listings into {listings_dir}: {exc.strerror or exc}") from None
    return [final for _tmp, final in pending]


@dataclass(frozen=True)
class ListingDiff:
    platform: Platform
    old: list[Row]
    new: list[Row]

    @property
    def old_paths(self) -> set[str]:
        return {r.path for r in self.old}

    @property
    def new_paths(self) -> set[str]:
        return {r.path for r in self.new}

    @property
    def added(self) -> list[str]:
        return sorted(self.new_paths - self.old_paths)

    @property
    def removed(self) -> list[str]:
        return sorted(self.old_paths - self.new_paths)

    def left_out(self, path: str) -> bool:
        """A wheel-only file a conda build never has (the split leaves it out)."""
        return any(fnmatch.fnmatch(path, glob) for glob in self.platform.wheel_repair)


def _finding(level: Level, diff: ListingDiff, text: str) -> Finding:
    return Finding(SECTION, level, f"{diff.platform.subdir}: {text}")


def _placement(spec: SplitSpec | None, path: str) -> str:
    """The output the spec gives ``path`` (``pytorch``: files outside torch/ are Python packages)."""
    if spec is None:
        return "(no split rules)"
    if not path.startswith("torch/"):
        return PYTORCH
    placed = spec.place(path.removeprefix("torch/"))
    return placed.output or f"NO PACKAGE ({placed.problem})"


def library_findings(diff: ListingDiff, spec: SplitSpec | None) -> list[Finding]:
    """Each new or removed library, with the package the spec gives a new one."""
    added = [p for p in diff.added if LIBRARY.match(p) and not diff.left_out(p)]
    removed = [p for p in diff.removed if LIBRARY.match(p) and not diff.left_out(p)]
    found: list[Finding] = []
    for path in added:
        where = _placement(spec, path)
        level = Level.ACTION if where.startswith("NO PACKAGE") else Level.INFO
        found.append(_finding(level, diff, f"new library {path} -> {where}"))
    found += [_finding(Level.INFO, diff, f"library gone: {path}") for path in removed]
    if not found:
        count = sum(1 for p in diff.new_paths if LIBRARY.match(p))
        found.append(_finding(Level.OK, diff, f"libraries: the same {count}"))
    return found


def _include_dir(path: str) -> str:
    """``ATen`` for ``torch/include/ATen/core/Tensor.h``; ``.`` for a header directly in include/."""
    rest = path[len(INCLUDE) :]
    return rest.split("/", 1)[0] if "/" in rest else "."


def _versionless(name: str) -> str:
    """``mimalloc`` for ``mimalloc-2.4``: a renamed versioned directory is not a new one."""
    return re.sub(r"[-_.]?\d+(?:\.\d+)*$", "", name)


def _include_dir_findings(diff: ListingDiff, spec: SplitSpec | None) -> list[Finding]:
    old = {_include_dir(p) for p in diff.old_paths if p.startswith(INCLUDE)}
    new = {_include_dir(p) for p in diff.new_paths if p.startswith(INCLUDE)}
    renamed = {d: o for d in new - old for o in old - new if _versionless(d) == _versionless(o)}
    found: list[Finding] = []
    for name, was in sorted(renamed.items()):
        found.append(_finding(Level.INFO, diff, f"include/{was} became include/{name}"))
    for name in sorted(new - old - set(renamed)):
        example = next(p for p in sorted(diff.new_paths) if p.startswith(f"{INCLUDE}{name}/"))
        where = _placement(spec, example)
        found.append(
            _finding(Level.ACTION, diff, f"new header dir include/{name}/ -> {where}: is that its package?")
        )
    gone = sorted(old - new - set(renamed.values()))
    found += [_finding(Level.INFO, diff, f"header dir gone: include/{name}/") for name in gone]
    return found


def header_findings(diff: ListingDiff, spec: SplitSpec | None) -> list[Finding]:
    """Header counts, every changed header when few changed (else per directory), new header dirs."""
    added = [p for p in diff.added if p.startswith(INCLUDE)]
    removed = [p for p in diff.removed if p.startswith(INCLUDE)]
    old_count = sum(1 for p in diff.old_paths if p.startswith(INCLUDE))
    new_count = old_count + len(added) - len(removed)
    counts = f"headers: {old_count:,} -> {new_count:,} (+{len(added)} -{len(removed)})"
    if not added and not removed:
        return [_finding(Level.OK, diff, counts)]
    found = [_finding(Level.INFO, diff, counts)]
    if len(added) + len(removed) <= NAMED_HEADERS:
        found += [_finding(Level.INFO, diff, f"new header {p}") for p in added]
        found += [_finding(Level.INFO, diff, f"header gone: {p}") for p in removed]
    else:
        plus, minus = Counter(map(_include_dir, added)), Counter(map(_include_dir, removed))
        busiest = sorted(set(plus) | set(minus), key=lambda d: -(plus[d] + minus[d]))
        per_dir = capped(f"{d} +{plus[d]} -{minus[d]}" for d in busiest)
        found.append(_finding(Level.INFO, diff, f"headers changed per include/ dir: {per_dir}"))
        if removed:  # a removed header can break a consumer; a new one cannot
            found.append(_finding(Level.INFO, diff, f"headers gone: {capped(removed)}"))
    return found + _include_dir_findings(diff, spec)


def _tops(paths: set[str], depth: int) -> set[str]:
    return {"/".join(p.split("/")[:depth]) for p in paths if p.count("/") >= depth}


def top_dir_findings(diff: ListingDiff) -> list[Finding]:
    """New or removed top-level packages (action: the recipe knows them) and torch/ sub-dirs."""
    old, new = _tops(diff.old_paths, 1), _tops(diff.new_paths, 1)
    found = [
        _finding(Level.ACTION, diff, f"new top-level dir {d}/ (the recipe knows {', '.join(sorted(old))})")
        for d in sorted(new - old)
    ]
    found += [_finding(Level.ACTION, diff, f"top-level dir gone: {d}/") for d in sorted(old - new)]
    old_sub, new_sub = _tops(diff.old_paths, 2), _tops(diff.new_paths, 2)
    if new_sub - old_sub:
        found.append(_finding(Level.INFO, diff, f"new dirs: {capped(sorted(new_sub - old_sub))}"))
    if old_sub - new_sub:
        found.append(_finding(Level.INFO, diff, f"dirs gone: {capped(sorted(old_sub - new_sub))}"))
    if not found:
        found.append(_finding(Level.OK, diff, f"top-level dirs: the same ({', '.join(sorted(new))})"))
    return found


def package_findings(diff: ListingDiff, spec: SplitSpec | None) -> list[Finding]:
    """New and removed files per package, and each new file (not a library) no package takes."""
    added = [p for p in diff.added if not diff.left_out(p)]
    removed = [p for p in diff.removed if not diff.left_out(p)]
    if spec is None:
        text = f"files: +{len(added)} -{len(removed)}; no split rules for {diff.platform.subdir}"
        return [_finding(Level.INFO, diff, text)]
    plus = Counter(_placement(spec, p) for p in added)
    minus = Counter(_placement(spec, p) for p in removed)
    outputs = sorted(o for o in set(plus) | set(minus) if not o.startswith("NO PACKAGE"))
    per_output = ", ".join(f"{o} +{plus[o]} -{minus[o]}" for o in outputs) or "no change"
    found = [_finding(Level.INFO if outputs else Level.OK, diff, f"files per package: {per_output}")]
    homeless = [p for p in added if not LIBRARY.match(p) and _placement(spec, p).startswith("NO PACKAGE")]
    for path in homeless[:NAMED_FILES]:
        found.append(_finding(Level.ACTION, diff, f"new file {path} -> {_placement(spec, path)}"))
    if len(homeless) > NAMED_FILES:
        more = len(homeless) - NAMED_FILES
        found.append(_finding(Level.ACTION, diff, f"... and {more} more new files no package takes"))
    return found


def required_findings(platform: Platform, rows: list[Row], spec: SplitSpec, cuda: bool) -> list[Finding]:
    """Required spec rules no file of the new wheel matches: ``split stage`` would stop on them."""
    relpaths = [r.path.removeprefix("torch/") for r in rows if r.path.startswith("torch/")]
    return [
        Finding(SECTION, Level.ACTION, f"{platform.subdir}: required rule {pattern} matches no file")
        for pattern in spec.unmet_required(relpaths, cuda)
    ]
