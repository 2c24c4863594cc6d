"""`.ci/provision-freethreaded-python.sh` and `.ci/run`: CI provisions the free-threaded CPython
once, caches it, and its tests fail there instead of skipping."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cpythons import FREETHREADED_VERSION, freethreaded_cache_dir
from support.freethreaded import REQUIRE_ENV, freethreaded_or_skip

SCRIPT = Path(__file__).resolve().parents[1] / ".ci" / "provision-freethreaded-python.sh"


def test_a_provisioned_interpreter_is_reused_without_building(tmp_path: Path) -> None:
    """Idempotent: with the stamp and the interpreter in the cache, the script only prints its path
    (no apt, no compiler: PATH holds nothing but bash's own directory)."""
    prefix = tmp_path / f"cpython-{FREETHREADED_VERSION}t"
    interpreter = prefix / "bin" / f"python{FREETHREADED_VERSION.rsplit('.', 1)[0]}t"
    interpreter.parent.mkdir(parents=True)
    interpreter.write_text("#!/bin/sh\n")
    interpreter.chmod(0o755)
    (prefix / ".provisioned").write_text(FREETHREADED_VERSION)
    env = {"PATH": "/nonexistent", "HOME": str(tmp_path), "FEEDSTOCK_FREETHREADED_CACHE": str(tmp_path)}
    proc = subprocess.run(["/bin/bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{interpreter}\n"


def test_the_default_cache_dir_is_where_the_harness_looks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script_text = SCRIPT.read_text()
    default = (
        'cache_root="${FEEDSTOCK_FREETHREADED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pytorch-feedstock}"'
    )
    assert default in script_text and f"version={FREETHREADED_VERSION}\n" in script_text
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert freethreaded_cache_dir() == tmp_path / "pytorch-feedstock" / f"cpython-{FREETHREADED_VERSION}t"


def test_ci_run_provisions_and_requires_it(repo_root: Path) -> None:
    lines = (repo_root / ".ci" / "run").read_text().splitlines()
    provision = [i for i, line in enumerate(lines) if "provision-freethreaded-python.sh" in line]
    assert len(provision) == 1 and provision[0] < len(lines) - 1
    line = lines[provision[0]]
    # an assignment on its own (not `export X=$(...)`, whose status is export's): set -e sees a failure
    assert line.startswith('FEEDSTOCK_FREETHREADED_PYTHON="$(.ci/provision-freethreaded-python.sh)"; export ')
    assert f"{REQUIRE_ENV}=1" in line


def test_missing_interpreter_skips_or_fails_when_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FEEDSTOCK_FREETHREADED_PYTHON", str(tmp_path / "no-python3.13t"))
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=re.escape("provision-freethreaded-python.sh")):
        freethreaded_or_skip()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match=f"{REQUIRE_ENV} is set"):
        freethreaded_or_skip()
