"""``cache restore``: put back the pristine cache saved by the top level, optionally for another
Python, in one atomic write (restore and swap land together or not at all)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from megabuild.cache import python_swap, store
from megabuild.errors import MegabuildError


@dataclass(frozen=True)
class PythonSwap:
    """Rewrite the restored cache's Python entries from one version to another."""

    from_version: str
    to_version: str
    prefix: str | None = None  # host prefix (default: from the cache's Python_EXECUTABLE)


def restore(path: Path, swap: PythonSwap | None = None) -> list[str]:
    """Restore ``path`` from ``path.orig`` (see :func:`store.save`); the report, one line each."""
    orig = store.orig_path(path)
    if not orig.exists():
        raise MegabuildError(f"{orig} does not exist (run 'cache save' first)")
    cache = store.read_cache(orig)
    lines: list[str] = []
    if swap is not None:
        result = python_swap.swap_python(cache, swap.from_version, swap.to_version, prefix=swap.prefix)
        lines += result.report_lines()
        lines.append(f"swap-python: swapped Python {result.old} -> {result.new} ({result.mode} mode)")
    store.write_cache(path, cache, mode_from=path if path.exists() else orig)
    lines.append(f"restored {path} from {orig}")
    return lines
