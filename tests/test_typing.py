"""``mypy --strict`` on the typed packages (settings: ``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from feedstock.paths import REPO

STRICT_PACKAGES = ["recipe/megabuild"]


@pytest.mark.parametrize("package", STRICT_PACKAGES)
def test_mypy_strict(package: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", package],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"mypy --strict {package}:\n{proc.stdout}{proc.stderr}"
