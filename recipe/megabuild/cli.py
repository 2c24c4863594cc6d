"""Command-line entry point: ``python -m megabuild <group> <subcommand> ...``.

Each command group lives in its own module and contributes its subparsers via
``register(subparsers)``; every handler receives the parsed namespace and
returns an exit code. A :class:`MegabuildError` becomes one line on stderr and
exit status 1; usage errors exit 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from megabuild.errors import MegabuildError

# Modules providing ``register(subparsers)``; imported lazily so a broken or
# missing group never takes the others down with it.
COMMAND_GROUPS = (
    "megabuild.cache.cli",
    "megabuild.split.cli",
    "megabuild.cmake_args",
    "megabuild.magma.cli",
    "megabuild.buildstate.cli",
    "megabuild.build.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="megabuild", description=__doc__.splitlines()[0])
    groups = parser.add_subparsers(dest="group", metavar="<command>", required=True)
    for module_name in COMMAND_GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        module.register(groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except MegabuildError as exc:
        print(f"megabuild: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("megabuild: interrupted", file=sys.stderr)
        return 130
