"""Splitting the configs of a CFEP-03 build across machines (``build_all.py --shard I/N``).

Every machine computes the same split from the same config files: configs go, longest expected
build first (ties by name), to the shard with the least expected time so far (ties: the lowest
shard). Expected time is a model, not a measurement: a machine must not need another machine's
build times to know its share.

Standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from feedstock.configs import Config
from feedstock.errors import UsageError

# Hours on a 16-core machine (docs/local-builds.md: a CUDA config takes 8 to 12 hours). The top-level build
# dominates; each further Python rebuilds only the Python-dependent targets.
BASE_HOURS = {"cpu": 2.0, "cuda": 9.0}
PER_PYTHON_HOURS = {"cpu": 0.25, "cuda": 0.5}
MAGMA_HOURS = 1.0  # the libtorch-cuda-linalg pass with magma
CROSS_FACTOR = 1.5  # aarch64/ppc64le configs compile on an x86_64 machine (cross or emulated)

_SHARD = re.compile(r"^(\d+)/(\d+)$")


def is_cuda(config: Config) -> bool:
    return any(v not in ("None", "") for v in config.get("cuda_compiler_version"))


def expected_hours(config: Config) -> float:
    kind = "cuda" if is_cuda(config) else "cpu"
    hours = BASE_HOURS[kind] + PER_PYTHON_HOURS[kind] * max(len(config.get("python")) - 1, 0)
    if "true" in config.get("with_magma"):
        hours += MAGMA_HOURS
    if not config.subdir.endswith("-64"):
        hours *= CROSS_FACTOR
    return round(hours, 3)


def parse_shard(text: str) -> tuple[int, int]:
    """``I/N`` (1 <= I <= N) as (I, N); a one-line error otherwise."""
    match = _SHARD.match(text.strip())
    if not match or not 1 <= int(match[1]) <= int(match[2]):
        raise UsageError(f"--shard {text!r}: give I/N with 1 <= I <= N, e.g. --shard 2/3")
    return int(match[1]), int(match[2])


def split(configs: Sequence[Config], count: int) -> list[list[Config]]:
    """``count`` shards covering every config exactly once, balanced by expected hours."""
    shards: list[list[Config]] = [[] for _ in range(count)]
    loads = [0.0] * count
    for config in sorted(configs, key=lambda c: (-expected_hours(c), c.name)):
        target = min(range(count), key=lambda i: (loads[i], i))
        shards[target].append(config)
        loads[target] += expected_hours(config)
    return [sorted(shard, key=lambda c: c.name) for shard in shards]


def shard_of(configs: Sequence[Config], index: int, count: int) -> list[Config]:
    """Shard ``index`` (1-based) of ``count``."""
    return split(configs, count)[index - 1]
