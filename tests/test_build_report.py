"""python -m feedstock build-report and feedstock.telemetry: the report of a finished build."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from feedstock.telemetry import (
    TelemetryError,
    load_build,
    overview_markdown,
    parse_ninja_log,
    render_markdown,
    summarize,
    timeline_rows,
)
from support.tools import tool_argv

HEADER = "# ninja log v5\n"


def _line(start: int, end: int, output: str, mtime: int = 1, cmd_hash: str = "h") -> str:
    return f"{start}\t{end}\t{mtime}\t{output}\t{cmd_hash}\n"


LOCATION = "s3, name: compiler-cache, prefix: /pytorch-feedstock/v1/"


def _sccache(hits: int, misses: int) -> dict[str, object]:
    """sccache 0.16's JSON statistics; each compile it ran took 2.5 s, each hit 0.5 s to fetch."""
    return {
        "stats": {
            "cache_hits": {"counts": {"C/C++": hits} if hits else {}},
            "cache_misses": {"counts": {"C/C++": misses} if misses else {}},
            "requests_not_compile": 2,
            "requests_not_cacheable": 0,
            "compilations": misses,
            "compiler_write_duration": {"secs": int(2.5 * misses), "nanos": int(2.5 * misses % 1 * 1e9)},
            "cache_read_hit_duration": {"secs": 0, "nanos": 500_000_000 * hits},
            "cache_write_errors": 0,
        },
        "cache_location": LOCATION,
    }


@pytest.fixture
def telemetry(tmp_path: Path) -> Path:
    """What build.sh records for a top-level pass and one Python pass."""
    tdir = tmp_path / "work" / "_megabuild" / "telemetry"
    tdir.mkdir(parents=True)
    top = HEADER + "".join(
        [
            _line(0, 4000, "c10/CMakeFiles/c10.dir/core/Device.cpp.o"),
            _line(0, 9000, "caffe2/CMakeFiles/torch_cpu.dir/aten/Tensor.cpp.o"),
            _line(4000, 6000, "caffe2/CMakeFiles/torch_cpu.dir/aten/Add.cpp.o"),
            _line(9000, 9500, "lib/libtorch_cpu.so"),
            _line(9500, 9800, "lib/libtorch_python.so"),
            _line(100, 300, "torch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o"),
            # one code generation edge with two outputs: one line each, same start, end and hash
            _line(0, 1000, "aten/src/ATen/Functions.h", cmd_hash="gen"),
            _line(0, 1000, "aten/src/ATen/Functions.cpp", cmd_hash="gen"),
        ]
    )
    # the Python pass recompiles torch_python and relinks it; the other lines are unchanged
    py = top.replace(
        _line(9500, 9800, "lib/libtorch_python.so"), _line(700, 1000, "lib/libtorch_python.so", 2)
    )
    py = py.replace(
        _line(100, 300, "torch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o"),
        _line(0, 700, "torch/CMakeFiles/torch_python.dir/csrc/Module.cpp.o", 2),
    )
    (tdir / "libtorch.ninja_log").write_text(top)
    (tdir / "python3.11.ninja_log").write_text(py)
    (tdir / "libtorch.sccache.json").write_text(json.dumps(_sccache(1, 3)))
    (tdir / "python3.11.sccache.json").write_text(json.dumps(_sccache(1, 0)))
    records = [
        {"pass": "libtorch", "start": 1000.0, "end": 1012.0, "ninja_log": "libtorch.ninja_log",
         "cache": "libtorch.sccache.json"},
        {"pass": "python3.11", "start": 1020.0, "end": 1022.5, "ninja_log": "python3.11.ninja_log",
         "cache": "python3.11.sccache.json", "unexpected_edges": 3},
    ]  # fmt: skip
    (tdir / "passes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return tdir


def test_passes_edges_targets_and_cache(telemetry: Path) -> None:
    report = summarize(load_build(telemetry.parents[1]))  # the work dir finds its telemetry
    top, py = report["passes"]
    assert (top["pass"], top["wall_seconds"], top["edges"], top["compiles"]) == ("libtorch", 12.0, 7, 4)
    assert top["edge_seconds"] == pytest.approx(4 + 9 + 2 + 0.5 + 0.3 + 0.2 + 1)
    codegen = next(t for t in top["targets"] if t["target"].startswith("aten/src/ATen/Functions"))
    assert (codegen["target"], codegen["edges"], codegen["seconds"]) == (
        "aten/src/ATen/Functions.cpp",
        1,
        1.0,
    )
    assert [t["target"] for t in top["targets"]][:2] == ["torch_cpu", "c10"]
    torch_cpu = top["targets"][0]
    assert (torch_cpu["edges"], torch_cpu["compiles"], torch_cpu["seconds"]) == (3, 2, 11.5)
    # only what changed in .ninja_log since the previous pass belongs to the Python pass
    assert (py["edges"], py["compiles"], py["wall_seconds"]) == (2, 1, 2.5)
    assert {t["target"] for t in py["targets"]} == {"torch_python"}
    assert top["cache"] == {
        "hits": 1, "misses": 3, "not_cached": 2, "hit_rate": 0.25, "backend": LOCATION,
        "write_errors": 0, "saved_seconds": 2.0,  # 1 hit x 2.5 s, less 0.5 s fetching it
        "hits_by_language": {"C/C++": 1},
    }  # fmt: skip
    # the Python pass compiled nothing: its hit counts at the build's mean compile time
    assert py["cache"]["saved_seconds"] == 2.0
    assert report["total"]["cache"] == {
        "hits": 2, "misses": 3, "hit_rate": 0.4, "backend": LOCATION, "write_errors": 0, "saved_seconds": 4.0,
    }  # fmt: skip
    assert report["slowest"][0] == {
        "pass": "libtorch",
        "output": "caffe2/CMakeFiles/torch_cpu.dir/aten/Tensor.cpp.o",
        "target": "torch_cpu",
        "seconds": 9.0,
    }
    assert [e["seconds"] for e in report["slowest"]] == sorted(
        (e["seconds"] for e in report["slowest"]), reverse=True
    )


def test_restored_log_entries_are_not_counted_as_runs(telemetry: Path) -> None:
    """The megabuild Python's pass after ``build-state restore``: Ninja's log is the top level's
    again (torch_python's objects put back) plus one relink; only the relink ran."""
    top = (telemetry / "libtorch.ninja_log").read_text()
    restored = top.replace(
        _line(9500, 9800, "lib/libtorch_python.so"), _line(0, 400, "lib/libtorch_python.so", 3)
    )
    (telemetry / "python3.12.ninja_log").write_text(restored)
    record = {"pass": "python3.12", "start": 1030.0, "end": 1031.0, "ninja_log": "python3.12.ninja_log"}
    with (telemetry / "passes.jsonl").open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    passes = summarize(load_build(telemetry))["passes"]
    assert [(p["pass"], p["edges"], p["compiles"]) for p in passes] == [
        ("libtorch", 7, 4),
        ("python3.11", 2, 1),
        ("python3.12", 1, 0),  # Module.cpp.o's entry is the top level's, put back: not a run
    ]


def test_slowest_edges_are_capped_at_20(tmp_path: Path) -> None:
    (tmp_path / ".ninja_log").write_text(
        HEADER + "".join(_line(0, 10 * i, f"CMakeFiles/t.dir/f{i}.o") for i in range(1, 31))
    )
    report = summarize(load_build(tmp_path))
    assert len(report["slowest"]) == 20
    assert report["slowest"][0]["seconds"] == 0.3 and report["slowest"][-1]["seconds"] == 0.11


def test_timeline_places_passes_on_one_time_axis(telemetry: Path) -> None:
    rows = timeline_rows(load_build(telemetry))
    labels = {label for label, _, _ in rows}
    assert "libtorch: torch_cpu" in labels and "python3.11: torch_python" in labels
    py_compile = next(r for r in rows if r[0] == "python3.11: torch_python")
    assert py_compile[1:] == (20.0, 20.7)  # the Python pass started 20 s after the top level


def test_ninja_log_must_be_ninjas(tmp_path: Path) -> None:
    with pytest.raises(TelemetryError, match=r"\.ninja_log:2: not a \.ninja_log line"):
        parse_ninja_log(HEADER + "garbage\n")
    assert parse_ninja_log(HEADER) == {}


def _report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(tool_argv("build-report", *args), capture_output=True, text=True, timeout=300)


def test_cli_writes_report_and_png(telemetry: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    proc = _report(str(telemetry.parents[1]), "--title", "cpu-generic")
    assert proc.returncode == 0, proc.stderr
    assert "# Build report: cpu-generic" in proc.stdout
    assert "| libtorch | 12.0 | 17.0 | 7 | 4 | - | 1/4 (25.0%) |" in proc.stdout
    assert (telemetry / "report.md").read_text() in proc.stdout
    png = (telemetry / "timeline.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    json.loads((telemetry / "report.json").read_text())
    assert not list(telemetry.glob("*.tmp*"))


def test_cli_on_a_real_ninja_build(tmp_path: Path) -> None:
    """Any finished build dir: the report counts what Ninja's own log records."""
    for tool in ("cmake", "ninja", "cc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.18)\nproject(p C)\n"
        "add_library(a SHARED a.c b.c)\nadd_executable(m m.c)\n"
    )
    for name in ("a", "b", "m"):
        (src / f"{name}.c").write_text(
            f"int {name}_f(void) {{ return 1; }}\n" + ("int main(void){return 0;}\n" if name == "m" else "")
        )
    build = tmp_path / "build"
    subprocess.run(["cmake", "-S", str(src), "-B", str(build), "-GNinja"], check=True, capture_output=True)
    subprocess.run(["ninja", "-C", str(build)], check=True, capture_output=True)
    proc = _report(str(build), "--no-png", "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (only,) = report["passes"]
    ninja_log = [ln for ln in (build / ".ninja_log").read_text().splitlines() if not ln.startswith("#")]
    assert only["edges"] == len(ninja_log) and only["compiles"] == 3
    assert {t["target"]: t["compiles"] for t in only["targets"]} == {"a": 2, "m": 1}
    assert only["cache"] is None and "| ninja |" in proc.stdout


@pytest.mark.parametrize(
    ("setup", "status", "message"),
    [
        ("missing", 2, "no such directory"),
        ("empty", 1, "neither build telemetry (passes.jsonl) nor a .ninja_log"),
        ("bad-record", 1, "passes.jsonl:1: not a pass record"),
    ],
)
def test_cli_errors_are_one_line(tmp_path: Path, setup: str, status: int, message: str) -> None:
    target = tmp_path / "dir"
    if setup != "missing":
        target.mkdir()
    if setup == "bad-record":
        (target / "passes.jsonl").write_text('{"pass": "x"}\n')
    proc = _report(str(target))
    assert proc.returncode == status
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("feedstock build-report: error: ") and message in line
    assert not list(target.glob("report*")) if target.exists() else True


def test_report_shows_the_cache_backend_hits_misses_and_time_saved(telemetry: Path) -> None:
    summary = summarize(load_build(telemetry))
    text = render_markdown(summary, "cfg")
    assert f"Backend: {LOCATION}" in text
    assert "| libtorch | 1 | 3 | 25.0% | 2.0 s | 0 |" in text
    assert "| **total** | 2 | 3 | 40.0% | 4.0 s | 0 |" in text
    overview = overview_markdown([("cfg", summary)])
    assert f"| cfg | {LOCATION} | 2 | 3 | 4.0 s |" in overview


def test_report_counts_the_rebuild_checks_edges_per_pass(telemetry: Path) -> None:
    """The per-Python pass's record carries the rebuild check's count; the top level has none."""
    report = summarize(load_build(telemetry))
    assert [p["unexpected_edges"] for p in report["passes"]] == [None, 3]
    assert report["total"]["unexpected_edges"] == 3
    markdown = render_markdown(report, "t")
    assert "| python3.11 | 2.5 | 1.0 | 2 | 1 | **3** | 1/1 (100.0%) |" in markdown, markdown
    # a record the check could not fill (null) and an old record without the key read alike
    records = [json.loads(line) for line in (telemetry / "passes.jsonl").read_text().splitlines()]
    records[1]["unexpected_edges"] = None
    (telemetry / "passes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    report = summarize(load_build(telemetry))
    assert [p["unexpected_edges"] for p in report["passes"]] == [None, None]
    assert report["total"]["unexpected_edges"] is None
