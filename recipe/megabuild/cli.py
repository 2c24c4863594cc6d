"""The build-time helpers of this feedstock's recipe, one command group each.

From the repository root (the package lives in recipe/, all conda-build sees):

    PYTHONPATH=recipe python -m megabuild --help
    PYTHONPATH=recipe python -m megabuild build --help

In a build, the recipe's scripts run it as PYTHONPATH=$RECIPE_DIR python -m megabuild ...

Each command group lives in its own module and contributes its subparsers via
``register(subparsers)``; every handler receives the parsed namespace and
returns an exit code. A :class:`MegabuildError` becomes one line on stderr and
exit status 1; usage errors exit 2 (argparse's convention).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from megabuild.errors import MegabuildError, run_main

# Modules providing ``register(subparsers)``. A group that cannot be imported is an error that
# names it (never a silently missing command).
COMMAND_GROUPS = (
    "megabuild.cache.cli",
    "megabuild.split.cli",
    "megabuild.cmake_args",
    "megabuild.magma.cli",
    "megabuild.buildstate.cli",
    "megabuild.pipeline.cli",
    "megabuild.upstream_tests.cli",
    "megabuild.buildenv.cli",
    "megabuild.binaries.cli",
    "megabuild.binaries.config_cli",
    "megabuild.compiler_cache.cli",
)


class _Parser(argparse.ArgumentParser):
    """A parser that prints its description and epilog as written: the examples in each group's
    help stay one command a line. Subparsers are made with the parser's own class, so every
    group and subcommand gets it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="megabuild", description=__doc__.split("\n\nEach command group")[0])
    groups = parser.add_subparsers(dest="group", metavar="<command>", required=True)
    for module_name in COMMAND_GROUPS:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise MegabuildError(f"command group {module_name} cannot be imported: {exc}") from None
        module.register(groups)
    return parser


def run(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    return run_main("megabuild", run, argv)
