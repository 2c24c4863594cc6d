"""The build pipeline (recipe/megabuild/pipeline): one description, typed steps, one error path."""

from __future__ import annotations

import ast
import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.bump import placeholder_build, split_run
from feedstock.bump.listings import read_listing
from feedstock.bump.placeholder_build import Layout
from feedstock.bump.platforms import BY_NAME
from feedstock.bump.split_spec import SplitSpec
from feedstock.paths import RECIPE, REPO
from megabuild import cli
from megabuild.errors import MegabuildError
from megabuild.pipeline import options, steps
from megabuild.pipeline.description import PIPELINE, Action, Phase, Step, Target

LINUX_CUDA = Target("linux-64", cuda=True)
WIN_CUDA = Target("win-64", cuda=True)
OSX = Target("osx-arm64", cuda=False)


def names(steps: tuple[Step, ...] | list[Step]) -> list[str]:
    return [s.name for s in steps]


def test_the_top_level_steps_in_order() -> None:
    assert names(PIPELINE.steps(Phase.TOP_LEVEL, LINUX_CUDA)) == [
        "record forwarded env", "pip install", "split stage", "magma relink", "split stage magma",
        "split verify", "cache save", "build-state save",
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
    assert PIPELINE.installed_outputs(LINUX_CUDA) == ("libtorch", "libtorch-cuda-linalg")
    assert PIPELINE.installed_outputs(OSX) == ("libtorch",)


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
    listed = set(re.findall(r"^    (\S+)", proc.stdout, re.M))
    groups = {
        "cache",
        "split",
        "cmake-args",
        "magma-linalg",
        "build-state",
        "build",
        "check-binaries",
        "check-torch-config",
    }
    assert listed == groups, proc.stdout
    assert len(cli.COMMAND_GROUPS) == len(groups)


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
    env = dict(os.environ, PYTHONPATH=str(RECIPE), PKG_NAME="libtorch-split", SRC_DIR=str(src),
               RECIPE_DIR=str(RECIPE), PREFIX=str(prefix), SP_DIR=str(tmp_path / "sp"), PY_VER="3.12",
               target_platform="linux-64", cuda_compiler_version="None", megabuild="true",
               PIP_NO_INDEX="1")  # fmt: skip
    proc = subprocess.run([sys.executable, "-m", "megabuild", "build", "top-level"], capture_output=True,
                          text=True, check=False, env=env, cwd=src, timeout=300)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith("megabuild: error: top-level: pip install: pip install . failed"), (
        proc.stderr
    )


# -- the build and the bump check run the same pipeline -------------------------------------------


def _layout(subdir: str, listing: str, cuda: bool) -> Layout:
    platform = BY_NAME[subdir]
    rows = [r for r in read_listing(REPO / "tests" / "data" / listing)
            if not any(fnmatch.fnmatch(r.path, g) for g in platform.not_in_conda_build)]  # fmt: skip
    spec = SplitSpec(RECIPE / "split_spec.json", subdir)
    return Layout(platform, rows, "3.12", cuda, "test", [], spec)


def test_build_and_bump_check_hold_the_same_pipeline_object() -> None:
    assert split_run.PIPELINE is steps.PIPELINE is placeholder_build.PIPELINE is PIPELINE
    env = {"PKG_NAME": "pytorch", "SRC_DIR": "/src", "RECIPE_DIR": str(RECIPE), "PREFIX": "/p",
           "SP_DIR": "/sp", "PY_VER": "3.12", "target_platform": "linux-64",
           "cuda_compiler_version": "12.6", "megabuild": "true"}  # fmt: skip
    real = steps.RealBuild(options.from_environment(env), env).handlers()
    # `split install` runs in the install outputs' own scripts; everything else in `megabuild build`
    assert set(real) == PIPELINE.actions() - {Action.INSTALL}
    layout = _layout("osx-arm64", "torch-2.14.1-cp312-macosx_arm64-files.tsv", cuda=False)
    placeholders = placeholder_build.PlaceholderBuild(layout, placeholder_build.Places(Path("/x"), layout))
    assert set(placeholders.handlers()) == PIPELINE.actions(placeholders=True)


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
    layout = _layout(subdir, listing, cuda)
    places = placeholder_build.Places(tmp_path, layout)
    results = split_run.Run(layout, places).all_phases()
    expected = [f"{phase.value}: {s.name}" for phase, _ in PIPELINE.phases
                for s in PIPELINE.steps(phase, layout.target, placeholders=True)]  # fmt: skip
    linalg_runs = 2 if PIPELINE.steps(Phase.LINALG, layout.target) else 0  # magma, nomagma
    assert [s for s in results.steps if s != "libtorch-cuda-linalg: split install"] == [
        s for s in expected if s != "libtorch-cuda-linalg: split install"
    ]
    assert results.steps.count("libtorch-cuda-linalg: split install") == linalg_runs
    assert not [f for f in results.failed if not f.startswith("no rendered")], results.failed
    torch = places.prefix_site_packages / "torch"
    if layout.windows:
        assert not (torch / "lib" / "c10.dll").exists()  # wheel.exclude: libtorch's DLL is not packed
        assert (places.prefix / "Library" / "bin" / "c10.dll").is_file()
    else:
        linked = torch / "lib" / "libtorch_cuda_linalg.so"  # excluded from the wheel, linked back
        assert linked.is_symlink() and linked.resolve() == (places.prefix / "lib" / linked.name).resolve()
        assert (torch / "lib" / "libtorch_python.so").is_file() and not (
            torch / "lib" / "libtorch_python.so"
        ).is_symlink()
