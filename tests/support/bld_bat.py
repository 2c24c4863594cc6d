"""recipe/bld.bat's environment part, interpreted here (no cmd.exe on this machine).

Runs bld.bat from the top up to the step selection (``if "%PKG_NAME%" ...``), for the few
constructs bld.bat uses, with cmd's rules for them:

- percent expansion of a line: ``%NAME%`` is the value, empty when unset; ``%%`` is ``%``;
- ``set "K=V"``: K and V from between the first and the last quote, split at the first ``=``;
  an empty V removes K;
- ``for /f "usebackq delims=" %%L in ("FILE") do %%L``: each line of FILE as a command, after
  the expansion passes (so without percent expansion), skipping empty lines and lines that begin
  with ``;``;
- ``"...\\python.exe" -m megabuild ARGS > "FILE"``: this interpreter, with the environment so far;
  ``if errorlevel 1 exit 1`` stops with its status.

Any other line is an error, so a construct this interpreter does not know cannot pass silently.
Environment names are kept case-sensitive (cmd's are not).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

STOP = re.compile(r'^if "%PKG_NAME%"')
SET = re.compile(r'^set "(.*)"\s*$')
FOR_FILE = re.compile(r'^for /f "usebackq delims=" %%(\w) in \("([^"]+)"\) do %%\1$')
MEGABUILD = re.compile(r'^"[^"]*\\python\.exe" -m megabuild (.+?) > "([^"]+)"$')


@dataclass
class BatRun:
    env: dict[str, str]
    exit_code: int | None = None  # set when the script exited before the step selection
    stderr: str = ""


def expand(line: str, env: Mapping[str, str]) -> str:
    return re.sub(r"%%|%(\w+)%", lambda m: "%" if m.group(0) == "%%" else env.get(m.group(1), ""), line)


def apply_set(argument: str, env: dict[str, str]) -> None:
    """cmd's ``set "K=V"`` (the argument between the first and the last quote)."""
    name, sep, value = argument.partition("=")
    if not sep or not name:
        raise ValueError(f"not a set assignment: {argument!r}")
    if value:
        env[name] = value
    else:
        env.pop(name, None)


def _lines(text: str) -> Iterator[str]:
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.upper().startswith(("@REM", "REM ")):
            yield line


def _local_path(path: str) -> Path:
    return Path(path.replace("\\", "/"))


def _run_megabuild(args: str, out: str, run: BatRun) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "megabuild", *shlex.split(args)], env=run.env, capture_output=True, text=True
    )
    _local_path(out).write_text(proc.stdout)
    run.stderr += proc.stderr
    run.env["__errorlevel"] = str(proc.returncode)


def _command(line: str, run: BatRun) -> bool:
    """Run one line; False when the script exits."""
    if line.lower() in ("@echo on", "@echo off", "setlocal") or line.lower().startswith("echo "):
        return True
    if match := SET.match(line):
        apply_set(match[1], run.env)
    elif match := MEGABUILD.match(line):
        _run_megabuild(match[1], match[2], run)
    elif line == "if errorlevel 1 exit 1":
        if int(run.env.get("__errorlevel", "0")) >= 1:
            run.exit_code = 1
            return False
    elif match := FOR_FILE.match(line):
        for body in _local_path(expand(match[2], run.env)).read_text().splitlines():
            if body and not body.startswith(";") and not _command(body, run):
                return False
    else:
        raise ValueError(f"bld.bat: a line this interpreter does not know: {line!r}")
    return True


def run_bld_bat(path: Path, env: Mapping[str, str]) -> BatRun:
    run = BatRun(env=dict(env))
    lines = _lines(path.read_text())
    for line in lines:
        if STOP.match(line):
            break
        if not _command(expand(line, run.env) if not FOR_FILE.match(line) else line, run):
            return run
    run.env.pop("__errorlevel", None)
    return run
