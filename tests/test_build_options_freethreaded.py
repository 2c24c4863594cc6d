"""The pytorch step of a free-threaded Python is named ``3.14t`` (conda-build's PY_VER says 3.14).

Otherwise a 3.14t output would count as the 3.14 build in build-state, write the same telemetry
file and ask the swap for the GIL build.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from feedstock.paths import RECIPE
from megabuild.pipeline.options import from_environment

BASE = {
    "PKG_NAME": "pytorch",
    "SRC_DIR": "/w/src",
    "RECIPE_DIR": "/w/recipe",
    "PREFIX": "/w/h_env",
    "target_platform": "linux-64",
    "cuda_compiler_version": "None",
    "PY_VER": "3.14",
}


@pytest.mark.parametrize(
    ("extra", "py_ver"),
    [
        ({"python": "3.14.* *_cp314", "SP_DIR": "/w/h_env/lib/python3.14/site-packages"}, "3.14"),
        ({"python": "3.14.* *_cp314t", "SP_DIR": "/w/h_env/lib/python3.14t/site-packages"}, "3.14t"),
        ({"SP_DIR": "/w/h_env/lib/python3.14t/site-packages"}, "3.14t"),  # no variant exported
        ({"python": "3.14.* *_cp314t", "SP_DIR": "D:/bld/_h_env/Lib/site-packages"}, "3.14t"),  # Windows
    ],
)
def test_free_threaded_py_ver(extra: dict[str, str], py_ver: str) -> None:
    opts = from_environment(BASE | extra)
    assert opts.py_ver == py_ver


def test_build_state_accepts_the_t_build() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "megabuild", "build-state", "restore", "--build-dir", "/nonexistent/build",
         "--state", "/nonexistent/state", "--python", "3.14t", "--dry-run"],
        env={"PYTHONPATH": str(RECIPE)}, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "expected a Python version" not in proc.stderr, proc.stderr
