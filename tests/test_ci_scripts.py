"""The conda-smithy generated CI files: .github/workflows/conda-build.yml and .scripts/*.sh.

The checks restate what conda-smithy's templates (github-actions.yml.tmpl, build_steps.sh.tmpl,
run_docker_build.sh.tmpl) produce for this feedstock's conda-forge.yml and .ci_support configs,
so a hand edit or a stale rerender shows up here. With ``CONDA_SMITHY_RERENDER`` set to a
command that rerenders a feedstock directory in place (e.g. an offline conda-smithy wrapper),
``test_files_match_a_fresh_rerender`` also compares every generated file (.ci_support, .scripts,
.github, .circleci, LICENSE.txt, .gitattributes) byte for byte, executable bits included.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

GENERATED = (
    ".github/workflows/conda-build.yml",
    ".scripts/build_steps.sh",
    ".scripts/logging_utils.sh",
    ".scripts/run_docker_build.sh",
    ".scripts/run_osx_build.sh",
)
SECRETS = ("BINSTAR_TOKEN", "FEEDSTOCK_TOKEN", "STAGING_BINSTAR_TOKEN")

# conda-smithy's GITHUB_ACTIONS_RUNS_ON (configure_feedstock.py)
HOSTED_LABELS = {
    "linux-64": ["ubuntu-latest"],
    "linux-aarch64": ["ubuntu-24.04-arm"],
    "osx-64": ["macos-15-intel"],
    "osx-arm64": ["macos-15"],
}
SELF_HOSTED_LABELS = {
    "linux-64": ["linux", "x64"],
    "linux-aarch64": ["linux", "ARM64"],
    "osx-64": ["macOS", "x64"],
    "osx-arm64": ["macOS", "arm64"],
}
# what conda_build_tool puts on the build command line (build_steps.sh.tmpl)
BUILD_COMMANDS = {
    "conda-build": "conda-build",
    "mambabuild": "conda-mambabuild",
    "conda-build+conda-libmamba-solver": "CONDA_SOLVER=libmamba conda-build",
    "conda-build+classic": "CONDA_SOLVER=classic conda-build",
}


@pytest.fixture(scope="module")
def forge(repo_root: Path) -> dict[str, Any]:
    return yaml.safe_load((repo_root / "conda-forge.yml").read_text()) or {}


@pytest.fixture(scope="module")
def configs(repo_root: Path) -> dict[str, dict[str, list[str]]]:
    found = {
        p.stem: yaml.safe_load(p.read_text())
        for p in sorted((repo_root / ".ci_support").glob("*.yaml"))
        if p.stem.startswith(("linux_", "osx_"))
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


def build_platform(forge: dict[str, Any], config: dict[str, list[str]]) -> str:
    target = config["target_platform"][0].replace("-", "_")
    return (forge.get("build_platform") or {}).get(target, target).replace("_", "-")


def config_name_short(name: str) -> str:
    if len(name) >= 49:
        return name[:40] + "_h" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name


def expected_runs_on(name: str, platform: str, config: dict[str, list[str]]) -> list[str]:
    """conda-smithy's runs-on rules for github_actions_labels."""
    labels = [str(v) for v in config.get("github_actions_labels") or ["hosted"]]
    if labels in (["hosted"], ["default"]):
        labels = HOSTED_LABELS[platform]
    elif any(label.startswith("self-hosted@") for label in labels):
        stripped = [label.replace("self-hosted@", "") for label in labels]
        labels = list(dict.fromkeys([*stripped, *SELF_HOSTED_LABELS[platform], "self-hosted"]))
    result = []
    for label in labels:
        if label.startswith("cirun-"):
            label += "--${{ github.run_id }}-" + config_name_short(name)
        if label.startswith("namespace-profile-") and "-on-linux-" in label:
            label += ";container.privileged=true;container.mount-scratch=true"
        result.append(label)
    return result


# -- the workflow matrix -------------------------------------------------------------------------


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


def test_matrix_entries_match_their_configs(matrix, configs, forge) -> None:
    store = bool((forge.get("github_actions") or {}).get("store_build_artifacts"))
    for entry in matrix:
        name = entry["CONFIG"]
        config = configs[name]
        platform = build_platform(forge, config)
        assert entry["UPLOAD_PACKAGES"] is True, name
        assert entry["STORE_BUILD_ARTIFACTS"] is store, name
        if store:
            assert entry["CONFIG_SHORT"] == config_name_short(name)
        else:
            assert "CONFIG_SHORT" not in entry
        assert entry["runs_on"] == expected_runs_on(name, platform, config), name
        if name.startswith("linux_"):
            assert entry["os"] == "ubuntu"
            assert entry["DOCKER_IMAGE"] == config["docker_image"][-1]
            assert entry["build_workspace_dir"] == "build_artifacts"
            gpu = any("gpu" in label.lower() for label in entry["runs_on"])
            assert ("--gpus all" in str(entry["docker_run_args"] or "")) is gpu
        else:
            assert entry["os"] == "macos"
            assert "DOCKER_IMAGE" not in entry


def test_self_hosted_labels_come_from_the_configs(matrix, configs) -> None:
    """Scaling past one machine: every linux job runs on the labels its config asks for."""
    for entry in matrix:
        labels = configs[entry["CONFIG"]].get("github_actions_labels")
        if labels:
            assert all(str(lab) in " ".join(entry["runs_on"]) for lab in labels)


def test_workflow_settings_follow_conda_forge_yml(workflow, forge) -> None:
    gha = forge.get("github_actions") or {}
    job = workflow["jobs"]["build"]
    assert job["timeout-minutes"] == gha.get("timeout_minutes", 360)
    assert job["runs-on"] == "${{ matrix.runs_on }}"
    assert job["strategy"]["fail-fast"] is False
    triggers = gha.get("triggers") or ["push", "pull_request"]
    assert sorted(workflow[True]) == sorted(triggers)  # YAML 1.1 reads the `on:` key as True


def test_build_steps_run_the_generated_scripts(workflow) -> None:
    steps = {s.get("name"): s for s in workflow["jobs"]["build"]["steps"]}
    linux = steps["Build on Linux"]
    assert linux["if"] == "matrix.os == 'ubuntu'"
    assert linux["run"].rstrip().endswith("./.scripts/run_docker_build.sh")
    assert linux["env"]["CONFIG"] == "${{ matrix.CONFIG }}"
    assert linux["env"]["DOCKER_IMAGE"] == "${{ matrix.DOCKER_IMAGE }}"
    assert linux["env"]["UPLOAD_PACKAGES"] == "${{ matrix.UPLOAD_PACKAGES }}"
    assert 'export IS_PR_BUILD="True"' in linux["run"]
    macos = steps["Build on macOS"]
    assert macos["run"].rstrip().endswith("./.scripts/run_osx_build.sh")
    for step in (linux, macos):
        for secret in SECRETS:
            assert step["env"][secret] == "${{ secrets." + secret + " }}"
            assert secret not in step["run"]  # only handed over through the environment


def installed_specs(build_steps: str) -> list[str]:
    """Words of the `micromamba install ...` command (with its continuation lines)."""
    match = re.search(r"^micromamba install (?:.*\\\n)*.*$", build_steps, re.M)
    assert match, "micromamba install command missing from build_steps.sh"
    return match.group(0).replace("\\\n", " ").split()


# -- the scripts ---------------------------------------------------------------------------------


def test_scripts_carry_the_conda_smithy_header(repo_root: Path) -> None:
    for rel in (".scripts/build_steps.sh", ".scripts/run_docker_build.sh"):
        assert "automatically generated by conda-smithy" in (repo_root / rel).read_text(), rel
    for rel in (".scripts/build_steps.sh", ".scripts/run_docker_build.sh", ".scripts/run_osx_build.sh"):
        assert os.access(repo_root / rel, os.X_OK), f"{rel} must be executable"
    logging = (repo_root / ".scripts" / "logging_utils.sh").read_text()
    assert "function startgroup" in logging and "function endgroup" in logging


def test_build_command_follows_conda_build_tool(repo_root: Path, forge) -> None:
    tool = forge.get("conda_build_tool", "conda-build")
    assert tool in BUILD_COMMANDS, f"unexpected conda_build_tool {tool!r}"
    text = (repo_root / ".scripts" / "build_steps.sh").read_text()
    build_line = f'CONDA_SUBDIR="${{BUILD_PLATFORM}}" {BUILD_COMMANDS[tool]} \\\n        "${{RECIPE_ROOT}}"'
    assert build_line in text
    assert ("boa" in installed_specs(text)) is (tool == "mambabuild")
    if tool.startswith("conda-build"):
        assert 'CONDA_SUBDIR="${BUILD_PLATFORM}" conda debug' in text
    else:
        assert "is not currently supported in debug mode" in text


def test_output_validation_follows_conda_forge_yml(repo_root: Path, forge) -> None:
    text = (repo_root / ".scripts" / "build_steps.sh").read_text()
    validate = bool(forge.get("conda_forge_output_validation"))
    assert ('validate_recipe_outputs "${FEEDSTOCK_NAME}"' in text) is validate
    assert ('upload_package --validate --feedstock-name="${FEEDSTOCK_NAME}"' in text) is validate


def test_validation_feedstock_name_is_the_repository_name(repo_root: Path, workflow) -> None:
    """Output validation checks against FEEDSTOCK_NAME: the GitHub repository's name in CI
    (conda-forge/pytorch-cpu-feedstock, whose outputs feedstock-outputs registers), the checkout's
    directory name in local docker builds. No generated file spells a feedstock name itself."""
    steps = {s.get("name"): s for s in workflow["jobs"]["build"]["steps"]}
    for name in ("Build on Linux", "Build on macOS"):
        assert 'export FEEDSTOCK_NAME="$(basename $GITHUB_REPOSITORY)"' in steps[name]["run"]
    docker = (repo_root / ".scripts" / "run_docker_build.sh").read_text()
    assert "export FEEDSTOCK_NAME=$(basename ${FEEDSTOCK_ROOT})" in docker
    assert "-e FEEDSTOCK_NAME \\" in docker
    for rel in GENERATED:
        assert not re.search(r"pytorch(-cpu)?-feedstock", (repo_root / rel).read_text()), rel


def test_tokens_are_never_expanded_in_scripts(repo_root: Path) -> None:
    """Under `set -x` an expanded token would be echoed into the public log."""
    for rel in (".scripts/build_steps.sh", ".scripts/run_docker_build.sh", ".scripts/run_osx_build.sh"):
        text = (repo_root / rel).read_text()
        for secret in SECRETS:
            assert not re.search(rf"\$\{{?{secret}\b", text), f"{rel} expands {secret}"
    docker = (repo_root / ".scripts" / "run_docker_build.sh").read_text()
    for secret in SECRETS:
        assert f"-e {secret} \\" in docker  # forwarded by name only


def test_docker_run_mounts_recipe_and_feedstock(repo_root: Path) -> None:
    text = (repo_root / ".scripts" / "run_docker_build.sh").read_text()
    assert '-v "${RECIPE_ROOT}":/home/conda/recipe_root:rw${VOLUME_SUFFIX},delegated' in text
    assert '-v "${FEEDSTOCK_ROOT}":/home/conda/feedstock_root:rw${VOLUME_SUFFIX},delegated' in text
    assert 'RECIPE_ROOT="${FEEDSTOCK_ROOT}/recipe"' in text
    assert 'DONE_CANARY="$ARTIFACTS/conda-forge-build-done-${CONFIG}"' in text


# -- optional: byte-for-byte against a real rerender ---------------------------------------------

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


def test_files_match_a_fresh_rerender(repo_root: Path, tmp_path: Path) -> None:
    command = os.environ.get("CONDA_SMITHY_RERENDER")
    if not command:
        pytest.skip("set CONDA_SMITHY_RERENDER to an offline `rerender <feedstock dir>` command")
    copy = tmp_path / "feedstock"
    ignore = shutil.ignore_patterns(".git", "build_artifacts", "__pycache__", ".pytest_cache", ".ruff_cache")
    shutil.copytree(repo_root, copy, ignore=ignore, symlinks=True)
    git_env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    for args in (["init", "-q"], ["add", "-A", "-f", "."], ["commit", "-qm", "snapshot"]):
        subprocess.run(["git", *args], cwd=copy, env=git_env, check=True, capture_output=True)
    proc = subprocess.run([*shlex.split(command), str(copy)], capture_output=True, text=True, timeout=2700)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    ours, theirs = generated_files(repo_root), generated_files(copy)
    assert sorted(ours) == sorted(theirs), "the rerender adds or removes generated files"
    for rel in ours:
        assert ours[rel] == theirs[rel], f"{rel} differs from conda-smithy's output"
    assert (copy / "build-locally.py").read_bytes() == (repo_root / "build-locally.py").read_bytes(), (
        "the rerender replaced build-locally.py: add it to skip_render in conda-forge.yml"
    )


# -- optional: the conda_build_tool branch of conda-smithy's own templates -----------------------

_RENDER_TEMPLATE = r"""
import os, shutil, sys, tempfile, types
import yaml
sys.modules.setdefault("cirun", types.SimpleNamespace(Cirun=None))  # only needed by the CLI
from conda_smithy import configure_feedstock as cf

forge_yml, pinning, tool, template = sys.argv[1:5]
tmp = tempfile.mkdtemp()
with open(forge_yml) as fh:
    forge = yaml.safe_load(fh) or {}
forge["conda_build_tool"] = tool
with open(os.path.join(tmp, "conda-forge.yml"), "w") as fh:
    yaml.safe_dump(forge, fh)
os.makedirs(os.path.join(tmp, "recipe"))
open(os.path.join(tmp, "recipe", "meta.yaml"), "w").close()
config = cf._load_forge_config(tmp, pinning)
config["local_ci_setup"] = False
config["build_setup"] = cf._get_build_setup_line(tmp, "linux", config)
sys.stdout.write(cf.make_jinja_env(tmp).get_template(template).render(**config) + "\n")
shutil.rmtree(tmp)
"""


def render_smithy_template(repo_root: Path, tool: str, template: str) -> str:
    python = os.environ.get("CONDA_SMITHY_PYTHON")
    pinning = os.environ.get("CONDA_FORGE_PINNING")
    if not python or not pinning:
        pytest.skip(
            "set CONDA_SMITHY_PYTHON (an interpreter with conda-smithy) and CONDA_FORGE_PINNING "
            "(conda-forge-pinning's conda_build_config.yaml), in an environment where conda-smithy "
            "works offline, to render conda-smithy's templates"
        )
    proc = subprocess.run(
        [python, "-c", _RENDER_TEMPLATE, str(repo_root / "conda-forge.yml"), pinning, tool, template],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize(
    ("rel", "template"),
    [
        (".scripts/build_steps.sh", "build_steps.sh.tmpl"),
        (".scripts/run_docker_build.sh", "run_docker_build.sh.tmpl"),
    ],
)
def test_scripts_equal_conda_smithys_templates(repo_root: Path, forge, rel: str, template: str) -> None:
    tool = forge.get("conda_build_tool", "conda-build")
    assert render_smithy_template(repo_root, tool, template) == (repo_root / rel).read_text()


@pytest.mark.parametrize("tool", ["conda-build", "mambabuild"])
def test_conda_build_tool_branch_of_the_template(repo_root: Path, tool: str) -> None:
    text = render_smithy_template(repo_root, tool, "build_steps.sh.tmpl")
    command = BUILD_COMMANDS[tool]
    assert f'CONDA_SUBDIR="${{BUILD_PLATFORM}}" {command} \\' in text
    assert ("boa" in installed_specs(text)) is (tool == "mambabuild")
