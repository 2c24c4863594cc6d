"""The build pipeline's handlers on a wheel's tree laid out from a :class:`~.layout.TreeSource`.

Each handler does to the laid-out files what :class:`megabuild.pipeline.steps.RealBuild` does to
the built ones, through the same typed split calls: ``pip install .`` lays the wheel out (the
pytorch output: minus its ``wheel.exclude``), the magma relink writes a new linalg library (what the
source says it is: placeholder bytes, or a real wheel's one library), ``split install`` also writes
the conda-meta record conda would (link-back's ``--link-installed`` reads it). Which output a script
run installs, and which linalg variant, is the :class:`ScriptRun` the pipeline gives (conda-build
gives the real scripts the same through ``PKG_NAME`` and ``with_magma``). What the steps print goes
to ``say`` when one is given (a placeholder tree's lines describe placeholders: none is given).

:func:`packed` reads what each package of a run holds from what the procedure left: libtorch's and
each linalg variant's files are their conda-meta records, pytorch's the rest of its prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from megabuild.model import LINALG, LinalgVariant
from megabuild.pipeline.description import PIPELINE, Action, Handler, Phase, ScriptRun, Step, Target, Wheel
from megabuild.split.conda_meta import installed_files
from megabuild.split.install import plan_install
from megabuild.split.link_back import plan_link_back
from megabuild.split.stage import plan_stage
from megabuild.split.verify import verify

from .. import wincmd
from .layout import Layout
from .split_spec import SplitSpec

LINALG_LIBRARY = "lib/libtorch_cuda_linalg{ext}"  # what the magma pass relinks


class SplitStepFailed(Exception):
    """A split step refused: the split of this layout stops there."""


def target_of(layout: Layout) -> Target:
    return Target(layout.platform.subdir, layout.cuda)


@dataclass(frozen=True)
class Places:
    """The directories of one run: the top level's prefix, each output's prefix, staging."""

    work: Path
    layout: Layout

    @property
    def staging(self) -> Path:
        return self.work / "staging"

    @property
    def prefix(self) -> Path:
        """The prefix of libtorch, pytorch and the nomagma linalg variant (their host/test env)."""
        return self.work / "prefix"

    def prefix_of(self, run: ScriptRun) -> Path:
        """Where a script run installs: the magma variant into a test env of its own."""
        if run.linalg_variant is LinalgVariant.MAGMA:
            return self.work / f"prefix-{run.linalg_variant.staged_name}"
        return self.prefix

    @property
    def magma_tree(self) -> Path:
        return self.work / "magma-linalg" / "torch"

    def site_packages(self, prefix: Path) -> Path:
        if self.layout.platform.windows:
            return Path(wincmd.conda_test_env(prefix, self.layout.python.version)["SP_DIR"])
        return prefix / f"lib/python{self.layout.python.name}/site-packages"

    @property
    def top_site_packages(self) -> Path:
        return self.site_packages(self.work / "top")

    @property
    def prefix_site_packages(self) -> Path:
        return self.site_packages(self.prefix)


def files_under(root: Path) -> set[str]:
    """Files and symlinks under ``root``, relative, ``/``-separated."""
    if not root.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink() or not p.is_dir()}


def staged_files(staging: Path) -> dict[str, set[str]]:
    """Files (and symlinks) per staged output, relative to the output's root."""
    return {out.name: files_under(out) for out in staging.iterdir()}


@dataclass
class TreeBuild:
    """The pipeline's handlers for one layout; :meth:`handlers` binds them to one script run."""

    layout: Layout
    places: Places
    say: Callable[[str], None] | None = None  # where the steps' report lines go (none: dropped)
    staged: dict[str, set[str]] = field(default_factory=dict)  # staging after the top level
    wheel_exclude_problems: list[str] = field(default_factory=list)

    def _said(self, lines: list[str]) -> None:
        if self.say is not None:
            for line in lines:
                self.say(line)

    @property
    def spec(self) -> SplitSpec:
        return self.layout.spec

    def handlers(self, run: ScriptRun) -> dict[Action, Handler]:
        return {
            Action.PIP_INSTALL: self.pip_install,
            Action.STAGE: self.stage,
            Action.MAGMA_RELINK: self.magma_relink,
            Action.STAGE_MAGMA: self.stage_magma,
            Action.VERIFY: self.verify,
            Action.INSTALL: partial(self.split_install, run),
            Action.LINK_BACK: self.link_back,
        }

    def pip_install(self, step: Step) -> None:
        rows = self.layout.rows
        scratch = self.places.work / "source"
        if step.wheel is Wheel.FULL:  # only staged, never packed as Python: no bytecode
            self.layout.source.lay_out(rows, self.places.top_site_packages, scratch)
            return
        excluded = self.spec.wheel_excluded(row.path for row in rows)
        self._check_wheel_exclude(excluded)
        kept = [row for row in rows if row.path not in excluded]
        self.layout.source.lay_out(kept, self.places.prefix_site_packages, scratch, compile_bytecode=True)

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
        planned = plan_stage(self.spec.spec, tree, self.places.staging, cuda=self.layout.cuda,
                             linalg_variant=LinalgVariant.NOMAGMA.value)  # fmt: skip
        self._said(planned.run().lines())

    def magma_relink(self, _step: Step) -> None:
        library = LINALG_LIBRARY.format(ext=self.layout.platform.shlib_ext)
        nomagma = self.places.staging / LinalgVariant.NOMAGMA.staged_name / library
        self._said([self.layout.source.relink_linalg(nomagma, self.places.magma_tree / library)])

    def stage_magma(self, _step: Step) -> None:
        places = self.places
        planned = plan_stage(self.spec.spec, places.magma_tree, places.staging, cuda=self.layout.cuda,
                             linalg_variant=LinalgVariant.MAGMA.value, only=[LINALG])  # fmt: skip
        self._said(planned.run().lines())

    def verify(self, _step: Step) -> None:
        self._said(verify(self.spec.spec, staging=self.places.staging, cuda=self.layout.cuda).lines())

    def split_install(self, run: ScriptRun, _step: Step) -> None:
        prefix = self.places.prefix_of(run)
        before = files_under(prefix)
        variant = run.linalg_variant.value if run.linalg_variant is not None else None
        output = run.phase.output
        planned = plan_install(self.spec.spec, output, self.places.staging, prefix, linalg_variant=variant)
        self._said(planned.run().lines())
        conda_meta_record(prefix, output, sorted(files_under(prefix) - before))

    def link_back(self, step: Step) -> None:
        planned = plan_link_back(
            self.spec.spec,
            self.places.prefix,
            self.places.prefix_site_packages,
            python_tag=self.layout.python.cache_tag,
            drop_libtorch_headers=step.drop_libtorch_headers,
            link_installed=PIPELINE.installed_outputs(target_of(self.layout)),
        )
        self._said(planned.run().lines())


def conda_meta_record(prefix: Path, package: str, files: list[str]) -> None:
    """What conda writes for an installed package: ``conda-meta/<name>-<version>-<build>.json``."""
    meta = prefix / "conda-meta"
    meta.mkdir(parents=True, exist_ok=True)
    record = {"name": package, "version": "0", "build": "placeholder", "files": files}
    (meta / f"{package}-0-placeholder.json").write_text(json.dumps(record), encoding="utf-8")


@dataclass(frozen=True)
class Packed:
    """What one script run's package holds: ``files``, relative to ``root`` (its prefix)."""

    run: ScriptRun
    root: Path
    files: tuple[str, ...]


def packed(layout: Layout, places: Places) -> list[Packed]:
    """What each package of a finished run holds, from what the procedure left: libtorch's and
    each linalg variant's files are the conda-meta records ``split install`` wrote in their
    prefixes; pytorch's are every other file of its prefix (what its pip install and link-back
    added, as conda-build packs a host prefix's new files)."""
    found: list[Packed] = []
    installed: set[str] = set()
    for run in PIPELINE.script_runs(target_of(layout)):
        prefix = places.prefix_of(run)
        if run.phase is Phase.TOP_LEVEL:
            continue
        if run.phase is Phase.PYTORCH:
            rest = {rel for rel in files_under(prefix) if not rel.startswith("conda-meta/")} - installed
            found.append(Packed(run, prefix, tuple(sorted(rest))))
            continue
        files = tuple(sorted(installed_files(prefix, run.phase.output)))
        if prefix == places.prefix:
            installed.update(files)
        found.append(Packed(run, prefix, files))
    return found
