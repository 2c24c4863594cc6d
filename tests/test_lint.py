"""``ruff check`` and ``ruff format --check`` on the whole repository (settings: ``[tool.ruff]`` in
pyproject.toml), as docs/testing.md says the suite enforces.

Without ruff the tests skip with one line, except under ``FEEDSTOCK_REQUIRE_RUFF=1`` (CI).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.paths import REPO

REQUIRE_ENV = "FEEDSTOCK_REQUIRE_RUFF"
CONFIG = REPO / "pyproject.toml"


def _ruff(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("ruff") is None:
        reason = f"ruff is not installed for {sys.executable} (tests/requirements.txt)"
        if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
            pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
        pytest.skip(reason)
    cmd = [sys.executable, "-m", "ruff", *args, "--config", str(CONFIG), "--no-cache"]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_ruff_check_is_clean() -> None:
    proc = _ruff("check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean() -> None:
    proc = _ruff("format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_lint_or_format_mistake_is_caught(tmp_path: Path) -> None:
    """Planted: an unused import and a line left unformatted, checked with the repository's config."""
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nx = {'a':1}\n")
    check = _ruff("check", str(planted), cwd=tmp_path)
    assert check.returncode != 0 and "F401" in check.stdout, check.stdout + check.stderr
    fmt = _ruff("format", "--check", str(planted), cwd=tmp_path)
    assert fmt.returncode != 0 and "planted.py" in fmt.stdout + fmt.stderr, fmt.stdout + fmt.stderr
