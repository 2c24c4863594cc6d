"""The one runner of a rendered output's test commands (scripts/feedstock/test_commands.py), as
the rehearsal (feedstock.rehearsal.checks) and the harness (feedstock.conda_build_standin.recipe_tests) call
it."""

from __future__ import annotations

from pathlib import Path

import pytest
from feedstock.conda_build_standin import recipe_tests
from feedstock.errors import FeedstockError
from feedstock.rehearsal import checks
from feedstock.test_commands import TIMED_OUT, fresh_test_dir, run_command

PIPELINE_FAILS = "false | true"  # fails only under pipefail


def _recipe(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipe"
    (recipe / "cmake_test").mkdir(parents=True)
    (recipe / "cmake_test" / "CMakeLists.txt").write_text("project(t)\n")
    (recipe / "run_me.py").write_text("print('hi')\n")
    return recipe


def test_the_test_dir_is_fresh_and_holds_the_sections_files(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    where = tmp_path / "test"
    where.mkdir()
    (where / "stale").write_text("from an earlier run")
    fresh_test_dir(where, {"files": ["cmake_test/", "run_me.py"]}, recipe)
    assert sorted(p.relative_to(where).as_posix() for p in where.rglob("*")) == [
        "cmake_test", "cmake_test/CMakeLists.txt", "run_me.py",
    ]  # fmt: skip


def test_a_test_file_the_recipe_lacks_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FeedstockError, match=r"gone\.txt: a test file the rendered test section names"):
        fresh_test_dir(tmp_path / "test", {"files": ["gone.txt"]}, _recipe(tmp_path))


def test_the_binary_check_is_given_the_callers_explained_findings(tmp_path: Path) -> None:
    explained = tmp_path / "explained.json"
    ran = run_command("echo python -m megabuild check-binaries --package x", {"PATH": "/usr/bin:/bin"},
                      tmp_path, explained=explained, bash_options=("-e",), timeout=60)  # fmt: skip
    assert ran.command.endswith(f'--explained "{explained}"'), ran.command
    assert (
        ran.returncode == 0
        and ran.output == f"python -m megabuild check-binaries --package x --explained {explained}\n"
    )
    plain = run_command("echo other", {"PATH": "/usr/bin:/bin"}, tmp_path, explained=explained,
                        bash_options=("-e",), timeout=60)  # fmt: skip
    assert plain.command == "echo other" and plain.output == "other\n"


def test_a_command_past_its_time_fails_with_a_line(tmp_path: Path) -> None:
    ran = run_command("sleep 5", {"PATH": "/usr/bin:/bin"}, tmp_path, explained=tmp_path,
                      bash_options=("-e",), timeout=0.5)  # fmt: skip
    assert ran.returncode == TIMED_OUT and ran.tail() == "took longer than 0 s", ran


def test_each_caller_keeps_its_bash_options(tmp_path: Path) -> None:
    """The rehearsal runs with pipefail (a failing pipeline fails); the harness with ``bash -e`` as
    conda-build's test script does (the pipeline's last command decides)."""
    env = {"PATH": "/usr/bin:/bin"}
    (bad,) = checks.rendered_tests("out", {"commands": [PIPELINE_FAILS]}, env, tmp_path)
    assert bad.ok is False and bad.what == f"out: {PIPELINE_FAILS}"
    test_env = recipe_tests.RecipeTestEnv(tmp_path, tmp_path, env, {})
    results = recipe_tests.run_commands(test_env, [PIPELINE_FAILS, "echo out; echo err >&2; exit 3"])
    assert [r.returncode for r in results] == [0, 3]
    assert results[1].output == "out\nerr\n"
