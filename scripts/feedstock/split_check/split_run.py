"""The split procedure: one wheel's layout through the recipe's build pipeline, checked by the
recipe's own rendered file tests. The version-bump check and tests/test_split_real_layouts.py run
this one procedure (:func:`split_in`, :func:`split_findings`).

It runs :data:`megabuild.pipeline.description.PIPELINE`, the object every conda-build script runs
as ``megabuild build <output>``, script run by script run (:meth:`Pipeline.script_runs`: the top
level, the linalg output once per variant, libtorch, pytorch), through :class:`TreeBuild`:
its handlers do to the wheel's files, laid out from the layout's source (placeholders from a
listing, a real unpacked wheel: ``feedstock.split_check.layout``; the derived wheel pip installs in the
rehearsal on real binaries: ``feedstock.rehearsal.tree``), what the build does to the built
ones, with the same typed split calls (``stage``, ``verify``, ``install``, ``link-back``). Steps
that need the real CMake tree (the forwarded environment, the top-level record, the cache, the
build state) are the only ones left out; the pipeline refuses a handler table that misses any
other. So the per-platform rules are the build's (``megabuild.model.PlatformFacts``): no magma
pass, no linalg package and no link-back on Windows; every pytorch output packs only what its
per-Python ``wheel.exclude`` leaves (excluded files are never laid out), and link-back links the
installed packages' files (``--link-installed``, from the conda-meta records the install runs
leave, as conda's would). Each rendered output is picked by its whole variant: name, Python build
(3.14 is not 3.14t) and linalg variant.

After each script run of a package every command of the rendered ``test:`` sections that only inspects files
(``test ...`` / ``[ ... ]``; on Windows cmd's ``if [not] exist``, see ``feedstock.wincmd``) runs in
bash, in the prefix that package's test env would have; commands that need the real runtime are
counted. Last, every laid-out file must end up in exactly one package, or dropped.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.model import DROPPED, LIBTORCH, LINALG, PYTORCH
from megabuild.pipeline.description import PIPELINE, Phase, ScriptRun

from .. import wincmd
from ..render import RenderedOutput
from .file_tests import SplitRun, is_file_test, run_tests, run_win_tests, stand_ins
from .layout import Layout
from .recipe import matching
from .report import Finding, Level
from .tree_build import Places, SplitStepFailed, TreeBuild, staged_files, target_of

__all__ = ["Layout", "Places", "is_file_test", "run_findings", "split_findings", "split_in", "staged_files"]
SECTION = "split"


class Run:
    """One layout through every script run of the pipeline, with the rendered tests after each."""

    def __init__(self, layout: Layout, places: Places, say: Callable[[str], None] | None = None) -> None:
        """``say``: where each step's name and report lines go as they run (none: dropped)."""
        self.layout = layout
        self.places = places
        self.say = say
        self.build = TreeBuild(layout, places, say)
        self.results = SplitRun()

    def script(self, run: ScriptRun) -> None:
        """One script run: the pipeline's steps for it, then its package's rendered file tests."""
        try:
            ran = PIPELINE.run(
                run.phase,
                target_of(self.layout),
                self.build.handlers(run),
                placeholders=True,
                announce=self.say,
            )
        except MegabuildError as exc:
            raise SplitStepFailed(str(exc)) from None
        self.results.steps += [f"{run.phase.value}: {step.name}" for step in ran]
        if run.phase is Phase.TOP_LEVEL:  # not a package: what it staged is what the installs move
            self.results.staged = self.build.staged = staged_files(self.places.staging)
            return
        if run.phase is Phase.PYTORCH:
            self.results.failed += self.build.wheel_exclude_problems
        self.test(run)

    def test_env(self, prefix: Path) -> dict[str, str]:
        if self.layout.platform.windows:
            return wincmd.conda_test_env(prefix, self.layout.python.version)
        return {
            "PATH": "/usr/bin:/bin",
            "PREFIX": str(prefix),
            "SP_DIR": str(self.places.site_packages(prefix)),
            "SHLIB_EXT": self.layout.platform.shlib_ext,
            "PY_VER": self.layout.python.version,
        }

    def output(self, run: ScriptRun) -> RenderedOutput | None:
        """The rendered output of this script run: by name, Python build (version and ABI) and
        linalg variant."""
        python = self.layout.python if run.phase is Phase.PYTORCH else None
        found = matching(self.layout.outputs, run.phase.output, python=python, linalg=run.linalg_variant)
        if len(found) != 1:
            wanted = " ".join(str(w) for w in (run.phase.output, python, run.linalg_variant) if w is not None)
            self.results.failed.append(f"{len(found)} rendered {wanted} in {self.layout.config}")
            return None
        return found[0]

    def test(self, run: ScriptRun) -> None:
        output = self.output(run)
        if output is None:
            return
        prefix = self.places.prefix_of(run)
        stand_ins(prefix, run, self.layout.platform.shlib_ext)
        if self.layout.platform.windows:
            run_win_tests(output, self.test_env(prefix), self.results)
        else:
            run_tests(output, self.test_env(prefix), self.places.work, self.results)

    def all_scripts(self) -> SplitRun:
        """Every script run of the pipeline for this layout, in order; raises SplitStepFailed."""
        for run in PIPELINE.script_runs(target_of(self.layout)):
            self.script(run)
        return self.results


def owners(layout: Layout, places: Places, staged: dict[str, set[str]]) -> dict[str, list[str]]:
    """For every laid-out file, the packages holding its bytes (or ``_dropped``). libtorch's and
    linalg's count where ``split install`` put them; pytorch's are the real files left in its
    site-packages (its symlinks into $PREFIX hold no bytes); the linalg variants count once."""
    linalg = {rel for name, files in staged.items() if name.startswith(LINALG) for rel in files}
    sp_dir = places.prefix_site_packages
    found: dict[str, list[str]] = {}
    for row in layout.rows:
        rel = row.path.removeprefix("torch/")
        placed = layout.spec.install_path(rel)  # Windows: under Library/
        in_prefix = placed is not None and os.path.lexists(places.prefix / placed)
        held = [
            name
            for name, holds in (
                (LIBTORCH, in_prefix and rel in staged.get(LIBTORCH, set())),
                (LINALG, in_prefix and rel in linalg),
                (PYTORCH, (sp_dir / row.path).is_file() and not (sp_dir / row.path).is_symlink()),
                (DROPPED, rel in staged.get(DROPPED, set())),
            )
            if holds
        ]
        found[row.path] = held
    return found


def _ownership_findings(layout: Layout, places: Places, staged: dict[str, set[str]]) -> list[Finding]:
    """Every file in exactly one package (or dropped), and no link in site-packages dangling."""
    found = owners(layout, places, staged)
    torch_sp = places.prefix_site_packages / "torch"
    dangling = sorted(str(p) for p in torch_sp.rglob("*") if p.is_symlink() and not p.exists())
    nowhere = sorted(p for p, held in found.items() if not held)
    twice = sorted(p for p, held in found.items() if len(held) > 1)
    subdir = layout.platform.subdir
    out = []
    if nowhere:
        out.append(
            Finding(SECTION, Level.ACTION, f"{subdir}: {len(nowhere)} file(s) in no package: {nowhere[:5]}")
        )
    if twice:
        out.append(
            Finding(SECTION, Level.ACTION, f"{subdir}: {len(twice)} file(s) in two packages: {twice[:5]}")
        )
    if dangling:
        text = f"{subdir}: {len(dangling)} dangling link(s) in site-packages: {dangling[:5]}"
        out.append(Finding(SECTION, Level.ACTION, text))
    return out


def _steps_summary(layout: Layout, ran: list[str]) -> str:
    """The pipeline steps that ran, and those its platform rules leave out for this target."""
    done = list(dict.fromkeys(line.split(": ", 1)[1] for line in ran))
    left_out = [
        f"{step.name} ({phase.output})" if phase is not Phase.TOP_LEVEL else step.name
        for phase, steps in PIPELINE.phases
        for step in steps
        if not step.build_tree and f"{phase.value}: {step.name}" not in ran
    ]
    text = f"the build's pipeline ran {', '.join(done)}"
    if left_out:
        text += f"; not for {layout.platform.subdir}{' CUDA' if layout.cuda else ''}: {', '.join(left_out)}"
    return text


def _subdir(layout: Layout) -> str:
    return f"{layout.platform.subdir} ({layout.config}, Python {layout.python})"


def split_in(layout: Layout, work: Path) -> list[Finding]:
    """The split of one layout and its rendered tests, as findings, in ``work`` (an empty directory
    the caller keeps: :class:`Places` ``(work, layout)`` names the prefixes and staging in it)."""
    places = Places(work, layout)
    try:
        results = Run(layout, places).all_scripts()
    except SplitStepFailed as exc:
        return [Finding(SECTION, Level.ACTION, f"{_subdir(layout)}: {exc}")]
    return run_findings(layout, places, results)


def run_findings(layout: Layout, places: Places, results: SplitRun) -> list[Finding]:
    """A finished :class:`Run`'s findings: a summary, then each failed file test, each file in no
    package or in two, each dangling link (ACTION)."""
    subdir = _subdir(layout)
    found = [Finding(SECTION, Level.ACTION, f"{subdir}: test fails: {line}") for line in results.failed]
    found += _ownership_findings(layout, places, results.staged)
    level = Level.INFO if found else Level.OK
    summary = (
        f"{subdir}: {_steps_summary(layout, results.steps)}; {results.ran} file checks of the rendered "
        f"tests ran, {len(results.failed)} failed; {results.not_run} need the real runtime (not run)"
    )
    return [Finding(SECTION, level, summary), *found]


def split_findings(layout: Layout) -> list[Finding]:
    """:func:`split_in` a temporary directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bump-split-") as tmp:
        return split_in(layout, Path(tmp))
