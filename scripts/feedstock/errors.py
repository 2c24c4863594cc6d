"""The tools' errors, in megabuild's one convention (:mod:`megabuild.errors`).

A :class:`FeedstockError` is a :class:`~megabuild.errors.MegabuildError`, so ``run_main`` reports
either as ``feedstock <command>: error: <message>``: an error raised deep in megabuild (a split
spec, a cache file) reaches the user as one line, as the tools' own do.
"""

from __future__ import annotations

from megabuild.errors import LIST_LIMIT, Main, MegabuildError, capped, run_main

__all__ = ["LIST_LIMIT", "FeedstockError", "Main", "UsageError", "capped", "run_main"]


class FeedstockError(MegabuildError):
    """A failure the user can act on, reported as one line."""


class UsageError(FeedstockError):
    """Bad command-line input (argparse's status for usage errors)."""

    exit_code = 2
