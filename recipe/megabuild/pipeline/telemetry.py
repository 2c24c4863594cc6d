"""One record per build pass (top level, magma, each Python) for scripts/build_report.py.

``passes.jsonl`` in the telemetry dir gets ``{"pass", "start", "end", "ninja_log", "cache"}``;
the pass's copy of ``build/.ninja_log`` and, with the compiler cache on, sccache's counters
(``<pass>.sccache.json``) lie next to it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _sccache(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sccache", *args], capture_output=True, text=True, check=False)


def _cache_stats(telemetry: Path, name: str) -> str | None:
    out = _sccache("--show-stats", "--stats-format=json")
    if out.returncode != 0:
        print(f"compiler cache, pass {name}: no counters (sccache --show-stats failed)")
        return None
    stats_file = telemetry / f"{name}.sccache.json"
    stats_file.write_text(out.stdout)
    stats = json.loads(out.stdout)["stats"]
    hits, misses = (sum(stats[k]["counts"].values()) for k in ("cache_hits", "cache_misses"))
    rate = 100 * hits / max(hits + misses, 1)
    print(f"compiler cache, pass {name}: {hits}/{hits + misses} compiles hit ({rate:.1f}%)")
    return stats_file.name


@contextmanager
def build_pass(
    telemetry: Path, name: str, build_dir: Path, compiler_cache: bool, clock: Callable[[], float] = time.time
) -> Iterator[None]:
    """Record the pass run inside the ``with`` block (also when it fails: the log shows how far)."""
    telemetry.mkdir(parents=True, exist_ok=True)
    if compiler_cache:
        _sccache("--zero-stats")
    record: dict[str, object] = {"pass": name, "start": clock(), "end": None}
    record |= {"ninja_log": None, "cache": None}
    try:
        yield
    finally:
        record["end"] = clock()
        ninja_log = build_dir / ".ninja_log"
        if ninja_log.is_file():
            shutil.copyfile(ninja_log, telemetry / f"{name}.ninja_log")
            record["ninja_log"] = f"{name}.ninja_log"
        if compiler_cache:
            record["cache"] = _cache_stats(telemetry, name)
        with open(telemetry / "passes.jsonl", "a") as fh:
            fh.write(json.dumps(record) + "\n")
