"""``megabuild build-state save|restore``: the top-level Python's build, kept for its own output.

    python -m megabuild build-state save --build-dir build --state DIR --python 3.12
    python -m megabuild build-state restore --build-dir build --state DIR --python X.Y [--dry-run]

``restore`` for another Python than the saved one does nothing (that output builds for its
Python in the shared tree, as before).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from megabuild.buildstate import restore, snapshot


def _python(value: str) -> str:
    if not re.fullmatch(r"\d+\.\d+t?", value):  # 3.14t: the free-threaded build
        raise argparse.ArgumentTypeError(f"expected a Python version X.Y or X.Yt, got {value!r}")
    return value


def _save(args: argparse.Namespace) -> int:
    state = snapshot.save(args.build_dir, args.state, args.python)
    print(snapshot.save_report(state, args.state))
    return 0


def _restore(args: argparse.Namespace) -> int:
    print("\n".join(restore.restore_for(args.build_dir, args.state, args.python, args.dry_run)), flush=True)
    return 0


def register(groups: Any) -> None:
    parser = groups.add_parser("build-state", help="keep the top-level Python's build for its own output",
                               description=__doc__)  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="<subcommand>", required=True)
    for name, handler, text in (
        ("save", _save, "hard-link every logged output and copy Ninja's logs into --state"),
        ("restore", _restore, "put back the saved outputs replaced since, and Ninja's logs"),
    ):
        sub = commands.add_parser(name, help=text, description=text)
        sub.add_argument("--build-dir", type=Path, default=Path("build"), help="the Ninja build dir")
        sub.add_argument("--state", type=Path, required=True, help="the saved state's directory")
        sub.add_argument("--python", type=_python, required=True, help="X.Y the build is (to be) for")
        if name == "restore":
            sub.add_argument("--dry-run", action="store_true", help="say what would be put back")
        sub.set_defaults(handler=handler)
