"""The build pipeline, written down once: the steps of every conda-build script, in order, with
the platforms each runs on.

``megabuild build <output>`` (every conda-build script) runs :data:`PIPELINE` on the real build
(:mod:`megabuild.pipeline.steps`); the version-bump check (``scripts/feedstock/split_check/split_run.py``)
runs the same object on a new upstream wheel's files laid out as empty placeholders. Both go through
:meth:`Pipeline.run`, which refuses a handler table that lacks a step or has one the pipeline does
not know: a step added here is a step both must run. Only the steps marked ``build_tree`` (they
need the real CMake tree: forwarded environment, cache, build state) are left out of a placeholder
run.

Every conda-build script is one phase: ``megabuild build <output>`` (:class:`Phase`, the output
from :mod:`megabuild.model`). The per-platform rules (:class:`When`) read :mod:`megabuild.model`'s
:class:`~megabuild.model.PlatformFacts`:

* ``lazy_linalg``: only there do CUDA builds have the lazily loaded linalg library, so a magma pass
  and a libtorch-cuda-linalg package (Windows: torch_cuda.dll links MAGMA itself);
* ``symlinks``: only there does the pytorch output link libtorch's files back (Windows: torch adds
  ``Library\\bin`` to the DLL search path).

Where ``split install`` puts each file (``Library/`` on Windows) is the split spec's
``install_roots``; the pipeline only says which outputs are installed. Every pytorch output packs
only its Python-dependent files (``wheel.exclude``, :class:`Wheel`), and link-back links what the
wheel left out to the installed packages' files (``--link-installed``: the outputs of the install
phases that run for the target).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from megabuild import model
from megabuild.errors import MegabuildError


class Phase(enum.Enum):
    """One conda-build script; the value names the phase in messages, :attr:`output` says whose."""

    TOP_LEVEL = "top-level"  # build.sh / bld.bat, once
    LINALG = "linalg install"  # install_linalg.sh, once per with_magma
    LIBTORCH = "C++ install"  # install_libtorch.sh / .bat
    PYTORCH = "per-Python build"  # build.sh / bld.bat, once per Python

    @property
    def output(self) -> str:
        """The conda-build output (``PKG_NAME``) whose script runs this phase."""
        return _OUTPUT_OF[self]

    @classmethod
    def of_output(cls, name: str) -> Phase:
        for phase, output in _OUTPUT_OF.items():
            if output == name:
                return phase
        raise MegabuildError(f"no build phase for output {name!r} ({', '.join(_OUTPUT_OF.values())})")


_OUTPUT_OF = {
    Phase.TOP_LEVEL: model.TOP_LEVEL,
    Phase.LINALG: model.LINALG,
    Phase.LIBTORCH: model.LIBTORCH,
    Phase.PYTORCH: model.PYTORCH,
}


class Action(enum.Enum):
    """What a step does; the value names the step in messages."""

    RECORD_ENV = "record forwarded env"
    RECORD_PYTHON = "record top-level Python"
    PIP_INSTALL = "pip install"
    STAGE = "split stage"
    MAGMA_RELINK = "magma relink"
    STAGE_MAGMA = "split stage magma"
    VERIFY = "split verify"
    SAVE_CACHE = "cache save"
    SAVE_BUILD_STATE = "build-state save"
    CLEAR_PREFIX = "clear the prefix"
    CHECK_ENV = "check forwarded env"
    PREPARE_TREE = "prepare build tree"
    CHECK_TREE_KEPT = "check build tree kept"
    INSTALL = "split install"
    LINK_BACK = "split link-back"


@dataclass(frozen=True)
class Target:
    """What the rules look at: conda's target platform (its :class:`~megabuild.model.PlatformFacts`)
    and CUDA or not."""

    target_platform: str
    cuda: bool

    @property
    def platform(self) -> model.PlatformFacts:
        return model.platform(self.target_platform)

    @property
    def windows(self) -> bool:
        return self.platform.windows


class When(enum.Enum):
    """The platform rule of a step; the value says why."""

    ALWAYS = "every platform"
    LAZY_LINALG = "CUDA builds where the platform has the lazy linalg library (PlatformFacts.lazy_linalg)"
    LINK_BACK = "platforms with symlinks (PlatformFacts.symlinks)"

    def holds(self, target: Target) -> bool:
        if self is When.LAZY_LINALG:
            return target.cuda and target.platform.lazy_linalg
        if self is When.LINK_BACK:
            return target.platform.symlinks
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


@dataclass(frozen=True)
class ScriptRun:
    """One run of a conda-build script: its phase and, for the linalg output, the variant that
    conda-build gives it (``with_magma``)."""

    phase: Phase
    linalg_variant: model.LinalgVariant | None = None

    @property
    def label(self) -> str:
        variant = f" ({self.linalg_variant.value})" if self.linalg_variant is not None else ""
        return f"{self.phase.value}{variant}"


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

    def script_runs(self, target: Target) -> tuple[ScriptRun, ...]:
        """The script runs of one config and one Python, in the pipeline's order: the linalg
        output's once per variant, every phase with no step for ``target`` left out (no output)."""
        runs: list[ScriptRun] = []
        for phase, _steps in self.phases:
            if not self.steps(phase, target):
                continue
            if phase is Phase.LINALG:
                runs += [ScriptRun(phase, variant) for variant in model.LinalgVariant]
            else:
                runs.append(ScriptRun(phase))
        return tuple(runs)

    def installed_outputs(self, target: Target) -> tuple[str, ...]:
        """The packages the install phases put into the pytorch output's host env (for link-back)."""
        return tuple(p.output for p in (Phase.LIBTORCH, Phase.LINALG) if self.steps(p, target))

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
                Step(Action.RECORD_PYTHON, build_tree=True),  # the megabuild Python, for every output
                Step(Action.PIP_INSTALL, wheel=Wheel.FULL),
                Step(Action.STAGE),  # the nomagma linalg variant
                Step(Action.MAGMA_RELINK, When.LAZY_LINALG),
                Step(Action.STAGE_MAGMA, When.LAZY_LINALG),
                Step(Action.VERIFY),
                Step(Action.SAVE_CACHE, build_tree=True),  # the pristine cache every Python starts from
                Step(Action.SAVE_BUILD_STATE, build_tree=True),
                # conda-build copies what is left into every output's env (not on placeholders: a
                # rehearsal's prefix is no conda-build host env)
                Step(Action.CLEAR_PREFIX, build_tree=True),
            ),
        ),
        (Phase.LINALG, (Step(Action.INSTALL, When.LAZY_LINALG),)),
        (Phase.LIBTORCH, (Step(Action.INSTALL),)),
        (
            Phase.PYTORCH,
            (
                Step(Action.CHECK_ENV, build_tree=True),
                Step(Action.PREPARE_TREE, build_tree=True),
                Step(Action.PIP_INSTALL, wheel=Wheel.PYTHON_ONLY),
                Step(Action.CHECK_TREE_KEPT, build_tree=True),
                Step(Action.LINK_BACK, When.LINK_BACK, drop_libtorch_headers=True),
            ),
        ),
    )
)
