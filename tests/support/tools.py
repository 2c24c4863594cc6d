"""How the tests run the maintainers' command, as a user does: ``python -m feedstock <command>``."""

from __future__ import annotations

import sys


def tool_argv(*words: str) -> list[str]:
    """The argv of ``python -m feedstock WORDS`` (a command and its arguments) with this interpreter."""
    return [sys.executable, "-m", "feedstock", *words]
