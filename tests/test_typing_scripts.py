"""``mypy --strict`` on the maintainer library (scripts/feedstock): the scripts' shared code stays typed."""

from __future__ import annotations

import subprocess
import sys

import pytest
from feedstock.paths import REPO

# On the command line rather than in pyproject, so the recipe/megabuild check keeps its own block.
# 3.10 is the oldest target mypy accepts; the 3.9-compatible modules are run under 3.9 elsewhere.
# No cache: nothing is written into the checkout.
MYPY_ARGS = ("--strict", "--python-version", "3.10", "--no-incremental", "--cache-dir", "/dev/null")


@pytest.mark.parametrize("package", ["scripts/feedstock"])
def test_mypy_strict(package: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", *MYPY_ARGS, package],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
