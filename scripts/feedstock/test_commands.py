"""A rendered output's ``test:`` commands run as conda-build runs them: a fresh test dir holding
the section's ``files``, each command in bash there, in the test env's environment.

The one runner of the rendered commands outside conda-build: the rehearsal's
(``feedstock.rehearsal.checks``) and the stand-in's
(``feedstock.conda_build_standin.recipe_tests``). Each
caller names its own bash options and the findings file ``megabuild check-binaries`` is given
(what the binaries it checks take from outside a conda env, explained: upstream's wheels in the
rehearsal, the harness's own stand-ins there).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import FeedstockError

BINARY_CHECK = "megabuild check-binaries"
TIMED_OUT = 124  # the exit status of a command that ran past its time (as timeout(1) gives it)


@dataclass(frozen=True)
class CommandResult:
    """One command's run: the command as it ran, its exit status, its output and time."""

    command: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def tail(self, lines: int = 3, chars: int = 400) -> str:
        """The last lines of stderr (of stdout when stderr is empty), on one line."""
        text = self.stderr.strip() or self.stdout.strip()
        return " | ".join(text.splitlines()[-lines:])[:chars]


def fresh_test_dir(where: Path, test: Mapping[str, Any], recipe_dir: Path) -> Path:
    """``where``, emptied, holding the section's ``files`` (copied from ``recipe_dir``); a file the
    section names that the recipe lacks is bad input."""
    if where.exists():
        shutil.rmtree(where)
    where.mkdir(parents=True)
    for item in test.get("files") or []:
        src = recipe_dir / str(item).rstrip("/")
        if src.is_dir():
            shutil.copytree(src, where / src.name)
        elif src.is_file():
            shutil.copy2(src, where / src.name)
        else:
            raise FeedstockError(f"{src}: a test file the rendered test section names is not in the recipe")
    return where


def run_command(
    command: str,
    env: Mapping[str, str],
    cwd: Path,
    *,
    explained: Path,
    bash_options: Sequence[str],
    timeout: float,
) -> CommandResult:
    """``command`` with ``bash <bash_options> -c`` in ``cwd``; the binary check is given
    ``explained``. Running past ``timeout`` is a failure (:data:`TIMED_OUT`), not an exception."""
    if BINARY_CHECK in command:
        command = f'{command} --explained "{explained}"'
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            ["bash", *bash_options, "-c", command],
            cwd=cwd,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        seconds = time.monotonic() - t0
        return CommandResult(command, TIMED_OUT, "", f"took longer than {timeout:.0f} s", seconds)
    return CommandResult(command, proc.returncode, proc.stdout, proc.stderr, time.monotonic() - t0)
