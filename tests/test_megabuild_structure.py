"""Shape rules for ``recipe/megabuild``: short functions, standard library only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from feedstock.paths import RECIPE

MEGABUILD = RECIPE / "megabuild"
MAX_FUNCTION_LINES = 60


def _functions(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines incl. decorators and docstring) of every function in *path*."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                found.append((f"{prefix}{child.name}", (child.end_lineno or child.lineno) - first + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def test_no_function_is_over_the_limit() -> None:
    sources = sorted(MEGABUILD.rglob("*.py"))
    assert sources
    too_long = [
        f"{path.relative_to(RECIPE).as_posix()}: {name} ({length} lines)"
        for path in sources
        for name, length in _functions(path)
        if length > MAX_FUNCTION_LINES
    ]
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines: {too_long}"


def test_the_limit_check_sees_long_functions(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    source = tmp_path / "long.py"
    source.write_text(
        f"class C:\n    @staticmethod\n    def f() -> None:\n{body.replace('    ', '        ')}\n"
    )
    assert _functions(source) == [("C.f", MAX_FUNCTION_LINES + 2)]


def test_standard_library_only() -> None:
    imported: set[str] = set()
    for path in MEGABUILD.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
    foreign = sorted(imported - set(sys.stdlib_module_names) - {"megabuild", "__future__"})
    assert not foreign, f"recipe/megabuild must use the standard library only: {foreign}"
