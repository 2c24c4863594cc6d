"""The rendered ``test:`` commands that only inspect files, run against a laid-out prefix.

``test ...`` / ``[ ... ]`` (and chains of them with && / ||) run in bash; on Windows cmd's
``if [not] exist`` runs as bash ``test`` (``feedstock.wincmd``). Everything else needs the real
runtime and is counted, not run.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.model import LinalgVariant
from megabuild.pipeline.description import ScriptRun

from .. import wincmd
from ..render import RenderedOutput

FILE_TESTS = ("test", "[")
# Files of other packages a test env holds and the rendered tests look at.
STAND_INS = {LinalgVariant.MAGMA: ["lib/libmagma{ext}"]}  # libmagma: run dep of the magma variant


@dataclass
class SplitRun:
    """What one layout's run found."""

    staged: dict[str, set[str]] = field(default_factory=dict)  # output -> files, before install
    ran: int = 0  # file checks run
    failed: list[str] = field(default_factory=list)
    not_run: int = 0  # commands that need the real runtime
    steps: list[str] = field(default_factory=list)  # "<phase>: <step>" of the pipeline, as run


def is_file_test(command: str) -> bool:
    """``test ...`` / ``[ ... ]`` and chains of them with && / ||, nothing else."""
    if "$(" in command or "`" in command:
        return False
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    try:
        for token in lexer:
            if token in ("&&", "||"):
                segments.append([])
            elif token and set(token) <= set("();<>|&"):
                return False
            else:
                segments[-1].append(token)
    except ValueError:  # unbalanced quotes: not a command we can judge
        return False
    return all(s and s[0] in FILE_TESTS and (s[0] != "[" or s[-1] == "]") for s in segments)


def run_tests(output: RenderedOutput, env: dict[str, str], cwd: Path, results: SplitRun) -> None:
    """Run the output's file checks in bash; count the rest."""
    magma = output.variant.get("with_magma")
    label = output.name if magma is None else f"{output.name}[with_magma={magma}]"
    results.not_run += len(output.test.get("imports", []))
    for command in output.test.get("commands", []):
        if not is_file_test(command):
            results.not_run += 1
            continue
        res = subprocess.run(
            ["bash", "-eu", "-c", command], env=env, cwd=cwd, capture_output=True, check=False
        )
        results.ran += 1
        if res.returncode != 0:
            results.failed.append(f"{label}: {command}")


def run_win_tests(output: RenderedOutput, env: dict[str, str], results: SplitRun) -> None:
    """Run the output's ``if [not] exist`` checks as bash ``test``; count the rest."""
    results.not_run += len(output.test.get("imports", []))
    for command in output.test.get("commands", []):
        argv = wincmd.file_test(command, env)
        if argv is None:
            results.not_run += 1
            continue
        results.ran += 1
        if subprocess.run(argv, capture_output=True, check=False).returncode != 0:
            results.failed.append(f"{output.name}: {command}")


def stand_ins(where: Path, run: ScriptRun, ext: str) -> None:
    """Files of other packages the script run's test env holds (its run dependencies)."""
    for path in STAND_INS.get(run.linalg_variant, []) if run.linalg_variant is not None else []:
        target = where / path.format(ext=ext)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)  # never a placeholder's inode
        with os.fdopen(fd, "wb") as fh:
            fh.write(b"stand-in")
