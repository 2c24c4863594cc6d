"""``megabuild compiler-cache run -- COMMAND ...``: a command inside the build's compiler cache.

``megabuild build top-level`` and ``megabuild build pytorch`` run inside the same session; this
runs any other command that way (a maintainer's ``cmake --build build`` in a kept work dir, the
tests). The cache comes from ``FEEDSTOCK_COMPILER_CACHE``, ``FEEDSTOCK_COMPILER_CACHE_CONF`` and
``FEEDSTOCK_AWS_CREDENTIALS``; the launcher lies under ``$SRC_DIR/_megabuild``. The exit status
is the command's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Any

from megabuild.compiler_cache.session import session
from megabuild.errors import MegabuildError


def _run(args: argparse.Namespace) -> int:
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        raise MegabuildError("compiler-cache run: no command given")
    src_dir = os.environ.get("SRC_DIR", "")
    if not src_dir:
        raise MegabuildError("SRC_DIR is not set (the launcher lies under $SRC_DIR/_megabuild)")
    with session(os.environ, Path(src_dir) / "_megabuild"):
        try:
            return subprocess.run(command, check=False).returncode
        except OSError as exc:
            raise MegabuildError(f"compiler-cache run: cannot run {command[0]}: {exc.strerror}") from None


def register(groups: Any) -> None:
    parser = groups.add_parser(
        "compiler-cache", help="run a command inside the build's compiler cache", description=__doc__
    )
    commands = parser.add_subparsers(dest="command_name", metavar="<command>", required=True)
    sub = commands.add_parser("run", help="run COMMAND with the compiler cache of a build step")
    sub.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    sub.set_defaults(handler=_run)
