"""Time parse, swap-python (string mode) and write of a PyTorch-sized CMakeCache.txt.

Usage: python -m feedstock bench-cache [CACHE] [--repeat N]

Uses the real PyTorch 2.6 cache from <repo>/../shared/data/pytorch-cmakecache/ when
present (or CACHE), else synthesises one with several thousand entries. Prints the
best of N runs per step; the target for the whole edit is well under 100 ms.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from megabuild.cache import store
from megabuild.cache.model import CacheFile
from megabuild.cache.python_swap import swap_python
from megabuild.errors import MegabuildError

from feedstock.errors import UsageError
from feedstock.paths import REPO

PROG = "feedstock bench-cache"

REAL = REPO.parent / "shared" / "data" / "pytorch-cmakecache" / "CMakeCache-cpu-py311.txt"


def synthesise(entries: int = 5000) -> bytes:
    prefix = "/home/conda/feedstock_root/build_artifacts/bench_1700000000000/_h_env_placehold"
    lines = ["# This is the CMakeCache file.", "", "# EXTERNAL cache entries", ""]
    lines.append(f"Python_EXECUTABLE:FILEPATH={prefix}/bin/python")
    lines.append(f"CMAKE_PREFIX_PATH:UNINITIALIZED={prefix}/lib/python3.11/site-packages;{prefix}")
    for i in range(entries):
        lines += [f"//Option number {i}", f"OPTION_{i}:STRING=value;{i}=x /usr/local/cuda-13.11/lib{i}", ""]
    lines += ["# INTERNAL cache entries", ""]
    lines.append(f"CMAKE_COMMAND:INTERNAL={prefix}/lib/python3.11/site-packages/cmake/data/bin/cmake")
    lines.append(f"_Python_INCLUDE_DIR:INTERNAL={prefix}/include/python3.11")
    lines.append(
        f"_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;11;7;64;;cpython-311-x86_64-linux-gnu;"
        f"{prefix}/lib/python3.11;{prefix}/lib/python3.11;{prefix}/lib/python3.11/site-packages;"
        f"{prefix}/lib/python3.11/site-packages"
    )
    return ("\n".join(lines) + "\n").encode()


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times) * 1000


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("cache", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, not {args.repeat}")
    source = args.cache or (REAL if REAL.is_file() else None)
    try:
        data = source.read_bytes() if source else synthesise()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    label = str(source) if source else "synthesised"
    try:
        return _bench(data, label, args.repeat)
    except MegabuildError as exc:
        raise UsageError(f"{label}: {exc}") from None


def _bench(data: bytes, label: str, repeat: int) -> int:
    n = sum(1 for _ in CacheFile.parse_bytes(data).entries())
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "CMakeCache.txt"
        target.write_bytes(data)

        def parse() -> CacheFile:
            return store.read_cache(target)

        def swap() -> None:
            swap_python(CacheFile.parse_bytes(data), "3.11", "3.12.1", use_interpreter=False)

        parsed = parse()
        swap_python(parsed, "3.11", "3.12.1", use_interpreter=False)

        def write() -> None:
            store.write_cache(target, parsed)

        def whole() -> None:
            cache = store.read_cache(target)
            swap_python(
                cache, "3.11" if b"3;11" in target.read_bytes() else "3.12", "3.12.1", use_interpreter=False
            )
            store.write_cache(target, cache)

        t_parse = best(parse, repeat)
        t_swap = best(swap, repeat)  # includes its own parse
        t_write = best(write, repeat)
        target.write_bytes(data)

        def write_then_whole() -> None:
            target.write_bytes(data)
            whole()

        t_whole = best(write_then_whole, repeat)
    print(f"cache: {label} ({len(data)} bytes, {n} entries), best of {repeat}")
    print(f"parse:                 {t_parse:7.2f} ms")
    print(f"parse + swap (string): {t_swap:7.2f} ms")
    print(f"atomic write (fsync):  {t_write:7.2f} ms")
    print(f"read+swap+write:       {t_whole:7.2f} ms")
    return 0
