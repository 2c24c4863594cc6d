"""What the split procedure (``split_run``) takes: one wheel's layout, its config, and where the
files of its ``torch/`` tree come from.

The source of the tree is pluggable (:class:`TreeSource`):

* :class:`Placeholders`: empty files laid out from a listing's rows (tests/data, or a new wheel's
  listing in the version-bump check); every file of a mode shares one inode.
* :class:`UnpackedWheel`: the files of a real upstream wheel unpacked into a directory, hard-linked
  (copied across file systems) into the trees the pipeline's ``pip install .`` steps lay out.
* ``feedstock.rehearsal.tree.DerivedWheel``: the wheel the build would have packed, derived from a
  real upstream wheel and installed by pip (the rehearsal on real binaries).

The source also says what the magma pass's relink leaves (:meth:`TreeSource.relink_linalg`):
placeholder bytes, or, in a real wheel (one linalg library, MAGMA linked in statically), that
library again.

:func:`layout_for` makes the :class:`Layout` of either from the recipe (its rendered config and
its split spec); :func:`listing_layout` does it for a listing in tests/data, named as its README says.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from megabuild.model import LinalgVariant, PlatformFacts
from megabuild.pipeline.description import Action

from ..configs import short_alias
from ..errors import FeedstockError
from ..render import RenderedOutput
from ..wheel_files import Row, read_listing
from .platforms import BY_LISTING_TAG
from .python_builds import PythonBuild
from .recipe import Recipe, config_for, cuda_of, rendered
from .split_spec import SpecUnavailable, SplitSpec


class TreeSource(Protocol):
    """Where the files of the wheel's tree come from."""

    def listed(self) -> list[Row]:
        """Every file of the wheel outside its ``.dist-info``: ``torch/lib/libc10.so`` and so on."""
        ...

    def lay_out(
        self, rows: Sequence[Row], site_packages: Path, scratch: Path, *, compile_bytecode: bool = False
    ) -> None:
        """Put ``rows`` under ``site_packages`` (``scratch``: a directory of the run the source may
        keep files in; ``compile_bytecode``: pip compiles the Python files, as for a package that
        ships them; a source with nothing to compile ignores it)."""
        ...

    def relink_linalg(self, nomagma: Path, target: Path) -> str:
        """Write what the magma pass's relink leaves at ``target`` (a new file), given the staged
        nomagma library ``nomagma``; returns one line saying what it wrote."""
        ...


def _parent_made(full: Path, made: set[Path]) -> None:
    if full.parent not in made:
        full.parent.mkdir(parents=True, exist_ok=True)
        made.add(full.parent)


def write_new(path: Path, data: bytes) -> None:
    """A new file (never through an existing placeholder's shared inode)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def copy_linalg(nomagma: Path, target: Path) -> str:
    """A real wheel's relink: its one linalg library (upstream links MAGMA into it statically), so
    both variants are that library and the magma pass stages and packs real bytes."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(nomagma, target)
    step = Action.MAGMA_RELINK.value
    return f"{step}: not rehearsed (one linalg library in a wheel); copied {nomagma.name}"


@dataclass(frozen=True)
class Placeholders:
    """Source (a): a listing's rows as empty placeholders."""

    rows: tuple[Row, ...]

    def listed(self) -> list[Row]:
        return list(self.rows)

    def lay_out(
        self, rows: Sequence[Row], site_packages: Path, scratch: Path, *, compile_bytecode: bool = False
    ) -> None:
        """Every row as a hard link to one blank file per mode (12k links take a fraction of the
        time of 12k new files), kept in ``scratch``. Never write into one: they share their inode."""
        blanks = scratch
        blank = {flag: blanks / ("blank-exe" if flag else "blank") for flag in (False, True)}
        blanks.mkdir(parents=True, exist_ok=True)
        for flag, path in blank.items():
            if not path.exists():
                path.touch(0o755 if flag else 0o644)
                path.chmod(0o755 if flag else 0o644)
        made: set[Path] = set()
        for row in rows:
            full = site_packages / row.path
            _parent_made(full, made)
            os.link(blank[row.executable], full)

    def relink_linalg(self, nomagma: Path, target: Path) -> str:
        write_new(target, LinalgVariant.MAGMA.value.encode())
        return f"{Action.MAGMA_RELINK.value}: a placeholder {target.name}"


@dataclass(frozen=True)
class UnpackedWheel:
    """Source (b): a real wheel unpacked into ``root`` (``root/torch/lib/...``, its ``.dist-info``
    beside). Its files are hard-linked into the laid-out trees, where the split moves and replaces
    them (never writes into them); unpack a wheel for this only, since a mode the split sets is
    set on ``root``'s file too."""

    root: Path

    def listed(self) -> list[Row]:
        if not self.root.is_dir():
            raise FeedstockError(f"{self.root}: no unpacked wheel there")
        rows = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root).as_posix()
            top = rel.split("/", 1)[0]
            if path.is_dir() or "/" not in rel or top.endswith((".dist-info", ".data")):
                continue
            mode = path.lstat().st_mode
            rows.append(
                Row(rel, path.lstat().st_size, bool(mode & (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)))
            )
        return sorted(rows)  # by path string, as listings are

    def lay_out(
        self, rows: Sequence[Row], site_packages: Path, scratch: Path, *, compile_bytecode: bool = False
    ) -> None:
        made: set[Path] = set()
        for row in rows:
            full = site_packages / row.path
            _parent_made(full, made)
            try:
                os.link(self.root / row.path, full)
            except OSError:  # another file system
                shutil.copy2(self.root / row.path, full)

    def relink_linalg(self, nomagma: Path, target: Path) -> str:
        return copy_linalg(nomagma, target)


@dataclass(frozen=True)
class Layout:
    """One wheel's tree and what the recipe makes of it."""

    platform: PlatformFacts
    source: TreeSource
    rows: tuple[Row, ...]
    """The files a conda build has: the source's, without upstream's wheel-repair files."""
    python: PythonBuild
    cuda: bool
    config: str
    """The config (``.ci_support`` short alias) whose rendered outputs are checked."""
    outputs: tuple[RenderedOutput, ...]
    spec: SplitSpec


def conda_rows(platform: PlatformFacts, rows: Sequence[Row]) -> tuple[Row, ...]:
    """The wheel's files a conda build has: without the wheel-repair files."""
    return tuple(r for r in rows if not any(fnmatch.fnmatch(r.path, g) for g in platform.wheel_repair))


def layout_for(
    recipe: Recipe, platform: PlatformFacts, source: TreeSource, python: PythonBuild, cuda: str | None
) -> Layout:
    """The layout of a wheel of ``platform`` for ``python`` (``cuda``: ``13.0``, or ``None`` for a
    CPU wheel), checked against the recipe's nearest config; no config or spec is bad input."""
    config = config_for(recipe.configs, platform.subdir, cuda, python.version)
    if config is None:
        raise FeedstockError(f"{platform.subdir}: no config of the recipe builds {'CUDA' if cuda else 'CPU'}")
    try:
        spec = SplitSpec(recipe.spec_path, platform.subdir)
    except SpecUnavailable as exc:
        raise FeedstockError(str(exc)) from None
    outputs = tuple(rendered(recipe, config))
    alias = short_alias(config, list(recipe.configs))
    rows = conda_rows(platform, source.listed())
    return Layout(platform, source, rows, python, cuda is not None, alias, outputs, spec)


def listing_layout(recipe: Recipe, listing: Path) -> Layout:
    """A listing of tests/data (``torch-2.14.1-cp314t-linux_x86_64-cu130-files.tsv``) as a layout."""
    parts = listing.name.removesuffix("-files.tsv").split("-")
    if len(parts) not in (4, 5) or parts[0] != "torch" or parts[3] not in BY_LISTING_TAG:
        raise FeedstockError(
            f"{listing.name}: not named torch-<version>-<cpXY[t]>-<platform>[-<cuXYZ>]-files.tsv"
        )
    python = PythonBuild.from_abi_tag(parts[2])
    cuda = cuda_of(parts[4]) if len(parts) == 5 else None
    source = Placeholders(tuple(read_listing(listing)))
    return layout_for(recipe, BY_LISTING_TAG[parts[3]], source, python, cuda)
