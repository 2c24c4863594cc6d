"""The CUDA libtorch's activation scripts: CF_TORCH_CUDA_ARCH_LIST, as conda-forge's libtorch has it.

``megabuild activation-scripts`` (run by install_libtorch.sh / .bat) writes
``etc/conda/{activate,deactivate}.d/libtorch_*`` from ``recipe/activation/`` with the build's own
list (``megabuild env``'s TORCH_CUDA_ARCH_LIST) for every CUDA config and nothing for a CPU one.
The sh scripts are sourced as conda does
(``feedstock.conda_build_standin.compiler_activation.run_activation_scripts``) in bash
and dash; the .bat scripts are interpreted with cmd's rules for the few constructs they use (no
cmd.exe here). The e2e check (a real CUDA libtorch package, its activated test env, an extension
build with the real nvcc) is in tests/test_cuda_megabuild.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from feedstock import parity
from feedstock.conda_build_standin.compiler_activation import run_activation_scripts
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from megabuild import model
from megabuild.buildenv import switches
from megabuild.buildenv.activation import PLACEHOLDER, TEMPLATES, VARIABLE, activation_scripts
from megabuild.buildenv.target import BuildTarget
from support.bld_bat import apply_set, expand

BACKUP = f"{VARIABLE}_BACKUP"
SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]
USER_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}


TARGETS = sorted(set(parity.build_targets(list_configs(REPO))), key=str)


def _cli(prefix: Path, target: BuildTarget) -> subprocess.CompletedProcess[str]:
    env = {
        **USER_ENV,
        "PYTHONPATH": str(RECIPE),
        "target_platform": target.target_platform,
        "cuda_compiler_version": target.cuda or "None",
        "blas_impl": target.blas_impl,
        **({model.ARM_VARIANT_KEY: target.arm_variant} if target.arm_variant else {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "megabuild", "activation-scripts", "--prefix", str(prefix)],
        env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def _installed(prefix: Path) -> list[str]:
    return sorted(str(p.relative_to(prefix)) for p in prefix.rglob("*") if p.is_file())


# ------------------------------------------------------------------------------------------------
# what is installed: the build's own list, CUDA configs only, the platform's shell
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS, ids=str)
def test_every_cuda_config_installs_the_list_megabuild_env_builds_with(
    target: BuildTarget, tmp_path: Path
) -> None:
    proc = _cli(tmp_path, target)
    assert proc.returncode == 0, proc.stderr
    if target.cuda is None:
        assert _installed(tmp_path) == []
        return
    ext = "bat" if target.is_windows else "sh"
    assert _installed(tmp_path) == [
        f"etc/conda/activate.d/libtorch_activate.{ext}",
        f"etc/conda/deactivate.d/libtorch_deactivate.{ext}",
    ]
    arch_list = switches(target)["TORCH_CUDA_ARCH_LIST"]
    activate = (tmp_path / f"etc/conda/activate.d/libtorch_activate.{ext}").read_bytes().decode()
    assert PLACEHOLDER not in activate
    assert (f"'{arch_list}'" if ext == "sh" else f'"{VARIABLE}={arch_list}"') in activate
    # cmd's parser wants CRLF; sh scripts keep LF
    for path in (tmp_path / "etc/conda").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert (data.count(b"\r\n") == data.count(b"\n")) is target.is_windows, path


def test_the_cuda_configs_are_covered() -> None:
    """The parametrisation above is not empty where it matters: every platform with CUDA configs."""
    assert {t.target_platform for t in TARGETS if t.cuda} >= {"linux-64", "linux-aarch64", "win-64"}


def test_an_unknown_target_is_one_line_and_writes_nothing(tmp_path: Path) -> None:
    proc = _cli(tmp_path, BuildTarget("linux-64", "linux-64", "11.0", "generic"))
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no CUDA architecture list" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and _installed(tmp_path) == []


def test_a_list_that_would_need_quoting_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from megabuild.buildenv import activation
    from megabuild.errors import MegabuildError

    monkeypatch.setattr(activation, "switches", lambda _t: {"TORCH_CUDA_ARCH_LIST": "8.0' ; rm -rf ~ ; '"})
    with pytest.raises(MegabuildError, match="is not a list"):
        activation.activation_scripts(BuildTarget("linux-64", "linux-64", "13.0", "generic"))


# ------------------------------------------------------------------------------------------------
# sh: sourced as conda does, in bash and dash
# ------------------------------------------------------------------------------------------------


LINUX_CUDA = BuildTarget("linux-64", "linux-64", "13.0", "generic")


def _sh_prefix(tmp_path: Path, templates: Path = TEMPLATES) -> Path:
    prefix = tmp_path / "env"
    for dest, text in activation_scripts(LINUX_CUDA, templates).items():
        (prefix / dest).parent.mkdir(parents=True, exist_ok=True)
        (prefix / dest).write_text(text)
    return prefix


def _sh_problems(prefix: Path, shell: str) -> list[str]:
    """What is wrong with the activation of ``prefix``: the list exported when unset, a user's value
    (also an empty one) kept, and deactivation restoring the environment exactly."""
    problems = []
    wanted = switches(LINUX_CUDA)["TORCH_CUDA_ARCH_LIST"]
    for before in ({}, {VARIABLE: "8.9"}, {VARIABLE: ""}):
        start = {**USER_ENV, **before}
        try:
            active = run_activation_scripts(prefix, start, shell=shell)
            after = run_activation_scripts(prefix, active, deactivate=True, shell=shell)
        except RuntimeError as exc:
            problems.append(f"{before}: {exc}")
            continue
        expected = before.get(VARIABLE, wanted)
        if active.get(VARIABLE) != expected:
            problems.append(f"{before}: activated {VARIABLE}={active.get(VARIABLE)!r}, not {expected!r}")
        if after != start:
            changed = sorted(k for k in {*after, *start} if after.get(k) != start.get(k))
            problems.append(f"{before}: deactivation changed {changed}")
    return problems


@pytest.mark.parametrize("shell", SHELLS)
def test_activation_exports_the_list_keeps_a_users_value_and_deactivation_restores(
    tmp_path: Path, shell: str
) -> None:
    assert _sh_problems(_sh_prefix(tmp_path), shell) == []


def test_reactivation_keeps_the_list(tmp_path: Path) -> None:
    """conda's reactivate (after an install into the active env): deactivate, then activate."""
    prefix = _sh_prefix(tmp_path)
    active = run_activation_scripts(prefix, USER_ENV)
    again = run_activation_scripts(prefix, run_activation_scripts(prefix, active, deactivate=True))
    assert again == active


_NAIVE = {
    # always exported: a user's list is overwritten
    "libtorch_activate.sh": f"export {VARIABLE}='{PLACEHOLDER}'\n",
    # always removed: a user's list is lost on deactivation
    "libtorch_deactivate.sh": f"unset {VARIABLE}\n",
}
_BASH_ONLY = {
    # conda-forge's test of "set": bash's [[ -v ]], which dash (conda's sh activation) does not have
    "libtorch_activate.sh": f'if [[ ! -v {VARIABLE} ]]; then\n  export {VARIABLE}="{PLACEHOLDER}"\n'
    f'  export {BACKUP}="NOT_SET"\nfi\n',
}


@pytest.mark.parametrize(
    ("planted", "shell"), [(_NAIVE, "bash"), (_BASH_ONLY, "dash")], ids=["naive", "bash-only"]
)
def test_planted_scripts_are_caught(tmp_path: Path, planted: Mapping[str, str], shell: str) -> None:
    if not shutil.which(shell):
        pytest.skip(f"{shell} not installed")
    templates = tmp_path / "templates"
    shutil.copytree(TEMPLATES, templates)
    for name, text in planted.items():
        (templates / name).write_text(text)
    assert _sh_problems(_sh_prefix(tmp_path, templates), shell) != []


def test_sh_templates_parse_and_are_shellcheck_clean() -> None:
    for script in sorted(TEMPLATES.glob("*.sh")):
        for shell in SHELLS:
            proc = subprocess.run([shell, "-n", str(script)], capture_output=True, text=True, check=False)
            assert proc.returncode == 0, (shell, script, proc.stderr)
        if shutil.which("shellcheck"):
            proc = subprocess.run(["shellcheck", "--shell=sh", str(script)], capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout


# ------------------------------------------------------------------------------------------------
# cmd: the .bat scripts, interpreted with cmd's rules for what they use
# ------------------------------------------------------------------------------------------------

_IF_NOT_DEFINED = re.compile(r"^@if not defined (\w+) \($")
_IF_EQUAL = re.compile(r'^@if "%(\w+)%" == "([^"%]*)" \($')
_SET = re.compile(r'^set "(.*)"$')


def run_bat(text: str, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` after cmd ran ``text``: ``@REM`` lines, ``@set "K=V"`` lines, and ``@if not defined
    NAME (`` / ``@if "%NAME%" == "VALUE" (`` blocks of ``set "K=V"`` lines closed by ``)``. A block
    is percent-expanded once, when read (cmd's rule); any other line is an error."""
    out = dict(env)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if line.upper().startswith("@REM"):
            continue
        if line.startswith("@set ") and (setter := _SET.match(line[1:])):
            apply_set(setter[1], out)
            continue
        if match := _IF_NOT_DEFINED.match(line):
            taken = match[1] not in out  # cmd: a defined variable is never empty
        elif match := _IF_EQUAL.match(line):
            taken = out.get(match[1], "") == match[2]
        else:
            raise ValueError(f"a line the .bat interpreter does not know: {line!r}")
        block = []
        while lines[index] != ")":
            block.append(expand(lines[index], out))
            index += 1
        index += 1
        for inner in block:
            if not (setter := _SET.match(inner)):
                raise ValueError(f"a block line the .bat interpreter does not know: {inner!r}")
            if taken:
                apply_set(setter[1], out)
    return out


WIN_CUDA = BuildTarget("win-64", "win-64", "13.0", "mkl")


def _bat_problems(scripts: Mapping[str, str]) -> list[str]:
    """As :func:`_sh_problems`, for the cmd twins (cmd has no empty variable: two cases)."""
    problems = []
    wanted = switches(WIN_CUDA)["TORCH_CUDA_ARCH_LIST"]
    for before in ({}, {VARIABLE: "8.9"}):
        start = {**USER_ENV, **before}
        active = run_bat(scripts["libtorch_activate.bat"], start)
        if active.get(VARIABLE) != before.get(VARIABLE, wanted):
            problems.append(f"{before}: activated {VARIABLE}={active.get(VARIABLE)!r}")
        if run_bat(scripts["libtorch_deactivate.bat"], active) != start:
            problems.append(f"{before}: deactivation changed the environment")
    return problems


@pytest.fixture(scope="module")
def bat_scripts() -> dict[str, str]:
    return {Path(dest).name: text for dest, text in activation_scripts(WIN_CUDA).items()}


def test_bat_activation_exports_the_list_keeps_a_users_value_and_deactivation_restores(
    bat_scripts: dict[str, str],
) -> None:
    assert _bat_problems(bat_scripts) == []


def test_bat_scripts_keep_cmds_rules(bat_scripts: dict[str, str]) -> None:
    """No ``@echo off`` (it would switch echo off in the user's session too), no comment inside a
    block (``::`` there breaks cmd's parse), every command line silenced with ``@``."""
    for name, text in bat_scripts.items():
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        assert not any(line.lower().startswith(("@echo", "echo")) for line in lines), name
        depth = 0
        for line in lines:
            if depth:
                assert not line.startswith(("::", "@REM", "REM")), (name, line)
            else:
                assert line.startswith("@"), (name, line)
            depth += line.endswith("(") - (line == ")")
        assert depth == 0, name


def test_planted_bat_mistakes_are_caught(bat_scripts: dict[str, str]) -> None:
    """The naive cmd twins (always set, always clear) fail the behaviour check."""
    always_set = f'@set "{VARIABLE}=8.0+PTX"\n@set "{BACKUP}=NOT_SET"\n'
    always_clear = f'@set "{VARIABLE}="\n@set "{BACKUP}="\n'
    assert _bat_problems({**bat_scripts, "libtorch_activate.bat": always_set}) != []
    assert _bat_problems({**bat_scripts, "libtorch_deactivate.bat": always_clear}) != []
    with pytest.raises(ValueError, match="does not know"):
        run_bat("@call other.bat\n", USER_ENV)


# ------------------------------------------------------------------------------------------------
# the libtorch output's scripts run the command and name the variant keys it reads
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("script", "pattern"), [("install_libtorch.sh", r"\$\{?%s\b"), ("install_libtorch.bat", r"%%%s%%")]
)
def test_install_libtorch_writes_the_scripts_and_names_the_keys(script: str, pattern: str) -> None:
    text = (RECIPE / script).read_text()
    assert "-m megabuild activation-scripts --prefix" in text
    for key in ("cuda_compiler_version", "blas_impl"):
        # conda-build counts a key as used (and exports it) when it is the first $ of a line (sh)
        lines = [line for line in text.splitlines() if not line.startswith(("#", "@REM"))]
        uses = [line for line in lines if re.search(pattern % key, line)]
        if script.endswith(".sh"):
            uses = [line for line in uses if re.match(r"[^$]*" + pattern % key, line)]
        assert uses, f"{script} names no {key} where conda-build sees it"


def test_the_templates_hold_the_placeholder_once() -> None:
    for name in ("libtorch_activate.sh", "libtorch_activate.bat"):
        assert (TEMPLATES / name).read_text().count(PLACEHOLDER) == 1, name
    for name in ("libtorch_deactivate.sh", "libtorch_deactivate.bat"):
        assert PLACEHOLDER not in (TEMPLATES / name).read_text(), name
    assert os.path.commonpath([TEMPLATES, RECIPE]) == str(RECIPE), "conda-build sees recipe/ only"


@pytest.mark.parametrize("script", ["install_libtorch.sh", "install_libtorch.bat"])
def test_conda_builds_scanner_sees_the_keys(script: str) -> None:
    """The same as above with conda-build's own scanner (cross-check: needs conda-build)."""
    from support.cross_checks import import_tool

    variants = import_tool("conda_build.variants")
    keys = ["cuda_compiler_version", "blas_impl"]
    scan = (
        variants.find_used_variables_in_batch_script
        if script.endswith(".bat")
        else variants.find_used_variables_in_shell_script
    )
    assert set(scan(keys, RECIPE / script)) == set(keys)
