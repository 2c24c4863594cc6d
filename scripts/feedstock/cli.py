"""The maintainers' one command: ``python -m feedstock <command> [options]``.

Every tool of the feedstock is a subcommand, listed (grouped) by ``python -m feedstock --help``;
``python -m feedstock <command> --help`` shows its options. A command's module is imported only
when it runs, so one tool's dependencies (py-rattler, matplotlib, conda-build) never stop another.
Each module's ``main(argv) -> int`` raises a :class:`~feedstock.errors.FeedstockError` for bad
input, which :func:`~feedstock.errors.run_main` prints as ``feedstock <command>: error: ...``.
"""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from feedstock.errors import Main, UsageError, run_main

PROG = "feedstock"


@dataclass(frozen=True)
class Command:
    name: str
    module: str  # imported when the command runs; it defines PROG and main(argv) -> int
    group: str


# The groups, in the order --help lists them.
GROUPS = ("render", "check", "bump", "build", "rehearse", "bench", "cross-check")
COMMANDS = (
    Command("render", "feedstock.commands.render_configs", "render"),
    Command("update-doc-tables", "feedstock.commands.update_doc_tables", "render"),
    Command("check-patches", "feedstock.commands.check_patches", "check"),
    Command("solver-check", "feedstock.commands.solver_check", "check"),
    Command("bump", "feedstock.commands.bump_version", "bump"),
    Command("upstream-versions", "feedstock.commands.upstream_versions", "bump"),
    Command("list-wheel-files", "feedstock.commands.list_wheel_files", "bump"),
    Command("build-locally", "feedstock.commands.build_locally", "build"),
    Command("build-all", "feedstock.commands.build_all", "build"),
    Command("build-report", "feedstock.commands.build_report", "build"),
    Command("cfep03-bundle", "feedstock.commands.cfep03_bundle", "build"),
    Command("rehearse", "feedstock.commands.rehearse", "rehearse"),
    Command("bench-cache", "feedstock.bench.bench_cache", "bench"),
    Command("bench-compiler-cache", "feedstock.bench.bench_compiler_cache", "bench"),
    Command("bench-extra-python", "feedstock.bench.bench_extra_python", "bench"),
    Command("bench-stage", "feedstock.bench.bench_stage", "bench"),
    Command("bench-rerender", "feedstock.bench.rerender", "bench"),
    Command("demo-megabuild", "feedstock.bench.demo_megabuild", "bench"),
    Command("cross-check", "feedstock.cross_checks.run_cross_checks", "cross-check"),
    Command("requirements-compare", "feedstock.cross_checks.requirements_compare", "cross-check"),
    Command("smithy-lint", "feedstock.cross_checks.smithy_lint", "cross-check"),
    Command("real-build", "feedstock.cross_checks.real_build", "cross-check"),
)
BY_NAME = {command.name: command for command in COMMANDS}


def summary(command: Command) -> str:
    """The first paragraph of the command module's docstring (the one place that says what it does)."""
    try:
        doc = importlib.import_module(command.module).__doc__ or ""
    except ImportError as exc:  # help still lists the others
        return f"(cannot be imported here: {exc})"
    return " ".join(doc.strip().split("\n\n")[0].split())


def usage() -> str:
    width = max(len(command.name) for command in COMMANDS)
    lines = [f"usage: python -m {PROG} <command> [options]", "", (__doc__ or "").splitlines()[0], ""]
    for group in GROUPS:
        lines.append(f"{group}:")
        for c in (c for c in COMMANDS if c.group == group):
            text = textwrap.wrap(summary(c), 108 - width) or [""]
            lines += [f"  {c.name:<{width}}  {text[0]}", *(f"  {'':<{width}}  {t}" for t in text[1:])]
    lines += ["", f"python -m {PROG} <command> --help: the command's options"]
    return "\n".join(lines)


def load(command: Command) -> Main:
    """The command's ``main``."""
    return cast(Main, importlib.import_module(command.module).main)


def prog(command: Command) -> str:
    """How the command names itself in usage and error lines (each module's PROG)."""
    return f"{PROG} {command.name}"


def dispatch(argv: Sequence[str] | None) -> int:
    argv = list(argv or [])
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command = BY_NAME.get(argv[0])
    if command is None:
        raise UsageError(f"no command {argv[0]!r}: python -m {PROG} --help lists them")
    return run_main(prog(command), load(command), list(argv[1:]))


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(PROG, dispatch, list(sys.argv[1:] if argv is None else argv))
