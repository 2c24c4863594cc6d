"""``mypy --strict`` on the typed packages (settings: ``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from feedstock.paths import REPO

# All product Python: the build-time helpers, the maintainer tools (every command, benchmark,
# cross-check and the conda-build stand-in) and conda-smithy's entry build-locally.py.
STRICT_PACKAGES = ["recipe/megabuild", "scripts/feedstock", "build-locally.py"]


@pytest.mark.parametrize("package", STRICT_PACKAGES)
def test_mypy_strict(package: str) -> None:
    proc = subprocess.run(
        # No cache: nothing is written into the checkout.
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir", "/dev/null", package],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, f"mypy --strict {package}:\n{proc.stdout}{proc.stderr}"
