"""A local conda channel of real ``.conda`` files: index, solve and install with py-rattler."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from feedstock.channel import Channel


def index(channel_dir: Path) -> None:
    from rattler.index import index_fs

    (channel_dir / "noarch").mkdir(parents=True, exist_ok=True)
    (channel_dir / "linux-64").mkdir(parents=True, exist_ok=True)
    asyncio.run(index_fs(channel_dir, write_zst=False, write_shards=False, force=True))


def solve(
    channel_dir: Path, specs: Sequence[str], virtual_packages: Mapping[str, str] | None = None
) -> list[Any]:
    """Solve ``specs`` for linux-64 against the channel; returns rattler ``RepoDataRecord`` s
    (the solver checks' wrapper, :meth:`feedstock.channel.Channel.solve_records`)."""
    return Channel(channel_dir).solve_records(specs, "linux-64", virtual_packages)


def install(records: Sequence[Any], prefix: Path, cache_dir: Path) -> None:
    import rattler

    asyncio.run(
        rattler.install(list(records), target_prefix=str(prefix), cache_dir=cache_dir, show_progress=False)
    )


def dists(records: Sequence[Any]) -> dict[str, str]:
    """name -> ``version-build`` of solved records."""
    return {r.name.normalized: f"{r.version}-{r.build}" for r in records}


def create_env(
    channel_dir: Path,
    specs: Sequence[str],
    prefix: Path,
    cache_dir: Path,
    virtual_packages: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Solve ``specs`` and install the solution into a fresh ``prefix``; returns :func:`dists`."""
    import shutil

    if prefix.exists():
        shutil.rmtree(prefix)
    records = solve(channel_dir, specs, virtual_packages)
    install(records, prefix, cache_dir)
    return dists(records)


def run_in_env(prefix: Path, code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``prefix/bin/python -c code`` with a clean environment (PATH: the env, then /usr/bin:/bin)."""
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8"}
    return subprocess.run(
        [str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
