"""Product code never imports test code: the tests import recipe/ and scripts/, not the reverse."""

from __future__ import annotations

import ast
from pathlib import Path

from feedstock.paths import RECIPE, REPO, SCRIPTS, TESTS

# Top-level import names that only exist under tests/ (support/, helpers, test modules).
TEST_ONLY = {"tests", "support", "conftest"} | {p.stem for p in TESTS.glob("*.py")}


def product_sources() -> list[Path]:
    return sorted([*RECIPE.rglob("*.py"), *SCRIPTS.rglob("*.py"), REPO / "build-locally.py"])


def imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_no_product_module_imports_from_tests() -> None:
    sources = product_sources()
    assert len(sources) > 20
    offenders = {
        str(path.relative_to(REPO)): sorted(imported_roots(path) & TEST_ONLY)
        for path in sources
        if imported_roots(path) & TEST_ONLY
    }
    assert not offenders, f"product code imports test code: {offenders}"


def test_the_check_sees_an_import_of_test_code(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from support.paths import FIXTURE\nimport tests.support\n")
    assert imported_roots(module) & TEST_ONLY == {"support", "tests"}


# -- one import root: the installed project, never a path edited at run time ---------------------

SYS_PATH_EDIT = ("sys.path.insert", "sys.path.append", "sys.path.extend", "site.addsitedir")


def sys_path_edits(path: Path) -> list[str]:
    """Where ``path`` edits the import path (a string in a docstring counts too: it would say how)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [f"{path.name}:{n}" for n, line in enumerate(lines, 1) if any(e in line for e in SYS_PATH_EDIT)]


def test_no_product_module_edits_the_import_path() -> None:
    edits = [edit for path in product_sources() for edit in sys_path_edits(path)]
    assert not edits, f"product code edits sys.path (install the project instead: pip install -e .): {edits}"


def test_the_import_path_check_sees_an_edit(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import sys\nsys.path.insert(0, 'scripts')\n")
    assert sys_path_edits(module) == ["m.py:2"]
