"""The build pipeline's handlers on a wheel's files laid out as empty placeholders.

Each handler does to the placeholders what :class:`megabuild.pipeline.steps.RealBuild` (and the
install outputs' ``split install``) does to the built files, through the same typed split calls:
``pip install .`` lays the wheel out (the pytorch output: minus its ``wheel.exclude``), the magma
relink writes a new linalg library, ``split install`` also writes the conda-meta record conda would
(link-back's ``--link-installed`` reads it). What the steps print is not shown: their report lines
describe placeholders; a refusal becomes :class:`SplitStepFailed`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.pipeline.description import PIPELINE, Action, Handler, Step, Target, Wheel
from megabuild.split.install import plan_install
from megabuild.split.link_back import plan_link_back
from megabuild.split.stage import plan_stage
from megabuild.split.verify import verify

from .. import wincmd
from ..render import RenderedOutput
from .platforms import Platform
from .split_spec import SplitSpec
from .tools import Row

LINALG = "libtorch-cuda-linalg"
LINALG_LIBRARY = "lib/libtorch_cuda_linalg{ext}"  # what the magma pass relinks


class SplitStepFailed(Exception):
    """A split step refused: the split of this layout stops there."""


@dataclass(frozen=True)
class Layout:
    platform: Platform
    rows: list[Row]  # the files a conda build has (wheel-repair files left out)
    python: str
    cuda: bool
    config: str
    outputs: list[RenderedOutput]
    spec: SplitSpec

    @property
    def windows(self) -> bool:
        return self.platform.subdir.startswith("win-")

    @property
    def target(self) -> Target:
        return Target(self.platform.subdir, self.cuda)


@dataclass(frozen=True)
class Places:
    """The directories of one run: the top level's prefix, the output prefix, staging."""

    work: Path
    layout: Layout

    @property
    def blanks(self) -> Path:
        return self.work / "blanks"

    @property
    def staging(self) -> Path:
        return self.work / "staging"

    @property
    def prefix(self) -> Path:
        return self.work / "prefix"

    @property
    def magma_tree(self) -> Path:
        return self.work / "magma-linalg" / "torch"

    def site_packages(self, prefix: Path) -> Path:
        if self.layout.windows:
            return Path(wincmd.conda_test_env(prefix, self.layout.python)["SP_DIR"])
        return prefix / f"lib/python{self.layout.python}/site-packages"

    @property
    def top_site_packages(self) -> Path:
        return self.site_packages(self.work / "top")

    @property
    def prefix_site_packages(self) -> Path:
        return self.site_packages(self.prefix)


def lay_out(root: Path, rows: Sequence[Row], blanks: Path) -> None:
    """Every row as an empty placeholder: a hard link to one blank file per mode (12k links take
    a fraction of the time of 12k new files). Never write into one: they share their inode."""
    blank = {flag: blanks / ("blank-exe" if flag else "blank") for flag in (False, True)}
    blanks.mkdir(parents=True, exist_ok=True)
    for flag, path in blank.items():
        if not path.exists():
            path.touch(0o755 if flag else 0o644)
            path.chmod(0o755 if flag else 0o644)
    made: set[Path] = set()
    for row in rows:
        full = root / row.path
        if full.parent not in made:
            full.parent.mkdir(parents=True, exist_ok=True)
            made.add(full.parent)
        os.link(blank[row.executable], full)


def write_new(path: Path, data: bytes) -> None:
    """A new file (never through an existing placeholder's shared inode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def files_under(root: Path) -> set[str]:
    """Files and symlinks under ``root``, relative, ``/``-separated."""
    if not root.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink() or not p.is_dir()}


def staged_files(staging: Path) -> dict[str, set[str]]:
    """Files (and symlinks) per staged output, relative to the output's root."""
    return {out.name: files_under(out) for out in staging.iterdir()}


@dataclass
class PlaceholderBuild:
    """The pipeline's handlers for one layout. ``install`` says what the next install phase's
    ``split install`` installs where (the install outputs' scripts take it from their variant)."""

    layout: Layout
    places: Places
    install: tuple[str, Path] = ("libtorch", Path())
    staged: dict[str, set[str]] = field(default_factory=dict)  # staging after the top level
    wheel_exclude_problems: list[str] = field(default_factory=list)

    @property
    def spec(self) -> SplitSpec:
        return self.layout.spec

    def handlers(self) -> dict[Action, Handler]:
        return {
            Action.PIP_INSTALL: self.pip_install,
            Action.STAGE: self.stage,
            Action.MAGMA_RELINK: self.magma_relink,
            Action.STAGE_MAGMA: self.stage_magma,
            Action.VERIFY: self.verify,
            Action.INSTALL: self.split_install,
            Action.LINK_BACK: self.link_back,
        }

    def pip_install(self, step: Step) -> None:
        rows = self.layout.rows
        if step.wheel is Wheel.FULL:
            lay_out(self.places.top_site_packages, rows, self.places.blanks)
            return
        excluded = self.spec.wheel_excluded(row.path for row in rows)
        self._check_wheel_exclude(excluded)
        kept = [row for row in rows if row.path not in excluded]
        lay_out(self.places.prefix_site_packages, kept, self.places.blanks)

    def _check_wheel_exclude(self, excluded: set[str]) -> None:
        """What wheel.exclude leaves out is exactly what the top level moved out of pytorch."""
        default = self.spec.spec.default_output
        moved = {f"torch/{rel}" for name, files in self.staged.items() if name != default for rel in files}
        if excluded != moved:
            differ = sorted(excluded ^ moved)
            self.wheel_exclude_problems.append(
                f"wheel.exclude and the split disagree on {len(differ)} file(s): {differ[:5]}"
            )

    def stage(self, _step: Step) -> None:
        tree = self.places.top_site_packages / "torch"
        plan_stage(self.spec.spec, tree, self.places.staging, cuda=self.layout.cuda,
                   linalg_variant="nomagma").run()  # fmt: skip

    def magma_relink(self, _step: Step) -> None:
        library = self.places.magma_tree / LINALG_LIBRARY.format(ext=self.layout.platform.shlib_ext)
        library.parent.mkdir(parents=True, exist_ok=True)
        write_new(library, b"magma")

    def stage_magma(self, _step: Step) -> None:
        plan_stage(self.spec.spec, self.places.magma_tree, self.places.staging, cuda=self.layout.cuda,
                   linalg_variant="magma", only=[LINALG]).run()  # fmt: skip

    def verify(self, _step: Step) -> None:
        verify(self.spec.spec, staging=self.places.staging, cuda=self.layout.cuda)

    def split_install(self, _step: Step) -> None:
        output, prefix = self.install
        before = files_under(prefix)
        plan_install(self.spec.spec, output, self.places.staging, prefix).run()
        package = LINALG if output.startswith(LINALG) else output
        conda_meta_record(prefix, package, sorted(files_under(prefix) - before))

    def link_back(self, step: Step) -> None:
        plan_link_back(
            self.spec.spec,
            self.places.prefix,
            self.places.prefix_site_packages,
            python_tag=f"cpython-{self.layout.python.replace('.', '')}",
            drop_libtorch_headers=step.drop_libtorch_headers,
            link_installed=PIPELINE.installed_outputs(self.layout.target),
        ).run()


def conda_meta_record(prefix: Path, package: str, files: list[str]) -> None:
    """What conda writes for an installed package: ``conda-meta/<name>-<version>-<build>.json``."""
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    record = {"name": package, "version": "0", "build": "placeholder", "files": files}
    (meta / f"{package}-0-placeholder.json").write_text(json.dumps(record), encoding="utf-8")
