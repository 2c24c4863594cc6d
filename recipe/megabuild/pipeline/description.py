"""The build pipeline, written down once: the steps of every conda-build script, in order, with
the platforms each runs on.

``megabuild build top-level|pytorch`` runs :data:`PIPELINE` on the real build
(:mod:`megabuild.pipeline.steps`); the version-bump check (``scripts/feedstock/bump/split_run.py``)
runs the same object on a new upstream wheel's files laid out as empty placeholders. Both go through
:meth:`Pipeline.run`, which refuses a handler table that lacks a step or has one the pipeline does
not know: a step added here is a step both must run. Only the steps marked ``build_tree`` (they
need the real CMake tree: forwarded environment, cache, build state) are left out of a placeholder
run.

The per-platform rules, where they come from:

* Windows has no lazy CUDA linalg library (``BUILD_LAZY_CUDA_LINALG`` is Linux only: torch_cuda.dll
  links MAGMA itself), so no magma pass and no libtorch-cuda-linalg package; and no symlinks, so no
  link-back (torch adds ``Library\\bin`` to the DLL search path).
* Where ``split install`` puts each file (``Library/`` on Windows) is the split spec's
  ``install_roots``; the pipeline only says which outputs are installed.
* Every pytorch output packs only its Python-dependent files (``wheel.exclude``, :class:`Wheel`),
  and link-back links what the wheel left out to the installed packages' files (``--link-installed``:
  the outputs of the install phases that run for the target).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from megabuild.errors import MegabuildError


class Phase(enum.Enum):
    """One conda-build script; the value is its output's name."""

    TOP_LEVEL = "top-level"  # libtorch-split: build.sh / bld.bat, once
    LINALG = "libtorch-cuda-linalg"  # install_linalg.sh, once per with_magma
    LIBTORCH = "libtorch"  # install_libtorch.sh / .bat
    PYTORCH = "pytorch"  # build.sh / bld.bat, once per Python


class Action(enum.Enum):
    """What a step does; the value names the step in messages."""

    RECORD_ENV = "record forwarded env"
    PIP_INSTALL = "pip install"
    STAGE = "split stage"
    MAGMA_RELINK = "magma relink"
    STAGE_MAGMA = "split stage magma"
    VERIFY = "split verify"
    SAVE_CACHE = "cache save"
    SAVE_BUILD_STATE = "build-state save"
    CHECK_ENV = "check forwarded env"
    PREPARE_TREE = "prepare build tree"
    CHECK_TREE_KEPT = "check build tree kept"
    INSTALL = "split install"
    LINK_BACK = "split link-back"


@dataclass(frozen=True)
class Target:
    """What the rules look at: conda's target platform, CUDA or not, the megabuild variant flag."""

    target_platform: str
    cuda: bool
    megabuild: bool = True

    @property
    def windows(self) -> bool:
        return self.target_platform.startswith("win-")


class When(enum.Enum):
    """The platform rule of a step; the value says why."""

    ALWAYS = "every platform"
    CUDA_NOT_WINDOWS = "CUDA builds, not on Windows (torch_cuda.dll links MAGMA itself)"
    NOT_WINDOWS = "not on Windows (no symlinks; torch finds libtorch's DLLs in Library\\bin)"
    MEGABUILD = "megabuild on (the top level's Python reuses its own build)"

    def holds(self, target: Target) -> bool:
        if self is When.CUDA_NOT_WINDOWS:
            return target.cuda and not target.windows
        if self is When.NOT_WINDOWS:
            return not target.windows
        if self is When.MEGABUILD:
            return target.megabuild
        return True


class Wheel(enum.Enum):
    """What a ``pip install .`` packs."""

    FULL = "the whole wheel (the top level stages it)"
    PYTHON_ONLY = "wheel.exclude: only the Python-dependent files (libtorch's come from its package)"


@dataclass(frozen=True)
class Step:
    """One step of a phase: what it does, where it runs, and its settings."""

    action: Action
    when: When = When.ALWAYS
    build_tree: bool = False  # needs the real CMake build tree: not run on placeholders
    wheel: Wheel | None = None  # PIP_INSTALL: what it packs
    drop_libtorch_headers: bool = False  # LINK_BACK

    @property
    def name(self) -> str:
        return self.action.value


Handler = Callable[[Step], None]
STEP_MARK = "megabuild step: "  # how a build log announces each step (tests read the logs)


@dataclass(frozen=True)
class Pipeline:
    phases: tuple[tuple[Phase, tuple[Step, ...]], ...]

    def all_steps(self, phase: Phase) -> tuple[Step, ...]:
        return dict(self.phases)[phase]

    def steps(self, phase: Phase, target: Target, *, placeholders: bool = False) -> tuple[Step, ...]:
        """The steps ``phase`` runs for ``target``, in order (on placeholders: no build-tree steps)."""
        return tuple(
            s for s in self.all_steps(phase) if s.when.holds(target) and not (placeholders and s.build_tree)
        )

    def actions(self, *, placeholders: bool = False) -> frozenset[Action]:
        """Every action of the pipeline (a handler table may hold no other)."""
        return frozenset(
            s.action for _, steps in self.phases for s in steps if not (placeholders and s.build_tree)
        )

    def installed_outputs(self, target: Target) -> tuple[str, ...]:
        """The packages the install phases put into the pytorch output's host env (for link-back)."""
        return tuple(p.value for p in (Phase.LIBTORCH, Phase.LINALG) if self.steps(p, target))

    def run(
        self,
        phase: Phase,
        target: Target,
        handlers: Mapping[Action, Handler],
        *,
        placeholders: bool = False,
        announce: Callable[[str], None] | None = None,
    ) -> list[Step]:
        """Run ``phase``'s steps through ``handlers``; a failure is one error naming phase and step."""
        needed = {s.action for s in self.all_steps(phase) if not (placeholders and s.build_tree)}
        missing = sorted(a.value for a in needed - set(handlers))
        unknown = sorted(a.value for a in set(handlers) - self.actions(placeholders=placeholders))
        if missing or unknown:
            raise MegabuildError(
                f"{phase.value}: the handlers do not match the pipeline "
                f"(missing: {missing or 'none'}; not in it: {unknown or 'none'})"
            )
        ran = []
        for step in self.steps(phase, target, placeholders=placeholders):
            if announce is not None:
                announce(f"{STEP_MARK}{phase.value}: {step.name}")
            try:
                handlers[step.action](step)
            except MegabuildError as exc:
                raise MegabuildError(f"{phase.value}: {step.name}: {exc}") from None
            ran.append(step)
        return ran


PIPELINE = Pipeline(
    (
        (
            Phase.TOP_LEVEL,
            (
                Step(Action.RECORD_ENV, build_tree=True),
                Step(Action.PIP_INSTALL, wheel=Wheel.FULL),
                Step(Action.STAGE),  # the nomagma linalg variant
                Step(Action.MAGMA_RELINK, When.CUDA_NOT_WINDOWS),
                Step(Action.STAGE_MAGMA, When.CUDA_NOT_WINDOWS),
                Step(Action.VERIFY),
                Step(Action.SAVE_CACHE, build_tree=True),  # the pristine cache every Python starts from
                Step(Action.SAVE_BUILD_STATE, When.MEGABUILD, build_tree=True),
            ),
        ),
        (Phase.LINALG, (Step(Action.INSTALL, When.CUDA_NOT_WINDOWS),)),
        (Phase.LIBTORCH, (Step(Action.INSTALL),)),
        (
            Phase.PYTORCH,
            (
                Step(Action.CHECK_ENV, build_tree=True),
                Step(Action.PREPARE_TREE, build_tree=True),
                Step(Action.PIP_INSTALL, wheel=Wheel.PYTHON_ONLY),
                Step(Action.CHECK_TREE_KEPT, build_tree=True),
                Step(Action.LINK_BACK, When.NOT_WINDOWS, drop_libtorch_headers=True),
            ),
        ),
    )
)
