"""The pipeline's steps on the real build: the top level (libtorch once) and each pytorch output.

:data:`~megabuild.pipeline.description.PIPELINE` says which steps run, in which order, on which
platform; :class:`RealBuild` has one handler per step, each a typed call into the split, cache,
build-state and magma code. A :class:`MegabuildError` raised in a step reaches the command line
once, naming the phase and the step (``megabuild: error: top-level: split stage: ...``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from megabuild.buildstate import restore as buildstate_restore
from megabuild.buildstate import snapshot
from megabuild.cache import store
from megabuild.cache.restore import PythonSwap, restore
from megabuild.errors import MegabuildError
from megabuild.magma import replay
from megabuild.model import LIBTORCH, LINALG, LinalgVariant
from megabuild.pipeline import (
    forwarded_env,
    frontend,
    prefix_clear,
    rebuild_guard,
    skbuild_state,
    telemetry,
    top_level_record,
    wheel_settings,
)
from megabuild.pipeline.description import PIPELINE, Action, Handler, Phase, Step, Wheel
from megabuild.pipeline.options import BuildOptions
from megabuild.split.install import plan_install
from megabuild.split.link_back import plan_link_back
from megabuild.split.spec import Spec, load_spec
from megabuild.split.stage import plan_stage
from megabuild.split.verify import verify

FORWARDED_RECORD = forwarded_env.RECORD_NAME
MAGMA_DEFINES = ["MAGMA_V2"]


def _announce(line: str) -> None:
    print(line, flush=True)


def _say(lines: list[str]) -> None:
    print("\n".join(lines), flush=True)


class RealBuild:
    """The handlers of every pipeline step, on conda-build's work dir and prefix."""

    def __init__(
        self, opts: BuildOptions, env: Mapping[str, str], phase: Phase, *, full_wheel: bool = False
    ) -> None:
        self.opts = opts
        self.env = env
        self.phase = phase
        self.full_wheel = full_wheel  # benchmarks: pack libtorch into every pytorch wheel too
        self.spec: Spec = load_spec(opts.split_spec, opts.target_platform)

    def handlers(self) -> dict[Action, Handler]:
        """Every step of `megabuild build`, whichever output's script runs it."""
        return {
            Action.RECORD_ENV: self.record_env,
            Action.RECORD_PYTHON: self.record_python,
            Action.PIP_INSTALL: self.pip_install,
            Action.STAGE: self.stage,
            Action.MAGMA_RELINK: self.magma_relink,
            Action.STAGE_MAGMA: self.stage_magma,
            Action.VERIFY: self.verify,
            Action.SAVE_CACHE: self.save_cache,
            Action.SAVE_BUILD_STATE: self.save_build_state,
            Action.CLEAR_PREFIX: self.clear_prefix,
            Action.CHECK_ENV: self.check_env,
            Action.PREPARE_TREE: self.prepare_tree,
            Action.CHECK_TREE_KEPT: self.check_tree_kept,
            Action.INSTALL: self.split_install,
            Action.LINK_BACK: self.link_back,
        }

    # -- top level ----------------------------------------------------------------------------

    def record_env(self, _step: Step) -> None:
        opts = self.opts
        recorded = forwarded_env.record(opts.work / FORWARDED_RECORD, self.env)
        forwarded_env.record(opts.telemetry_dir / "forwarded-env.libtorch.json", self.env)
        print(f"forwarded environment: {len(recorded)} variables recorded for every later step")

    def record_python(self, _step: Step) -> None:
        record = top_level_record.TopLevelRecord(self.opts.py_ver)
        path = top_level_record.write(self.opts.work, record)
        print(f"top level: built with Python {record.python} (recorded in {path.name} for every output)")

    def config_settings(self, step: Step) -> list[str]:
        """The ``-C`` settings of this pass: the same for every Python (the six dir is the top
        level's copy; ``wheel.exclude`` comes from the project and the split spec)."""
        opts = self.opts
        excludes = None
        if step.wheel is Wheel.PYTHON_ONLY and not self.full_wheel:
            excludes = wheel_settings.project_excludes(opts.src_dir) + wheel_settings.libtorch_excludes(
                self.spec
            )
        if step.wheel is Wheel.FULL:
            six_dir = wheel_settings.share_six(opts.sp_dir, opts.six_dir)
        else:
            six_dir = wheel_settings.shared_six(opts.six_dir)
        return wheel_settings.config_settings(six_dir, excludes)

    def pip_install(self, step: Step) -> None:
        opts = self.opts
        settings = self.config_settings(step)
        name = LIBTORCH if step.wheel is Wheel.FULL else f"python{opts.py_ver}"
        with telemetry.build_pass(opts.telemetry_dir, name, opts.build_dir, opts.compiler_cache) as record:
            if step.wheel is Wheel.PYTHON_ONLY:
                # what this pass would rebuild outside the Python-dependent targets, before it builds
                defines = wheel_settings.cmake_defines(settings)
                record["unexpected_edges"] = rebuild_guard.guard(opts.src_dir, opts.build_dir, defines)
            result = frontend.pip_install(opts.python, opts.src_dir, settings, opts.sp_dir, opts.prefix)
        print(result.line(), flush=True)

    def stage(self, _step: Step) -> None:
        # the installed tree of this prefix's pip install: staging moves its files (no copies)
        tree = self.opts.sp_dir / "torch"
        planned = plan_stage(
            self.spec,
            tree,
            self.opts.staging,
            cuda=self.opts.cuda,
            linalg_variant=LinalgVariant.NOMAGMA.value,
        )
        _say(planned.run().lines())

    @property
    def _magma_out(self) -> Path:
        return self.opts.build_dir / "magma-linalg"

    def magma_relink(self, _step: Step) -> None:
        """The linalg library again from its own objects with MAGMA, and one link (docs/architecture.md)."""
        opts = self.opts
        if opts.magma_home is None:
            raise MegabuildError("MAGMA_HOME is not set: the magma variant links $MAGMA_HOME/lib/libmagma")
        out = self._magma_out
        planned = replay.plan(opts.build_dir, out, replay.LIBRARY, replay.TARGET, opts.magma_home,
                              MAGMA_DEFINES, out / "torch/lib")  # fmt: skip
        with telemetry.build_pass(
            opts.telemetry_dir, LinalgVariant.MAGMA.value, opts.build_dir, opts.compiler_cache
        ):
            _say(replay.run(planned))

    def stage_magma(self, _step: Step) -> None:
        planned = plan_stage(self.spec, self._magma_out / "torch", self.opts.staging, cuda=self.opts.cuda,
                             linalg_variant=LinalgVariant.MAGMA.value, only=[LINALG])  # fmt: skip
        _say(planned.run().lines())

    def verify(self, _step: Step) -> None:
        _say(verify(self.spec, staging=self.opts.staging, cuda=self.opts.cuda).lines())

    def save_cache(self, _step: Step) -> None:
        print(store.save(self.opts.build_dir / "CMakeCache.txt")[1], flush=True)

    def save_build_state(self, _step: Step) -> None:
        # conda-build orders the pytorch outputs differently from run to run; keeping this build
        # lets the top level's Python skip its compiles wherever its output comes (docs/architecture.md).
        opts = self.opts
        state = snapshot.save(opts.build_dir, opts.build_state, opts.py_ver)  # the top level's Python
        print(snapshot.save_report(state, opts.build_state), flush=True)

    def clear_prefix(self, _step: Step) -> None:
        print(prefix_clear.remove_installed(self.opts.sp_dir, self.opts.prefix), flush=True)

    # -- each pytorch output ------------------------------------------------------------------

    def check_env(self, _step: Step) -> None:
        opts = self.opts
        forwarded_env.record(opts.telemetry_dir / f"forwarded-env.python{opts.py_ver}.json", self.env)
        count = forwarded_env.check_same_as_top_level(opts.work / FORWARDED_RECORD, self.env)
        print(f"forwarded environment: the same {count} variables as the top level")

    def prepare_tree(self, _step: Step) -> None:
        """The shared tree, made consistent with this output's Python and backend."""
        opts = self.opts
        top = top_level_record.read(opts.work).python
        swap = PythonSwap(top, opts.py_ver) if opts.py_ver != top else None
        _say(restore(opts.build_dir / "CMakeCache.txt", swap))
        _say(buildstate_restore.restore_for(opts.build_dir, opts.build_state, opts.py_ver))
        adoption = skbuild_state.adopt(opts.build_dir, opts.src_dir, skbuild_state.installed_backend())
        print(adoption.line(), flush=True)
        skbuild_state.mark(opts.build_dir)

    def check_tree_kept(self, _step: Step) -> None:
        skbuild_state.check_kept(self.opts.build_dir)

    # -- the install outputs ------------------------------------------------------------------
    def split_install(self, _step: Step) -> None:
        """The staged files of this script's output into $PREFIX (the linalg output: its variant)."""
        opts = self.opts
        variant = None
        if self.phase is Phase.LINALG:
            if opts.linalg_variant is None:
                raise MegabuildError(f"with_magma is not set (conda-build exports it to {LINALG}'s script)")
            variant = opts.linalg_variant.value
        planned = plan_install(
            self.spec, self.phase.output, opts.staging, opts.prefix, linalg_variant=variant
        )
        _say(planned.run().lines())

    def link_back(self, step: Step) -> None:
        # libtorch's headers live in $PREFIX/include only (patches 0003/0004); what the wheel left
        # out (libtorch's libraries, CMake config) is linked to libtorch's files in the prefix.
        opts = self.opts
        planned = plan_link_back(
            self.spec,
            opts.prefix,
            opts.sp_dir,
            python_tag=sys.implementation.cache_tag or "",  # the host Python runs megabuild
            drop_libtorch_headers=step.drop_libtorch_headers,
            link_installed=PIPELINE.installed_outputs(opts.target),
        )
        _say(planned.run().lines())


def run(opts: BuildOptions, env: Mapping[str, str], phase: Phase, *, full_wheel: bool = False) -> None:
    """One phase of :data:`PIPELINE` on the real build."""
    build = RealBuild(opts, env, phase, full_wheel=full_wheel)
    ran = PIPELINE.run(phase, opts.target, build.handlers(), announce=_announce)
    skipped = [s.name for s in PIPELINE.all_steps(phase) if s not in ran]
    if skipped:
        print(f"{phase.value}: not run for {opts.target_platform}: {', '.join(skipped)}", flush=True)
