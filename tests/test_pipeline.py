"""The build pipeline (recipe/megabuild/pipeline): one description, typed steps, one error path."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.paths import RECIPE, REPO
from feedstock.split_check import split_run, tree_build
from feedstock.split_check.layout import Layout, listing_layout
from feedstock.split_check.recipe import read_recipe
from megabuild import cli
from megabuild.errors import MegabuildError
from megabuild.model import LIBTORCH, LINALG, PYTORCH, TOP_LEVEL, LinalgVariant
from megabuild.pipeline import options, steps
from megabuild.pipeline.description import PIPELINE, Action, Phase, ScriptRun, Step, Target

LINUX_CUDA = Target("linux-64", cuda=True)
WIN_CUDA = Target("win-64", cuda=True)
OSX = Target("osx-arm64", cuda=False)


def names(steps: tuple[Step, ...] | list[Step]) -> list[str]:
    return [s.name for s in steps]


def test_the_top_level_steps_in_order() -> None:
    assert names(PIPELINE.steps(Phase.TOP_LEVEL, LINUX_CUDA)) == [
        "record forwarded env", "record top-level Python", "pip install", "split stage", "magma relink",
        "split stage magma",
        "split verify", "cache save", "build-state save", "clear the prefix",
    ]  # fmt: skip
    assert names(PIPELINE.steps(Phase.TOP_LEVEL, OSX, placeholders=True)) == [
        "pip install", "split stage", "split verify",
    ]  # fmt: skip


def test_windows_has_no_magma_pass_no_linalg_package_and_no_link_back() -> None:
    top = names(PIPELINE.steps(Phase.TOP_LEVEL, WIN_CUDA))
    assert "magma relink" not in top and "split stage magma" not in top and "split stage" in top
    assert PIPELINE.steps(Phase.LINALG, WIN_CUDA) == ()
    assert "split link-back" not in names(PIPELINE.steps(Phase.PYTORCH, WIN_CUDA))
    assert "split link-back" in names(PIPELINE.steps(Phase.PYTORCH, LINUX_CUDA))


def test_link_back_links_the_installed_packages_of_the_target() -> None:
    assert PIPELINE.installed_outputs(LINUX_CUDA) == (LIBTORCH, LINALG)
    assert PIPELINE.installed_outputs(OSX) == (LIBTORCH,)


def test_every_script_is_a_phase_of_its_output() -> None:
    """``megabuild build <PKG_NAME>``: each output's script runs the phase of that output; the linalg
    output's once per variant, and only where the platform has the lazy linalg library."""
    assert [(r.phase.output, r.linalg_variant) for r in PIPELINE.script_runs(LINUX_CUDA)] == [
        (TOP_LEVEL, None), (LINALG, LinalgVariant.MAGMA), (LINALG, LinalgVariant.NOMAGMA),
        (LIBTORCH, None), (PYTORCH, None),
    ]  # fmt: skip
    assert [r.phase for r in PIPELINE.script_runs(WIN_CUDA)] == [
        Phase.TOP_LEVEL,
        Phase.LIBTORCH,
        Phase.PYTORCH,
    ]
    assert {Phase.of_output(p.output) for p in Phase} == set(Phase)
    with pytest.raises(MegabuildError, match="no build phase for output 'pytorch-cpu'"):
        Phase.of_output("pytorch-cpu")


def test_an_unknown_target_platform_is_one_line() -> None:
    with pytest.raises(MegabuildError, match=r"'linux-ppc64le' is not one the feedstock builds"):
        PIPELINE.steps(Phase.PYTORCH, Target("linux-ppc64le", cuda=False))


def test_a_handler_table_must_match_the_pipeline() -> None:
    handlers = {a: (lambda _s: None) for a in PIPELINE.actions()}
    del handlers[Action.VERIFY]
    with pytest.raises(
        MegabuildError, match=r"top-level: the handlers do not match.*missing: \['split verify'\]"
    ):
        PIPELINE.run(Phase.TOP_LEVEL, OSX, handlers)
    # a placeholder run has no handler for a build-tree step
    handlers = {a: (lambda _s: None) for a in PIPELINE.actions()}
    with pytest.raises(MegabuildError, match=r"not in it: \['build-state save'"):
        PIPELINE.run(Phase.TOP_LEVEL, OSX, handlers, placeholders=True)


def test_a_failing_step_is_named_once() -> None:
    def fail(step: Step) -> None:
        raise MegabuildError("tree has no torch/lib")

    handlers = {a: (lambda _s: None) for a in PIPELINE.actions()} | {Action.STAGE: fail}
    with pytest.raises(MegabuildError) as caught:
        PIPELINE.run(Phase.TOP_LEVEL, LINUX_CUDA, handlers)
    assert str(caught.value) == "top-level: split stage: tree has no torch/lib"


def test_no_step_builds_a_command_line() -> None:
    """Only ``python -m megabuild`` (``__main__``) calls the command line; nothing imports it."""
    callers = []
    for path in sorted((RECIPE / "megabuild").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "megabuild.cli":
                callers.append(path.relative_to(RECIPE).as_posix())
    assert callers == ["megabuild/__main__.py"]


def test_help_lists_every_group() -> None:
    proc = subprocess.run([sys.executable, "-m", "megabuild", "--help"], capture_output=True, text=True,
                          check=False, env=dict(os.environ, PYTHONPATH=str(RECIPE)))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    commands = proc.stdout[proc.stdout.index("positional arguments:") : proc.stdout.index("options:")]
    listed = set(re.findall(r"^    (\S+)", commands, re.M))
    groups = {
        "cache",
        "split",
        "cmake-args",
        "magma-linalg",
        "build-state",
        "build",
        "upstream-tests",
        "env",
        "check-binaries",
        "check-torch-config",
        "activation-scripts",
        "compiler-cache",
    }
    assert listed == groups, proc.stdout
    assert len(cli.COMMAND_GROUPS) == len(groups) - 1  # megabuild.buildenv.cli: env and activation-scripts


def test_a_group_that_fails_to_import_is_an_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "COMMAND_GROUPS", (*cli.COMMAND_GROUPS, "megabuild.no_such_group"))
    assert cli.main(["--help"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("megabuild: error: command group megabuild.no_such_group cannot be imported")
    assert err.count("\n") == 1


def test_a_real_step_failure_is_one_line_naming_the_step(tmp_path: Path) -> None:
    """``megabuild build top-level`` in a source dir pip cannot build: one line, the step named."""
    prefix, src = tmp_path / "prefix", tmp_path / "src"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    src.mkdir()
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "six.py").write_text("")  # the host env's six, which the top level shares
    env = dict(os.environ, PYTHONPATH=str(RECIPE), PKG_NAME=TOP_LEVEL, SRC_DIR=str(src),
               RECIPE_DIR=str(RECIPE), PREFIX=str(prefix), SP_DIR=str(tmp_path / "sp"), PY_VER="3.12",
               target_platform="linux-64", cuda_compiler_version="None", PIP_NO_INDEX="1")  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "megabuild", "build", "top-level"], capture_output=True,
                          text=True, check=False, env=env, cwd=src, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("megabuild: error: top-level: pip install: pip install . failed"), (
        proc.stderr
    )


# -- the build and the bump check run the same pipeline -------------------------------------------


def _layout(listing: str) -> Layout:
    return listing_layout(read_recipe(REPO), REPO / "tests" / "data" / listing)


def _env(pkg_name: str, **extra: str) -> dict[str, str]:
    return {"PKG_NAME": pkg_name, "SRC_DIR": "/src", "RECIPE_DIR": str(RECIPE), "PREFIX": "/p",
            "SP_DIR": "/sp", "PY_VER": "3.12", "target_platform": "linux-64",
            "cuda_compiler_version": "12.6", **extra}  # fmt: skip


def test_build_and_bump_check_hold_the_same_pipeline_object() -> None:
    assert split_run.PIPELINE is steps.PIPELINE is tree_build.PIPELINE is PIPELINE
    env = _env(PYTORCH)
    real = steps.RealBuild(options.from_environment(env), env, Phase.PYTORCH).handlers()
    assert set(real) == PIPELINE.actions()  # every script is one `megabuild build` call
    layout = _layout("torch-2.14.1-cp312-macosx_arm64-files.tsv")
    placeholders = tree_build.TreeBuild(layout, tree_build.Places(Path("/x"), layout))
    assert set(placeholders.handlers(ScriptRun(Phase.LIBTORCH))) == PIPELINE.actions(placeholders=True)


def test_the_linalg_variant_comes_from_with_magma() -> None:
    assert options.from_environment(_env(LINALG, with_magma="true")).linalg_variant is LinalgVariant.MAGMA
    assert options.from_environment(_env(LINALG, with_magma="false")).linalg_variant is LinalgVariant.NOMAGMA
    assert options.from_environment(_env(LIBTORCH)).linalg_variant is None
    with pytest.raises(MegabuildError, match="with_magma must be true or false, got 'yes'"):
        options.from_environment(_env(LINALG, with_magma="yes"))


def test_no_step_reads_the_retired_megabuild_key() -> None:
    """Every config is a megabuild: ``megabuild`` in the environment changes nothing."""
    assert options.from_environment(_env(PYTORCH, megabuild="false")) == options.from_environment(
        _env(PYTORCH)
    )


@pytest.mark.parametrize(
    ("subdir", "listing", "cuda"),
    [
        ("linux-64", "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv", True),
        ("win-64", "torch-2.14.1-cp312-win_amd64-files.tsv", False),
    ],
)
def test_the_bump_check_runs_the_pipeline_steps(
    tmp_path: Path, subdir: str, listing: str, cuda: bool
) -> None:
    """Every phase, every step the platform rules keep, in order: a step the pipeline gains or a
    phase run out of order fails here. The pytorch output is laid out as its wheel.exclude leaves
    it, and link-back links the installed packages' files pip never installed."""
    layout = _layout(listing)
    assert (layout.platform.subdir, layout.cuda) == (subdir, cuda)
    target = tree_build.target_of(layout)
    places = tree_build.Places(tmp_path, layout)
    results = split_run.Run(layout, places).all_scripts()
    expected = [f"{phase.value}: {s.name}" for phase, _ in PIPELINE.phases
                for s in PIPELINE.steps(phase, target, placeholders=True)]  # fmt: skip
    linalg_install = f"{Phase.LINALG.value}: {Action.INSTALL.value}"
    linalg_runs = 2 if PIPELINE.steps(Phase.LINALG, target) else 0  # magma, nomagma
    assert [s for s in results.steps if s != linalg_install] == [s for s in expected if s != linalg_install]
    assert results.steps.count(linalg_install) == linalg_runs
    assert not results.failed, results.failed
    torch = places.prefix_site_packages / "torch"
    if layout.platform.windows:
        assert not (torch / "lib" / "c10.dll").exists()  # wheel.exclude: libtorch's DLL is not packed
        assert (places.prefix / "Library" / "bin" / "c10.dll").is_file()
    else:
        linked = torch / "lib" / "libtorch_cuda_linalg.so"  # excluded from the wheel, linked back
        assert linked.is_symlink() and linked.resolve() == (places.prefix / "lib" / linked.name).resolve()
        assert (torch / "lib" / "libtorch_python.so").is_file() and not (
            torch / "lib" / "libtorch_python.so"
        ).is_symlink()
