"""The one error convention of the feedstock's command-line tools.

Library code raises a ``FeedstockError`` subclass; only ``run_main`` turns it into
``prog: error: <message>`` on stderr and the error's exit status. No tool prints a
traceback for bad input.

Standard library only and Python 3.9 compatible (build-locally.py uses it).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

# Longest list an error message spells out; the rest is counted.
LIST_LIMIT = 8


class FeedstockError(Exception):
    """A failure the user can act on, reported as one line."""

    exit_code = 1


class UsageError(FeedstockError):
    """Bad command-line input (argparse's status for usage errors)."""

    exit_code = 2


def capped(items: Iterable[object], limit: int = LIST_LIMIT) -> str:
    """``a, b, c`` for short lists, ``a, b, ... (and 12 more)`` for long ones."""
    shown = [str(item) for item in items]
    if len(shown) <= limit:
        return ", ".join(shown)
    return ", ".join(shown[:limit]) + f", ... (and {len(shown) - limit} more)"


Main = Callable[[Optional[Sequence[str]]], int]


def run_main(prog: str, main: Main, argv: Sequence[str] | None = None) -> int:
    """Run ``main(argv)``; a FeedstockError becomes one stderr line and its exit status."""
    try:
        return main(argv)
    except FeedstockError as exc:
        message = " ".join(str(exc).split("\n")) or type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
