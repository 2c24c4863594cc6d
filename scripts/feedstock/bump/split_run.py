"""The split of a new wheel's layout: the recipe's build pipeline on placeholders, checked by the
recipe's own rendered file tests.

The bump check runs :data:`megabuild.pipeline.description.PIPELINE`, the object ``megabuild build
top-level|pytorch`` runs on the real build, phase by phase (top level, libtorch-cuda-linalg,
libtorch, pytorch), through :class:`PlaceholderBuild`: its handlers do to the wheel's files, laid
out as empty placeholders, what the build does to the built ones, with the same typed split calls
(``stage``, ``verify``, ``install``, ``link-back``). Steps that need the real CMake tree (the
forwarded environment, the cache, the build state) are the only ones left out; the pipeline refuses
a handler table that misses any other. So the per-platform rules are the build's: no magma pass, no
linalg package and no link-back on Windows; every pytorch output packs only what its per-Python
``wheel.exclude`` leaves (the placeholders of excluded files are never laid out), and link-back
links the installed packages' files (``--link-installed``, from the conda-meta records the install
phases leave, as conda's would).

After each install phase every command of the rendered ``test:`` sections that only inspects files
(``test ...`` / ``[ ... ]``; on Windows cmd's ``if [not] exist``, see ``feedstock.wincmd``) runs in
bash, in the prefix that package's test env would have; commands that need the real runtime are
counted. Last, every laid-out file must end up in exactly one package, or dropped.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.pipeline.description import PIPELINE, Phase

from .. import wincmd
from ..render import RenderedOutput
from .file_tests import SplitRun, is_file_test, run_tests, run_win_tests, stand_ins
from .placeholder_build import LINALG, Layout, PlaceholderBuild, Places, SplitStepFailed, staged_files
from .recipe import pick
from .report import Finding, Level

__all__ = ["Layout", "is_file_test", "split_findings", "staged_files"]
SECTION = "split"


class Run:
    """One layout through every phase of the pipeline, with the rendered tests after each install."""

    def __init__(self, layout: Layout, places: Places) -> None:
        self.layout = layout
        self.places = places
        self.build = PlaceholderBuild(layout, places)
        self.results = SplitRun()

    def phase(self, phase: Phase) -> None:
        try:
            ran = PIPELINE.run(phase, self.layout.target, self.build.handlers(), placeholders=True)
        except MegabuildError as exc:
            raise SplitStepFailed(str(exc)) from None
        self.results.steps += [f"{phase.value}: {step.name}" for step in ran]

    def test_env(self, prefix: Path) -> dict[str, str]:
        if self.layout.windows:
            return wincmd.conda_test_env(prefix, self.layout.python)
        return {
            "PATH": "/usr/bin:/bin",
            "PREFIX": str(prefix),
            "SP_DIR": str(self.places.site_packages(prefix)),
            "SHLIB_EXT": self.layout.platform.shlib_ext,
            "PY_VER": self.layout.python,
        }

    def test(self, output: RenderedOutput | None, prefix: Path) -> None:
        if output is None:
            return
        if self.layout.windows:
            run_win_tests(output, self.test_env(prefix), self.results)
        else:
            run_tests(output, self.test_env(prefix), self.places.work, self.results)

    def output(self, name: str, **variant: str) -> RenderedOutput | None:
        found = pick(self.layout.outputs, name, **variant)
        if found is None:
            wanted = f"{name} {variant}" if variant else name
            self.results.failed.append(f"no rendered {wanted} in {self.layout.config}")
        return found

    def linalg(self) -> None:
        """install_linalg.sh per variant, each tested in its own env; nomagma's continues as $PREFIX."""
        if not PIPELINE.steps(Phase.LINALG, self.layout.target):
            return  # no linalg package for this target (CPU, Windows)
        for magma, variant in (("true", "magma"), ("false", "nomagma")):
            where = self.places.work / f"prefix-linalg-{variant}"
            self.build.install = (f"{LINALG}-{variant}", where)
            self.phase(Phase.LINALG)
            output = self.output(LINALG, with_magma=magma)
            if output is not None:
                stand_ins(where, output, self.layout.platform.shlib_ext)
            self.test(output, where)
        os.rename(self.places.work / "prefix-linalg-nomagma", self.places.prefix)

    def top_level(self) -> None:
        self.phase(Phase.TOP_LEVEL)
        self.results.staged = self.build.staged = staged_files(self.places.staging)

    def libtorch(self) -> None:
        self.build.install = ("libtorch", self.places.prefix)
        self.phase(Phase.LIBTORCH)
        self.test(self.output("libtorch"), self.places.prefix)

    def pytorch(self) -> None:
        self.phase(Phase.PYTORCH)
        self.results.failed += self.build.wheel_exclude_problems
        self.test(self.output("pytorch", python=self.layout.python), self.places.prefix)

    def all_phases(self) -> SplitRun:
        """Every phase, in the pipeline's order; raises SplitStepFailed (and KeyError for a phase
        the pipeline has and this run does not know: the two must not drift apart)."""
        runs = {
            Phase.TOP_LEVEL: self.top_level,
            Phase.LINALG: self.linalg,
            Phase.LIBTORCH: self.libtorch,
            Phase.PYTORCH: self.pytorch,
        }
        for phase, _steps in PIPELINE.phases:
            runs[phase]()
        return self.results


def owners(layout: Layout, places: Places, staged: dict[str, set[str]]) -> dict[str, list[str]]:
    """For every laid-out file, the packages holding its bytes (or ``_dropped``). libtorch's and
    linalg's count where ``split install`` put them; pytorch's are the real files left in its
    site-packages (its symlinks into $PREFIX hold no bytes); the linalg variants count once."""
    linalg = {
        rel for name, files in staged.items() if name.startswith("libtorch-cuda-linalg") for rel in files
    }
    sp_dir = places.prefix_site_packages
    found: dict[str, list[str]] = {}
    for row in layout.rows:
        rel = row.path.removeprefix("torch/")
        placed = layout.spec.install_path(rel)  # Windows: under Library/
        in_prefix = placed is not None and os.path.lexists(places.prefix / placed)
        held = [
            name
            for name, holds in (
                ("libtorch", in_prefix and rel in staged.get("libtorch", set())),
                ("libtorch-cuda-linalg", in_prefix and rel in linalg),
                ("pytorch", (sp_dir / row.path).is_file() and not (sp_dir / row.path).is_symlink()),
                ("_dropped", rel in staged.get("_dropped", set())),
            )
            if holds
        ]
        found[row.path] = held
    return found


def _ownership_findings(layout: Layout, places: Places, staged: dict[str, set[str]]) -> list[Finding]:
    found = owners(layout, places, staged)
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
    return out


def _steps_summary(layout: Layout, ran: list[str]) -> str:
    """The pipeline steps that ran, and those its platform rules leave out for this target."""
    done = list(dict.fromkeys(line.split(": ", 1)[1] for line in ran))
    left_out = [
        f"{step.name} ({phase.value})" if phase is not Phase.TOP_LEVEL else step.name
        for phase, steps in PIPELINE.phases
        for step in steps
        if not step.build_tree and f"{phase.value}: {step.name}" not in ran
    ]
    text = f"the build's pipeline ran {', '.join(done)}"
    if left_out:
        text += f"; not for {layout.platform.subdir}{' CUDA' if layout.cuda else ''}: {', '.join(left_out)}"
    return text


def split_findings(layout: Layout) -> list[Finding]:
    """The split of one layout and its rendered tests, as findings."""
    subdir = f"{layout.platform.subdir} ({layout.config}, Python {layout.python})"
    with tempfile.TemporaryDirectory(prefix="bump-split-") as tmp:
        places = Places(Path(tmp), layout)
        try:
            results = Run(layout, places).all_phases()
        except SplitStepFailed as exc:
            return [Finding(SECTION, Level.ACTION, f"{subdir}: {exc}")]
        found = [Finding(SECTION, Level.ACTION, f"{subdir}: test fails: {line}") for line in results.failed]
        found += _ownership_findings(layout, places, results.staged)
    level = Level.INFO if found else Level.OK
    summary = (
        f"{subdir}: {_steps_summary(layout, results.steps)}; {results.ran} file checks of the rendered "
        f"tests ran, {len(results.failed)} failed; {results.not_run} need the real runtime (not run)"
    )
    return [Finding(SECTION, level, summary), *found]
