"""The one error convention of every command line in the feedstock (megabuild's and the tools').

Library code raises a :class:`MegabuildError` (the tools' ``feedstock.errors.FeedstockError`` is
one); only :func:`run_main` turns it into ``<prog>: error: <message>`` on stderr and the error's
exit status. No command prints a traceback for bad input, nor for a full disk: a build or a
rehearsal writes gigabytes, and where the disk runs out is the machine's state, not a bug.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

# Longest list an error message spells out; the rest is counted.
LIST_LIMIT = 8


class MegabuildError(Exception):
    """A failure the user can act on, reported as one line."""

    exit_code = 1


def capped(items: Iterable[object], limit: int = LIST_LIMIT) -> str:
    """``a, b, c`` for short lists, ``a, b, ... (and 12 more)`` for long ones."""
    shown = [str(item) for item in items]
    if len(shown) <= limit:
        return ", ".join(shown)
    return ", ".join(shown[:limit]) + f", ... (and {len(shown) - limit} more)"


# The errno values of a full disk or an exhausted quota.
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)

Main = Callable[[Optional[Sequence[str]]], int]


def run_main(prog: str, main: Main, argv: Sequence[str] | None = None) -> int:
    """Run ``main(argv)``; a MegabuildError, or a full disk, becomes one stderr line and an exit status."""
    try:
        return main(argv)
    except MegabuildError as exc:
        message = " ".join(str(exc).split("\n")) or type(exc).__name__
        print(f"{prog}: error: {message}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        if exc.errno not in _DISK_FULL:
            raise
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{prog}: error: {exc.strerror or 'no space left on device'}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
