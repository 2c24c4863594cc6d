"""The split of a new wheel's layout, checked by the recipe's own rendered file tests.

The same steps as the build scripts, with the real ``python -m megabuild split`` commands on the
wheel's files laid out as empty placeholders: the top level's site-packages tree, ``stage``
(CUDA: nomagma, then a relinked linalg library staged as magma), ``verify``, ``install`` of
libtorch and libtorch-cuda-linalg, the pytorch output's ``pip install .`` (the wheel tree again)
and ``link-back``. Then every command of the rendered ``test:`` sections that only inspects
files (``test ...`` / ``[ ... ]``; on Windows cmd's ``if [not] exist``, see ``feedstock.wincmd``)
runs in bash, in the prefix that package's test env would have; commands that need the real
runtime are counted. Last, every laid-out file must end up in exactly one package, or dropped.

Windows follows bld.bat: no linalg package and no magma pass, libtorch installed into conda's
``Library/``, the pytorch wheel as its per-Python ``wheel.exclude`` leaves it, and no link-back
(no symlinks; torch finds libtorch's DLLs in ``Library/bin``).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import wincmd
from ..render import RenderedOutput
from .platforms import Platform
from .recipe import Recipe, pick
from .report import Finding, Level
from .tools import Row, SplitSpec

SECTION = "split"
FILE_TESTS = ("test", "[")
# Files of other packages a test env holds and the rendered tests look at.
STAND_INS = {("libtorch-cuda-linalg", "true"): ["lib/libmagma{ext}"]}  # libmagma: run dep of magma


class SplitStepFailed(Exception):
    """A ``megabuild split`` command refused: the split of this layout stops there."""


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


@dataclass
class SplitRun:
    """What one layout's run found."""

    staged: dict[str, set[str]] = field(default_factory=dict)  # output -> files, before install
    ran: int = 0  # file checks run
    failed: list[str] = field(default_factory=list)
    not_run: int = 0  # commands that need the real runtime


def is_file_test(command: str) -> bool:
    """``test ...`` / ``[ ... ]`` and chains of them with && / ||, nothing else."""
    if "$(" in command or "`" in command:
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token in ("&&", "||"):
                segments.append([])
            elif token and set(token) <= set("();<>|&"):
                return False
            else:
                segments[-1].append(token)
    except ValueError:  # unbalanced quotes: not a command we can judge
        return False
    return all(s and s[0] in FILE_TESTS and (s[0] != "[" or s[-1] == "]") for s in segments)


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


def _write_new(path: Path, data: bytes) -> None:
    """A new file (never through an existing placeholder's shared inode)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


class Splitter:
    """Runs ``python -m megabuild split`` of the feedstock's recipe for one layout."""

    def __init__(self, recipe: Recipe, layout: Layout) -> None:
        self.recipe_dir = recipe.recipe_dir
        self.plat = ["--spec", str(recipe.spec_path), "--target-platform", layout.platform.subdir]
        self.cuda = ["--cuda"] if layout.cuda else []

    def __call__(self, step: str, *args: str | Path) -> None:
        env = dict(os.environ, PYTHONPATH=str(self.recipe_dir))
        command = [sys.executable, "-m", "megabuild", "split", step, *self.plat, *map(str, args)]
        res = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if res.returncode != 0:
            lines = (res.stderr or res.stdout).strip().splitlines() or [f"exit {res.returncode}"]
            raise SplitStepFailed(f"split {step}: {lines[-1]}")


def run_tests(output: RenderedOutput, env: dict[str, str], cwd: Path, results: SplitRun) -> None:
    """Run the output's file checks in bash; count the rest."""
    magma = output.variant.get("with_magma")
    label = output.name if magma is None else f"{output.name}[with_magma={magma}]"
    results.not_run += len(output.test.get("imports", []))
    for command in output.test.get("commands", []):
        if not is_file_test(command):
            results.not_run += 1
            continue
        res = subprocess.run(
            ["bash", "-eu", "-c", command], env=env, cwd=cwd, capture_output=True, check=False
        )
        results.ran += 1
        if res.returncode != 0:
            results.failed.append(f"{label}: {command}")


def run_win_tests(output: RenderedOutput, env: dict[str, str], results: SplitRun) -> None:
    """Run the output's ``if [not] exist`` checks as bash ``test``; count the rest."""
    results.not_run += len(output.test.get("imports", []))
    for command in output.test.get("commands", []):
        argv = wincmd.file_test(command, env)
        if argv is None:
            results.not_run += 1
            continue
        results.ran += 1
        if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
            results.failed.append(f"{output.name}: {command}")


def _stand_ins(where: Path, output: RenderedOutput, ext: str) -> None:
    for path in STAND_INS.get((output.name, output.variant.get("with_magma", "")), []):
        target = where / path.format(ext=ext)
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_new(target, b"stand-in")


@dataclass(frozen=True)
class Places:
    """The directories of one run."""

    work: Path

    @property
    def blanks(self) -> Path:
        return self.work / "blanks"

    def site_packages(self, root: str, python: str) -> Path:
        return self.work / root / f"lib/python{python}/site-packages"

    @property
    def staging(self) -> Path:
        return self.work / "staging"

    @property
    def prefix(self) -> Path:
        return self.work / "prefix"

    def prefix_site_packages(self, layout: Layout) -> Path:
        if layout.windows:
            return Path(wincmd.conda_test_env(self.prefix, layout.python)["SP_DIR"])
        return self.site_packages("prefix", layout.python)


def _stage(layout: Layout, split: Splitter, tree: Path, staging: Path) -> None:
    """build.sh's / bld.bat's top level: stage, the magma pass (CUDA; none on Windows, which has no
    linalg package), verify."""
    split("stage", "--tree", tree, "--staging", staging, *split.cuda, "--linalg-variant", "nomagma")
    if layout.cuda and not layout.windows:
        # the magma pass relinks only libtorch_cuda_linalg
        _write_new(tree / f"lib/libtorch_cuda_linalg{layout.platform.shlib_ext}", b"magma")
        magma = ("--linalg-variant", "magma", "--only", "libtorch-cuda-linalg")
        split("stage", "--tree", tree, "--staging", staging, *split.cuda, *magma)
    split("verify", "--staging", staging, *split.cuda)


def _linalg(layout: Layout, split: Splitter, places: Places, env: dict[str, str], results: SplitRun) -> None:
    """install_linalg.sh per variant, each tested in its own env; nomagma's env continues as $PREFIX."""
    for magma, variant in (("true", "magma"), ("false", "nomagma")):
        where = places.work / f"prefix-linalg-{variant}"
        split("install", f"libtorch-cuda-linalg-{variant}", "--staging", places.staging, "--prefix", where)
        output = pick(layout.outputs, "libtorch-cuda-linalg", with_magma=magma)
        if output is None:
            results.failed.append(f"no rendered libtorch-cuda-linalg with_magma={magma} in {layout.config}")
            continue
        _stand_ins(where, output, layout.platform.shlib_ext)
        run_tests(output, dict(env, PREFIX=str(where)), places.work, results)
    os.rename(places.work / "prefix-linalg-nomagma", places.prefix)


def _output(layout: Layout, name: str, results: SplitRun, **variant: str) -> RenderedOutput | None:
    found = pick(layout.outputs, name, **variant)
    if found is None:
        wanted = f"{name} {variant}" if variant else name
        results.failed.append(f"no rendered {wanted} in {layout.config}")
    return found


def split_and_test(layout: Layout, split: Splitter, places: Places) -> SplitRun:
    """The build scripts' steps and the rendered file tests; raises SplitStepFailed."""
    top_sp = places.site_packages("top", layout.python)
    lay_out(top_sp, layout.rows, places.blanks)
    _stage(layout, split, top_sp / "torch", places.staging)
    results = SplitRun(staged=staged_files(places.staging))
    sp_dir = places.site_packages("prefix", layout.python)
    env = {
        "PATH": "/usr/bin:/bin",
        "PREFIX": str(places.prefix),
        "SP_DIR": str(sp_dir),
        "SHLIB_EXT": layout.platform.shlib_ext,
        "PY_VER": layout.python,
    }
    if layout.cuda:
        _linalg(layout, split, places, env, results)
    split("install", "libtorch", "--staging", places.staging, "--prefix", places.prefix)
    libtorch = _output(layout, "libtorch", results)
    if libtorch is not None:
        run_tests(libtorch, env, places.work, results)
    # the pytorch output's own `pip install .` puts the whole wheel tree into its site-packages
    lay_out(sp_dir, layout.rows, places.blanks)
    tag = ("--python-tag", f"cpython-{layout.python.replace('.', '')}")
    split("link-back", "--prefix", places.prefix, "--sp-dir", sp_dir, "--drop-libtorch-headers", *tag)
    pytorch = _output(layout, "pytorch", results, python=layout.python)
    if pytorch is not None:
        run_tests(pytorch, env, places.work, results)
    return results


def split_and_test_windows(layout: Layout, split: Splitter, places: Places) -> SplitRun:
    """bld.bat's steps and the rendered win file tests; raises SplitStepFailed."""
    top_sp = places.work / "top" / "Lib" / "site-packages"  # the top level's pip install .
    lay_out(top_sp, layout.rows, places.blanks)
    staging = places.staging
    _stage(layout, split, top_sp / "torch", staging)
    results = SplitRun(staged=staged_files(staging))
    env = wincmd.conda_test_env(places.prefix, layout.python)
    split("install", "libtorch", "--staging", staging, "--prefix", places.prefix)  # install_libtorch.bat
    libtorch = _output(layout, "libtorch", results)
    if libtorch is not None:
        run_win_tests(libtorch, env, results)
    # the pytorch output: pip install . with the per-Python wheel.exclude; no link-back
    excluded = layout.spec.wheel_excluded(row.path for row in layout.rows)
    moved_out = {f"torch/{rel}" for name in ("libtorch", "_dropped") for rel in results.staged.get(name, ())}
    if excluded != moved_out:
        differ = sorted(excluded ^ moved_out)
        results.failed.append(f"wheel.exclude and the split disagree on {len(differ)} file(s): {differ[:5]}")
    lay_out(
        places.prefix_site_packages(layout), [r for r in layout.rows if r.path not in excluded], places.blanks
    )
    pytorch = _output(layout, "pytorch", results, python=layout.python)
    if pytorch is not None:
        run_win_tests(pytorch, env, results)
    return results


def staged_files(staging: Path) -> dict[str, set[str]]:
    """Files (and symlinks) per staged output, relative to the output's root."""
    return {
        out.name: {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_symlink() or not p.is_dir()}
        for out in staging.iterdir()
    }


def owners(layout: Layout, places: Places, staged: dict[str, set[str]]) -> dict[str, list[str]]:
    """For every laid-out file, the packages holding its bytes (or ``_dropped``). libtorch's and
    linalg's count where ``split install`` put them; pytorch's are the real files left in its
    site-packages (its symlinks into $PREFIX hold no bytes); the linalg variants count once."""
    linalg = {
        rel for name, files in staged.items() if name.startswith("libtorch-cuda-linalg") for rel in files
    }
    sp_dir = places.prefix_site_packages(layout)
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


def split_findings(recipe: Recipe, layout: Layout) -> list[Finding]:
    """The split of one layout and its rendered tests, as findings."""
    subdir = f"{layout.platform.subdir} ({layout.config}, Python {layout.python})"
    with tempfile.TemporaryDirectory(prefix="bump-split-") as tmp:
        places = Places(Path(tmp))
        try:
            run = split_and_test_windows if layout.windows else split_and_test
            results = run(layout, Splitter(recipe, layout), places)
        except SplitStepFailed as exc:
            return [Finding(SECTION, Level.ACTION, f"{subdir}: {exc}")]
        found = [Finding(SECTION, Level.ACTION, f"{subdir}: test fails: {line}") for line in results.failed]
        found += _ownership_findings(layout, places, results.staged)
    level = Level.INFO if found else Level.OK
    steps = (
        "stage, verify, install (no link-back on Windows)"
        if layout.windows
        else "stage, verify, install, link-back"
    )
    summary = (
        f"{subdir}: {steps} done; {results.ran} file checks of the rendered "
        f"tests ran, {len(results.failed)} failed; {results.not_run} need the real runtime (not run)"
    )
    return [Finding(SECTION, level, summary), *found]
