"""The CI files: conda-smithy's generated ones, .ci/run and the cross-check command.

conda-smithy's output (.github/workflows/conda-build.yml, .scripts/, .ci_support/) is checked
against conda-smithy itself: ``test_files_match_a_fresh_rerender`` runs ``conda smithy rerender``
on a copy of the feedstock and compares every generated file byte for byte, executable bits
included. It needs conda-smithy (and network access for conda-forge-pinning); without them it
skips, and ``python -m feedstock cross-check`` (which installs both and sets
``FEEDSTOCK_REQUIRE_CROSS_CHECKS=1``) turns that skip into a failure. The remaining tests check
this feedstock's own choices, which a smithy upgrade does not change: conda-forge.yml settings,
the matrix against .ci_support, no hard-coded feedstock name, no workflow but smithy's, and the
cross-check command.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from megabuild.model import PLATFORMS
from support.cross_checks import REQUIRE_ENV, unavailable
from support.tools import tool_argv

SMITHY_WORKFLOW = Path(".github/workflows/conda-build.yml")
GENERATED_SCRIPTS = (
    ".github/workflows/conda-build.yml",
    ".scripts/build_steps.sh",
    ".scripts/logging_utils.sh",
    ".scripts/run_docker_build.sh",
    ".scripts/run_osx_build.sh",
)
# used when CONDA_SMITHY_RERENDER is unset and conda-smithy is on PATH; the feedstock copy's
# directory is appended
DEFAULT_RERENDER = "conda-smithy rerender --no-check-uptodate --feedstock_directory"
IDENTITY = {"NAME": "t", "EMAIL": "t@example.invalid"}  # of the commits in scratch repositories


@pytest.fixture(scope="module")
def forge(repo_root: Path) -> dict[str, Any]:
    return yaml.safe_load((repo_root / "conda-forge.yml").read_text()) or {}


@pytest.fixture(scope="module")
def configs(repo_root: Path) -> dict[str, dict[str, list[str]]]:
    found = {
        p.stem: yaml.safe_load(p.read_text())
        for p in sorted((repo_root / ".ci_support").glob("*.yaml"))
        if p.stem.startswith(("linux_", "osx_", "win_"))
    }
    if not found:
        pytest.skip(".ci_support has no linux/osx configs yet (rerender pending)")
    return found


@pytest.fixture(scope="module")
def matrix(repo_root: Path, configs) -> list[dict[str, Any]]:
    workflow = repo_root / ".github" / "workflows" / "conda-build.yml"
    assert workflow.is_file(), "rerender: .github/workflows/conda-build.yml is missing"
    data = yaml.safe_load(workflow.read_text())
    return data["jobs"]["build"]["strategy"]["matrix"]["include"]


@pytest.fixture(scope="module")
def workflow(repo_root: Path) -> dict[str, Any]:
    path = repo_root / ".github" / "workflows" / "conda-build.yml"
    if not path.is_file():
        pytest.skip("no workflow yet")
    return yaml.safe_load(path.read_text())


# -- the workflow matrix: our configs, not smithy's template ----------------------------------


def test_one_matrix_entry_per_config(matrix, configs) -> None:
    names = [entry["CONFIG"] for entry in matrix]
    assert sorted(names) == sorted(configs), "rerender needed: matrix and .ci_support differ"
    assert len(names) == len(set(names))
    assert not any("magma" in n for n in names), "with_magma must not split CI jobs"


def test_workflow_and_ci_support_are_committed_together(repo_root: Path) -> None:
    """A workflow listing configs that .ci_support lacks (or the reverse) is a half-committed rerender."""
    path = repo_root / ".github" / "workflows" / "conda-build.yml"
    listed = set()
    if path.is_file():
        listed = {
            e["CONFIG"]
            for e in yaml.safe_load(path.read_text())["jobs"]["build"]["strategy"]["matrix"]["include"]
        }
    present = {p.stem for p in (repo_root / ".ci_support").glob("*.yaml")}
    assert sorted(listed - present) == [], "in the workflow matrix but not in .ci_support/"
    assert sorted(p for p in present - listed if p.startswith(("linux_", "osx_"))) == [], (
        "in .ci_support/ but not in the workflow matrix"
    )


def test_workflow_settings_follow_conda_forge_yml(workflow, forge) -> None:
    gha = forge.get("github_actions") or {}
    assert workflow["jobs"]["build"]["timeout-minutes"] == gha.get("timeout_minutes", 360)
    triggers = gha.get("triggers") or ["push", "pull_request"]
    assert sorted(workflow[True]) == sorted(triggers)  # YAML 1.1 reads the `on:` key as True


def test_no_generated_file_spells_a_feedstock_name(repo_root: Path) -> None:
    """Output validation checks against FEEDSTOCK_NAME, which CI takes from the repository's name
    (conda-forge/pytorch-cpu-feedstock, whose outputs feedstock-outputs registers) and local
    docker builds from the checkout's directory; a name written into a generated file would
    break one of the two."""
    for rel in GENERATED_SCRIPTS:
        assert not re.search(r"pytorch(-cpu)?-feedstock", (repo_root / rel).read_text()), rel


# -- conda-smithy as the oracle: byte-for-byte against a fresh rerender ----------------------

# every path conda-smithy writes for this feedstock (README.md, build-locally.py and .gitignore are
# skip_render'd), compared with their executable bits
RERENDERED = (".ci_support", ".scripts", ".github", ".circleci", "LICENSE.txt", ".gitattributes")


def generated_files(root: Path) -> dict[str, tuple[bytes, bool]]:
    found = {}
    for rel in RERENDERED:
        path = root / rel
        paths = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for p in paths:
            if p.is_file():
                found[str(p.relative_to(root))] = (p.read_bytes(), os.access(p, os.X_OK))
    return found


def git(repo: Path, *args: str) -> None:
    who = {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in IDENTITY.items()}
    subprocess.run(
        ["git", "-C", str(repo), *args], env={**os.environ, **who}, check=True, capture_output=True
    )


def rerendered(repo_root: Path, tmp_path: Path, version: str | None = None) -> Path:
    """A copy of the checkout (with meta.yaml's version set to ``version``), rerendered by conda-smithy."""
    command = os.environ.get("CONDA_SMITHY_RERENDER")
    if not command:
        if shutil.which("conda-smithy") is None:
            unavailable("conda-smithy is not on PATH (or set CONDA_SMITHY_RERENDER to a rerender command)")
        command = DEFAULT_RERENDER
    copy = tmp_path / "feedstock"
    ignore = shutil.ignore_patterns(".git", "build_artifacts", "__pycache__", ".pytest_cache", ".ruff_cache")
    shutil.copytree(repo_root, copy, ignore=ignore, symlinks=True)
    if version is not None:
        meta = copy / "recipe" / "meta.yaml"
        text, count = re.subn(r'^\{% set version = "[^"]+" %\}$', f'{{% set version = "{version}" %}}',
                              meta.read_text(), flags=re.MULTILINE)  # fmt: skip
        assert count == 1, "meta.yaml's version line changed: update this test"
        meta.write_text(text)
    for args in (["init", "-q"], ["add", "-A", "-f", "."], ["commit", "-qm", "snapshot"]):
        git(copy, *args)
    proc = subprocess.run([*shlex.split(command), str(copy)], capture_output=True, text=True, timeout=2700)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return copy


def test_a_release_candidate_rerenders_to_pytorch_rc_configs_only(repo_root: Path, tmp_path: Path) -> None:
    """An rc version: every config uploads to the pytorch_rc label (the committed, release ones to
    main), the same configs otherwise (channel_targets zipped with is_rc, meta.yaml's skip)."""
    release = sorted(p.name for p in (repo_root / ".ci_support").glob("*.yaml"))
    assert release and all("channel_targetsconda-forge_main" in n and "is_rcFalse" in n for n in release)
    candidate = sorted(
        p.name for p in (rerendered(repo_root, tmp_path, "2.16.0rc1") / ".ci_support").glob("*.yaml")
    )
    expected = [
        n.replace("conda-forge_main", "conda-forge_pytorch_rc").replace("is_rcFalse", "is_rcTrue")
        for n in release
    ]
    assert candidate == sorted(expected)


def test_files_match_a_fresh_rerender(repo_root: Path, tmp_path: Path) -> None:
    copy = rerendered(repo_root, tmp_path)
    ours, theirs = generated_files(repo_root), generated_files(copy)
    assert sorted(ours) == sorted(theirs), "the rerender adds or removes generated files"
    for rel in ours:
        assert ours[rel] == theirs[rel], f"{rel} differs from conda-smithy's output"
    assert (copy / "build-locally.py").read_bytes() == (repo_root / "build-locally.py").read_bytes(), (
        "the rerender replaced build-locally.py: add it to skip_render in conda-forge.yml"
    )


def test_cross_checks_fail_instead_of_skipping_when_required(repo_root: Path) -> None:
    if shutil.which("conda-smithy") or os.environ.get("CONDA_SMITHY_RERENDER"):
        pytest.skip("conda-smithy is available here, so the rerender would run instead of skipping")
    node = "tests/test_ci_scripts.py::test_files_match_a_fresh_rerender"
    env = {k: v for k, v in os.environ.items() if k != REQUIRE_ENV}
    run = [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node]
    relaxed = subprocess.run(run, cwd=repo_root, env=env, capture_output=True, text=True, timeout=300)
    assert relaxed.returncode == 0 and "1 skipped" in relaxed.stdout, relaxed.stdout[-2000:]
    strict = subprocess.run(
        run, cwd=repo_root, env={**env, REQUIRE_ENV: "1"}, capture_output=True, text=True, timeout=300
    )
    assert strict.returncode == 1 and "1 failed" in strict.stdout, strict.stdout[-2000:]
    assert f"{REQUIRE_ENV} is set but the cross-check cannot run" in strict.stdout


# -- no workflow but conda-smithy's; the cross-checks as one command -----------------------------


def test_the_only_workflow_is_conda_smithys(repo_root: Path) -> None:
    """conda-smithy's linter (``conda smithy lint --conda-forge``, rule 15) rejects any other
    workflow in a conda-forge feedstock: the cross-checks run as python -m feedstock cross-check."""
    workflows = repo_root / ".github" / "workflows"
    assert sorted(p.name for p in workflows.iterdir()) == [SMITHY_WORKFLOW.name]


def test_ci_run_is_the_readme_test_command(repo_root: Path) -> None:
    ci_command = (repo_root / ".ci" / "run").read_text().rstrip().splitlines()[-1]
    readme_lines = (repo_root / "README.md").read_text().splitlines()
    assert ci_command in readme_lines, ".ci/run must run exactly the README's test command"


@pytest.fixture(scope="module")
def runner() -> ModuleType:
    return importlib.import_module("feedstock.cross_checks.run_cross_checks")


def test_the_cross_check_command_names_real_tests(repo_root: Path, runner: ModuleType) -> None:
    """A renamed test would leave the command collecting nothing (or failing on a missing node)."""
    nodes = list(runner.CROSS_CHECKS)
    assert "tests/test_render_recipe.py::test_matches_conda_build_render" in nodes
    assert "tests/test_ci_scripts.py::test_files_match_a_fresh_rerender" in nodes
    assert runner.REQUIRE_ENV == REQUIRE_ENV
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *nodes]
    proc = subprocess.run(collect, cwd=repo_root, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for node in nodes:
        assert node in proc.stdout, f"{node} collects nothing"


def test_the_cross_check_tools_are_the_pinned_versions(runner: ModuleType) -> None:
    refs = {s.name: s.ref for s in runner.SOURCES}
    assert refs["conda"] == "26.7.1"
    assert refs["conda-build"] == "26.7.1"
    assert refs["conda-smithy"] == "v2026.8.5"
    packages = [s for s in runner.SOURCES if s.package]
    assert [s.version for s in packages] == ["26.7.1", "26.7.1", "2026.8.5", "1.4.15"]


def test_sources_are_taken_from_a_local_repository_at_the_pinned_ref(
    runner: ModuleType, tmp_path: Path
) -> None:
    """The offline path: --sources holds git repositories; the pinned tag is extracted, not the
    checkout, and tests/ is left out."""
    repo = tmp_path / "sources" / "conda"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "big.dat").write_text("left out\n")
    (repo / "pyproject.toml").write_text("tagged\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "one")
    git(repo, "tag", "26.7.1")
    (repo / "pyproject.toml").write_text("after the tag\n")
    git(repo, "commit", "-qam", "two")
    conda = next(s for s in runner.SOURCES if s.name == "conda")
    assert runner.take_local(conda, tmp_path / "sources", tmp_path / "out") is None
    assert (tmp_path / "out" / "pyproject.toml").read_text() == "tagged\n"
    assert not (tmp_path / "out" / "tests").exists()
    later = dataclasses.replace(conda, ref="26.8.0")
    assert runner.take_local(later, tmp_path / "sources", tmp_path / "out2") == "conda 26.8.0 in conda/"


def test_missing_sources_are_named_in_one_line(repo_root: Path, tmp_path: Path) -> None:
    proc = subprocess.run(
        tool_argv("cross-check", "--sources", str(tmp_path)), capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for name in ("conda/", "conda-build/", "conda-smithy/", "rattler-build-conda-compat/"):
        assert name in lines[0]


def test_the_wheel_provisioning_reads_the_recipe(repo_root: Path) -> None:
    """The program .ci/provision-upstream-wheels.sh runs to list the wheels it needs: it imports only
    what exists and names every platform with a wheel of its own (a broken import there would only
    warn, and the tests on real wheels would skip or fail without saying why)."""
    script = (repo_root / ".ci" / "provision-upstream-wheels.sh").read_text()
    program = re.search(r"<<'PY'\n(.*?)\nPY\n", script, re.S)
    assert program is not None, "no python program in .ci/provision-upstream-wheels.sh"
    proc = subprocess.run(
        [sys.executable, "-c", program.group(1)], capture_output=True, text=True, timeout=120, cwd=repo_root
    )
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    tags = {facts.pip_tag for facts in PLATFORMS if not facts.stood_in_by}
    assert {row[1] for row in rows} == tags and all(len(row) == 4 for row in rows), proc.stdout
