"""One record per build pass (top level, magma, each Python) for python -m feedstock build-report.

``passes.jsonl`` in the telemetry dir gets ``{"pass", "start", "end", "ninja_log", "cache",
"unexpected_edges"}`` (the last: what :mod:`~megabuild.pipeline.rebuild_guard` found for a
per-Python pass, ``null`` where it did not run or could not tell);
the pass's copy of ``build/.ninja_log`` and, with the compiler cache on, sccache's counters
(``<pass>.sccache.json``) lie next to it. A record that cannot be taken or written is one warning
line: a measurement never fails the build (docs/architecture.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path


def _warn(what: str, why: object) -> None:
    print(f"megabuild: warning: not measured (the build goes on): {what}: {why}", flush=True)


def _sccache(*args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(["sccache", *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        _warn(f"sccache {' '.join(args)}", exc)
        return None


def _hits_misses(stats_json: str) -> tuple[int, int]:
    stats = json.loads(stats_json)["stats"]
    hits, misses = (sum(stats[k]["counts"].values()) for k in ("cache_hits", "cache_misses"))
    return int(hits), int(misses)


def _cache_stats(telemetry: Path, name: str) -> str | None:
    out = _sccache("--show-stats", "--stats-format=json")
    if out is None:
        return None
    if out.returncode != 0:
        _warn(f"compiler cache, pass {name}", "sccache --show-stats failed")
        return None
    try:
        hits, misses = _hits_misses(out.stdout)
        stats_file = telemetry / f"{name}.sccache.json"
        stats_file.write_text(out.stdout)
    except (OSError, ValueError, LookupError, TypeError, AttributeError) as exc:
        # sccache's JSON is another project's format: a change in it costs a figure, not a build
        _warn(f"compiler cache, pass {name}", f"{type(exc).__name__}: {exc}")
        return None
    rate = 100 * hits / max(hits + misses, 1)
    print(f"compiler cache, pass {name}: {hits}/{hits + misses} compiles hit ({rate:.1f}%)")
    return stats_file.name


def _record(
    telemetry: Path, name: str, build_dir: Path, compiler_cache: bool, record: MutableMapping[str, object]
) -> None:
    ninja_log = build_dir / ".ninja_log"
    if ninja_log.is_file():
        shutil.copyfile(ninja_log, telemetry / f"{name}.ninja_log")
        record["ninja_log"] = f"{name}.ninja_log"
    if compiler_cache:
        record["cache"] = _cache_stats(telemetry, name)
    with open(telemetry / "passes.jsonl", "a") as fh:
        fh.write(json.dumps(record) + "\n")


@contextmanager
def build_pass(
    telemetry: Path, name: str, build_dir: Path, compiler_cache: bool, clock: Callable[[], float] = time.time
) -> Iterator[MutableMapping[str, object]]:
    """Record the pass run inside the ``with`` block (also when it fails: the log shows how far);
    the block may add its own figures to the record it is given."""
    if compiler_cache:
        _sccache("--zero-stats")
    record: dict[str, object] = {"pass": name, "start": clock(), "end": None}
    record |= {"ninja_log": None, "cache": None, "unexpected_edges": None}
    try:
        yield record
    finally:
        record["end"] = clock()
        try:
            telemetry.mkdir(parents=True, exist_ok=True)
            _record(telemetry, name, build_dir, compiler_cache, record)
        except OSError as exc:
            _warn(f"pass {name}'s record in {telemetry}", exc)
