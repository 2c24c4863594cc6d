"""``megabuild.pipeline.telemetry``: a pass's record never fails the build it records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from megabuild.pipeline import telemetry


def _plant_sccache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stdout: str) -> None:
    """An ``sccache`` first on PATH that prints ``stdout`` (a changed statistics format)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "sccache"
    tool.write_text(f"#!/bin/sh\ncat <<'JSON'\n{stdout}\nJSON\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


def _warnings(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("megabuild: warning:")]


def test_counters_in_another_format_are_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_sccache(tmp_path, monkeypatch, json.dumps({"stats": {"hits": 3}}))
    tdir, build = tmp_path / "telemetry", tmp_path / "build"
    build.mkdir()
    (build / ".ninja_log").write_text("# ninja log v7\n")
    with telemetry.build_pass(tdir, "libtorch", build, compiler_cache=True, clock=lambda: 1.0):
        pass
    (record,) = [json.loads(line) for line in (tdir / "passes.jsonl").read_text().splitlines()]
    assert record == {"pass": "libtorch", "start": 1.0, "end": 1.0, "ninja_log": "libtorch.ninja_log",
                      "cache": None, "unexpected_edges": None}  # fmt: skip
    (warning,) = _warnings(capsys.readouterr().out)
    assert "compiler cache, pass libtorch" in warning and "KeyError" in warning


def test_counters_are_read_when_in_sccaches_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stats = {"stats": {"cache_hits": {"counts": {"C/C++": 3}}, "cache_misses": {"counts": {"C/C++": 1}}}}
    _plant_sccache(tmp_path, monkeypatch, json.dumps(stats))
    with telemetry.build_pass(tmp_path / "t", "python3.12", tmp_path, compiler_cache=True):
        pass
    out = capsys.readouterr().out
    assert "compiler cache, pass python3.12: 3/4 compiles hit (75.0%)" in out and not _warnings(out)
    assert json.loads((tmp_path / "t" / "python3.12.sccache.json").read_text()) == stats


def test_unwritable_record_is_one_warning_and_keeps_the_pass_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked = tmp_path / "telemetry"
    blocked.write_text("a file where the telemetry dir should be\n")
    with telemetry.build_pass(blocked, "libtorch", tmp_path, compiler_cache=False):
        pass
    assert len(_warnings(capsys.readouterr().out)) == 1
    # a failing pass still fails with its own error, not the record's
    failing_pass = telemetry.build_pass(blocked, "libtorch", tmp_path, compiler_cache=False)
    with pytest.raises(RuntimeError, match="the compile failed"), failing_pass:
        raise RuntimeError("the compile failed")
