"""The recipe's build pipeline (:data:`megabuild.pipeline.description.PIPELINE`) on a real wheel.

:class:`WheelBuild` has one handler per step that does not need the CMake tree, each the same typed
split call ``megabuild build`` makes (``stage``, ``verify``, ``install``, ``link-back``); the
backend's ``pip install .`` is :func:`feedstock.rehearsal.tree.lay_out_wheel`. What comes out is
one directory per package: libtorch's and each linalg variant's install prefix, and the files the
pytorch step added to its host prefix (which holds libtorch and linalg as conda would have put them
there, with their ``conda-meta`` records: link-back's ``--link-installed`` reads them).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.model import LIBTORCH, LINALG, LinalgVariant
from megabuild.pipeline.description import PIPELINE, Action, Handler, Phase, Step, Target, Wheel
from megabuild.pipeline.wheel_settings import INSTALL_DIR, libtorch_excludes
from megabuild.split.install import plan_install
from megabuild.split.link_back import plan_link_back
from megabuild.split.spec import Spec, compile_patterns
from megabuild.split.stage import plan_stage
from megabuild.split.verify import verify

from ..errors import FeedstockError
from .tree import lay_out_wheel

LINALG_LIBRARY = "lib/libtorch_cuda_linalg.so"


class SplitFailed(FeedstockError):
    """A pipeline step refused the real files (the message names phase and step)."""


@dataclass(frozen=True)
class Places:
    work: Path
    python_dir: str  # lib/python3.12

    @property
    def top(self) -> Path:
        return self.work / "top-level-prefix"

    @property
    def staging(self) -> Path:
        return self.work / "staging"

    @property
    def magma_tree(self) -> Path:
        return self.work / "magma-linalg" / INSTALL_DIR

    @property
    def host(self) -> Path:
        return self.work / "pytorch-host-prefix"

    def installed(self, name: str) -> Path:
        return self.work / "installed" / name

    def site_packages(self, prefix: Path) -> Path:
        return prefix / self.python_dir / "site-packages"


def files_under(root: Path) -> set[str]:
    if not root.is_dir():
        return set()
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_symlink() or not p.is_dir()}


def link_files(src: Path, files: set[str], dest: Path) -> None:
    """What conda does when it links a package into an env: hard links (symlinks stay symlinks)."""
    for rel in sorted(files):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = src / rel
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            os.link(source, target)


@dataclass
class WheelBuild:
    """The pipeline's handlers on one wheel. ``install`` names what the next install phase's
    ``split install`` installs (the staged output, as its conda-build script would)."""

    spec: Spec
    wheel: Path
    python: Path  # the megabuild's CPython (runs pip)
    python_tag: str  # cpython-312
    target: Target
    places: Places
    replaced: Mapping[str, bytes]  # wheel member -> patched bytes
    install: str = LIBTORCH
    lines: list[str] = field(default_factory=list)  # what the steps reported
    pytorch_files: set[str] = field(default_factory=set)

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
        if step.wheel is Wheel.FULL:
            lay_out_wheel(
                self.wheel,
                self.places.top,
                self.python,
                replaced=self.replaced,
                keep=lambda _name: True,
                compile_bytecode=False,
            )
            return
        excluded = compile_patterns(libtorch_excludes(self.spec))
        host = self.places.host
        before = files_under(host)
        lay_out_wheel(
            self.wheel,
            host,
            self.python,
            replaced=self.replaced,
            keep=lambda name: not excluded.match(name),
            compile_bytecode=True,
        )
        self.pytorch_files = files_under(host) - before

    def stage(self, _step: Step) -> None:
        tree = self.places.site_packages(self.places.top) / INSTALL_DIR
        planned = plan_stage(
            self.spec,
            tree,
            self.places.staging,
            cuda=self.target.cuda,
            linalg_variant=LinalgVariant.NOMAGMA.value,
        )
        self.lines += planned.run().lines()

    def magma_relink(self, _step: Step) -> None:
        """A wheel has one linalg library (upstream links MAGMA into it statically): both variants
        are that library, so the magma pass's staging and packaging still run on real bytes."""
        nomagma = self.places.staging / LinalgVariant.NOMAGMA.staged_name / LINALG_LIBRARY
        target = self.places.magma_tree / LINALG_LIBRARY
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(nomagma, target)
        self.lines.append(
            f"magma relink: not rehearsed (one linalg library in a wheel); copied {LINALG_LIBRARY}"
        )

    def stage_magma(self, _step: Step) -> None:
        planned = plan_stage(
            self.spec,
            self.places.magma_tree,
            self.places.staging,
            cuda=self.target.cuda,
            linalg_variant=LinalgVariant.MAGMA.value,
            only=[LINALG],
        )
        self.lines += planned.run().lines()

    def verify(self, _step: Step) -> None:
        self.lines += verify(self.spec, staging=self.places.staging, cuda=self.target.cuda).lines()

    def split_install(self, _step: Step) -> None:
        variant = self.install.removeprefix(f"{LINALG}-") if self.install.startswith(LINALG) else None
        output = LINALG if variant else self.install
        prefix = self.places.installed(self.install)
        prefix.mkdir(parents=True, exist_ok=True)
        self.lines += (
            plan_install(self.spec, output, self.places.staging, prefix, linalg_variant=variant).run().lines()
        )

    def link_back(self, step: Step) -> None:
        host = self.places.host
        before = files_under(host)
        planned = plan_link_back(
            self.spec,
            host,
            self.places.site_packages(host),
            python_tag=self.python_tag,
            drop_libtorch_headers=step.drop_libtorch_headers,
            link_installed=PIPELINE.installed_outputs(self.target),
        )
        self.lines += planned.run().lines()
        after = files_under(host)
        self.pytorch_files = (self.pytorch_files & after) | (after - before)

    def fill_host(self, host_outputs: list[tuple[str, str]]) -> None:
        """The pytorch output's host prefix: the installed packages, linked as conda links them,
        each with its conda-meta record. ``host_outputs``: (installed dir name, package name)."""
        host = self.places.host
        for installed, package in host_outputs:
            files = files_under(self.places.installed(installed))
            link_files(self.places.installed(installed), files, host)
            meta = host / "conda-meta"
            meta.mkdir(parents=True, exist_ok=True)
            record = {"name": package, "version": "0", "build": "rehearsal", "files": sorted(files)}
            (meta / f"{package}-0-rehearsal.json").write_text(json.dumps(record), encoding="utf-8")


def run_pipeline(build: WheelBuild, say: Callable[[str], None]) -> None:
    """Every phase of :data:`PIPELINE` in its order: the top level, each linalg variant, libtorch,
    then pytorch in a host prefix holding libtorch and the magma variant (what the solver picks)."""
    target = build.target
    handlers = build.handlers()
    try:
        for phase, _steps in PIPELINE.phases:
            if phase is Phase.LINALG:
                for variant in LinalgVariant:
                    build.install = variant.staged_name
                    _run(phase, target, handlers, say)
                continue
            if phase is Phase.LIBTORCH:
                build.install = LIBTORCH
            if phase is Phase.PYTORCH:
                linalg = (
                    [(LinalgVariant.MAGMA.staged_name, LINALG)]
                    if PIPELINE.steps(Phase.LINALG, target)
                    else []
                )
                build.fill_host([(LIBTORCH, LIBTORCH), *linalg])
            _run(phase, target, handlers, say)
    except MegabuildError as exc:
        raise SplitFailed(str(exc)) from None


def _run(phase: Phase, target: Target, handlers: dict[Action, Handler], say: Callable[[str], None]) -> None:
    ran = PIPELINE.run(phase, target, handlers, placeholders=True, announce=say)
    if not ran:
        say(f"{phase.value}: no step for {target.target_platform}")
