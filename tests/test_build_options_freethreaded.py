"""The pytorch step of a free-threaded Python is named ``3.14t`` (conda-build's PY_VER says 3.14).

Otherwise a 3.14t output would count as the 3.14 build in build-state, write the same telemetry
file and ask the swap for the GIL build.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.parametrize(
    ("record", "py_ver", "site"),
    [
        ({"version": "3.12.1", "build": "h0_cpython"}, "3.12", "lib/python3.12/site-packages"),
        (
            {"version": "3.13.5", "build": "h9a34b6e_5_cp313t",
             "python_site_packages_path": "lib/python3.13t/site-packages"},
            "3.13t",
            "lib/python3.13t/site-packages",
        ),
    ],
)  # fmt: skip
def test_the_host_python_record_wins_over_py_ver_and_sp_dir(
    tmp_path: Path, record: dict[str, str], py_ver: str, site: str
) -> None:
    """What the real conda-build gave the recipe's scripts: the top level (host python 3.12) got
    the variant's ``PY_VER`` (3.13), and a later output's ``SP_DIR`` is the first
    ``lib/python?.*`` of the reused host prefix (3.12's, left by the top level), whatever its
    Python. The python package installed in ``$PREFIX`` is the truth."""
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / f"python-{record['version']}-{record['build']}.json").write_text(json.dumps(record))
    env = BASE | {
        "PREFIX": str(tmp_path),
        "PY_VER": "3.13",
        "SP_DIR": f"{tmp_path}/lib/python3.12/site-packages",
    }
    opts = from_environment(env)
    assert (opts.py_ver, opts.sp_dir) == (py_ver, tmp_path / site)
