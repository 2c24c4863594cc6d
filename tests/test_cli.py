"""``python -m feedstock``: one command lists and runs every maintainer tool.

Every module of the tool folders that defines ``main`` is a listed command (so a new tool cannot be
left out of ``--help``), each names itself as the command table does, and ``--help`` lists them all.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
from pathlib import Path

import pytest
from feedstock import cli
from feedstock.paths import SCRIPTS
from support.tools import tool_argv

PACKAGE = SCRIPTS / "feedstock"
TOOL_FOLDERS = ("commands", "bench", "cross_checks")
# run by another command in the cross-checks' own environment, with conda-build's own options
INTERNAL = {"feedstock.cross_checks.conda_build_offline"}


def modules_with_main(package: Path, folders: tuple[str, ...]) -> set[str]:
    """The dotted names of the modules in ``folders`` that define a top-level ``main``."""
    found = set()
    for folder in folders:
        for path in sorted((package / folder).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            if any(isinstance(node, ast.FunctionDef) and node.name == "main" for node in tree.body):
                found.add(f"{package.name}.{folder}.{path.stem}")
    return found


def test_every_tool_module_is_a_command() -> None:
    listed = {command.module for command in cli.COMMANDS}
    tools = modules_with_main(PACKAGE, TOOL_FOLDERS) - INTERNAL
    assert len(tools) >= 20
    assert tools == listed, f"not listed: {sorted(tools - listed)}; listed, no main: {sorted(listed - tools)}"


def test_the_check_sees_an_unlisted_tool(tmp_path: Path) -> None:
    (tmp_path / "feedstock" / "commands").mkdir(parents=True)
    (tmp_path / "feedstock" / "commands" / "new_tool.py").write_text("def main(argv=None):\n    return 0\n")
    assert modules_with_main(tmp_path / "feedstock", ("commands",)) == {"feedstock.commands.new_tool"}


@pytest.mark.parametrize("command", cli.COMMANDS, ids=lambda c: c.name)
def test_each_command_names_itself_as_listed(command: cli.Command) -> None:
    module = importlib.import_module(command.module)
    assert cli.prog(command) == module.PROG
    assert command.group in cli.GROUPS


def test_help_lists_every_command_by_group() -> None:
    proc = subprocess.run(tool_argv("--help"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    shown = [line.split()[0] for line in proc.stdout.splitlines() if re.match(r"  \S", line)]
    assert shown == [c.name for g in cli.GROUPS for c in cli.COMMANDS if c.group == g]
    assert [line[:-1] for line in proc.stdout.splitlines() if line.endswith(":")] == list(cli.GROUPS)


def test_a_command_runs_through_the_entry() -> None:
    proc = subprocess.run(tool_argv("render", "--help"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage: feedstock render"), proc.stderr
