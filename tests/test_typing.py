"""``mypy --strict`` on the typed packages (settings: ``[tool.mypy]`` in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from feedstock.paths import REPO

# The build-time helpers, the maintainer library and the harness that runs the recipe in the
# tests; the 3.9-compatible modules of the library (configs, paths, errors) also run under 3.9 in
# test_build_locally.py.
STRICT_PACKAGES = ["recipe/megabuild", "scripts/feedstock", "scripts/harness"]


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
