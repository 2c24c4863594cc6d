"""The Python range docs/architecture.md claims for ``recipe/megabuild`` is true: ``python -m
megabuild --help`` runs on the oldest Python it names, and the Python before it gets one line.

The interpreters come from pyenv; a missing one skips with one line, except under
``FEEDSTOCK_REQUIRE_PYENV_PYTHONS=1`` (CI), where it fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from feedstock.paths import RECIPE, REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
REQUIRE_ENV = "FEEDSTOCK_REQUIRE_PYENV_PYTHONS"
CLAIM = re.compile(r"runs? under any host Python from (3\.\d+) to (3\.\d+)")


def claimed_range() -> tuple[str, str]:
    """The one range the doc states (every statement of it must agree)."""
    claims = set(CLAIM.findall(" ".join(ARCHITECTURE.read_text().split())))
    assert len(claims) == 1, f"docs/architecture.md states {len(claims)} Python ranges: {sorted(claims)}"
    (claim,) = claims
    return claim


def pyenv_python(minor: str) -> Path:
    """pyenv's newest CPython ``minor`` (``3.10``), or skip (fail under the REQUIRE variable)."""
    root = os.environ.get("PYENV_ROOT")
    if not root and shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
    found = sorted(
        Path(root or "/nonexistent").glob(f"versions/{minor}.*/bin/python{minor}"),
        key=lambda p: int(p.parents[1].name.split(".")[2]) if p.parents[1].name.count(".") == 2 else -1,
    )
    if not found:
        reason = f"no CPython {minor} under pyenv ({root or 'pyenv not found'})"
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
            pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
        pytest.skip(reason)
    return found[-1]


def _megabuild_help(python: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": str(RECIPE)}
    return subprocess.run([str(python), "-m", "megabuild", "--help"], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=120, check=False)  # fmt: skip


def test_megabuild_runs_on_the_oldest_python_the_docs_claim() -> None:
    oldest, _ = claimed_range()
    proc = _megabuild_help(pyenv_python(oldest))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: megabuild"), proc.stdout


def test_the_python_before_it_is_refused_with_one_line() -> None:
    oldest, _ = claimed_range()
    major, minor = oldest.split(".")
    older = pyenv_python(f"{major}.{int(minor) - 1}")
    proc = _megabuild_help(older)
    assert proc.returncode != 0 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"megabuild: error: needs Python {oldest} or newer"), proc.stderr
