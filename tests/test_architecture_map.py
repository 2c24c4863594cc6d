"""docs/architecture.md's picture and the packages' module lists agree with the tree.

The picture is the ``text`` block that opens docs/architecture.md; every span it writes in
backticks is a repository path (``<...>`` and ``*`` are wildcards that must match something).

A module list is read from a package's ``__init__.py`` docstring (as ``inspect.cleandoc`` leaves
it): every line that starts, unindented, with ````name```` or ``- ``name````, where ``name`` is a
Python identifier, and goes on with ``:`` or ends there, lists ``name``. A package whose docstring
has such lines must list exactly its modules (``*.py`` but ``__init__`` and ``__main__``) and its
subpackages (directories holding ``.py`` files, ``__pycache__`` aside). Every package of
scripts/feedstock must have a list; recipe/megabuild's are checked where they have one.

Product code (recipe/megabuild, scripts/feedstock) never imports the tests' modules, and
megabuild never imports feedstock.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from feedstock.paths import RECIPE, REPO, SCRIPTS

ARCHITECTURE = REPO / "docs" / "architecture.md"
FEEDSTOCK = SCRIPTS / "feedstock"
MEGABUILD = RECIPE / "megabuild"
LISTED = re.compile(r"^(?:- )?``([A-Za-z_]\w*)``(?::|$)", re.M)
NOT_MODULES = {"__init__", "__main__"}
# What the picture must name: the layers a config goes through and the tools beside them.
LAYERS = {
    ".ci_support/<config>.yaml",
    "recipe/meta.yaml",
    "recipe/build.sh",
    "recipe/megabuild/",
    "recipe/megabuild/pipeline/",
    "recipe/megabuild/binaries/",
    "scripts/feedstock/",
    "scripts/feedstock/split_check/",
    "scripts/feedstock/rehearsal/",
    "scripts/feedstock/cross_checks/",
    "scripts/feedstock/conda_build_standin/",
    "tests/fixture/minitorch/",
}


# -- the picture ----------------------------------------------------------------------------------


def picture(text: str) -> str:
    """The page's opening ``text`` block: it comes right after the title, before any section."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip())  # the title
    opening = next(i for i, line in enumerate(lines[start + 1 :], start + 1) if line.strip())
    assert lines[opening] == "```text", f"line {opening + 1}: the picture does not open the page"
    end = lines.index("```", opening + 1)
    return "\n".join(lines[opening + 1 : end])


def picture_paths(block: str) -> list[str]:
    return re.findall(r"`([^`]+)`", block)


def missing_paths(spans: list[str], root: Path = REPO) -> list[str]:
    """The spans that name nothing under ``root`` (a trailing ``/`` must be a directory)."""
    missing = []
    for span in spans:
        pattern = re.sub(r"<[^>]+>", "*", span).rstrip("/")
        found = list(root.glob(pattern)) if "*" in pattern else [root / pattern]
        found = [p for p in found if p.is_dir() or (p.is_file() and not span.endswith("/"))]
        if not found:
            missing.append(span)
    return missing


def test_every_path_in_the_picture_exists() -> None:
    spans = picture_paths(picture(ARCHITECTURE.read_text(encoding="utf-8")))
    assert not LAYERS - set(spans), f"the picture does not name {sorted(LAYERS - set(spans))}"
    assert not missing_paths(spans), f"docs/architecture.md's picture: no such path {missing_paths(spans)}"


def test_a_missing_path_in_the_picture_is_caught(tmp_path: Path) -> None:
    (tmp_path / "recipe").mkdir()
    (tmp_path / "recipe" / "meta.yaml").write_text("")
    spans = ["recipe/", "recipe/meta.yaml", "recipe/<file>.yaml", "recipe/meta.yaml/", "recipe/gone.sh"]
    assert missing_paths(spans, tmp_path) == ["recipe/meta.yaml/", "recipe/gone.sh"]
    with pytest.raises(AssertionError, match="does not open the page"):
        picture("# Title\n\nprose\n\n```text\n`recipe/`\n```\n")


# -- the module lists of the packages' docstrings -------------------------------------------------


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8"))) or ""


def listed_modules(package: Path) -> set[str]:
    return set(LISTED.findall(docstring(package)))


def package_modules(package: Path) -> set[str]:
    modules = {p.stem for p in package.glob("*.py") if p.stem not in NOT_MODULES}
    subpackages = {p.name for p in package.iterdir() if p.is_dir() and any(p.glob("*.py"))}
    return modules | (subpackages - {"__pycache__"})


def list_problems(package: Path) -> list[str]:
    """What a package's module list gets wrong: names of no module, modules it leaves out."""
    listed, present = listed_modules(package), package_modules(package)
    return [f"lists {name}, which is no module" for name in sorted(listed - present)] + [
        f"does not list {name}" for name in sorted(present - listed)
    ]


def packages(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("__init__.py") if "__pycache__" not in p.parts)


LISTING = [p for p in packages(FEEDSTOCK) + packages(MEGABUILD) if listed_modules(p)]


def test_every_feedstock_package_lists_its_modules() -> None:
    """The check below is not vacuous: each of scripts/feedstock's packages has a list."""
    feedstock = packages(FEEDSTOCK)
    assert len(feedstock) >= 7, feedstock
    unlisted = [str(p.relative_to(REPO)) for p in feedstock if p not in LISTING]
    assert not unlisted, f"no module list in the docstring of {unlisted}"


@pytest.mark.parametrize("package", LISTING, ids=lambda p: str(p.relative_to(REPO)))
def test_the_module_list_is_the_package(package: Path) -> None:
    problems = list_problems(package)
    assert not problems, f"{package.relative_to(REPO)}/__init__.py: {'; '.join(problems)}"


def test_a_wrong_module_list_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "__main__.py", "kept.py", "left_out.py", "sub/__init__.py"):
        (package / name).write_text("")
    (package / "__init__.py").write_text(
        '"""A package.\n\n``kept``: listed.\n- ``sub``: listed.\n``gone``: no such module.\n'
        '    ``left_out``: indented, so not a list line.\n"""\n'
    )
    assert list_problems(package) == ["lists gone, which is no module", "does not list left_out"]
    (package / "__init__.py").write_text('"""A package.\n\n``kept``\n``sub``\n``left_out``: all three."""\n')
    assert list_problems(package) == []


# -- who imports whom -----------------------------------------------------------------------------


def imported(path: Path) -> set[str]:
    """The top-level names of the modules ``path`` imports (relative imports aside)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_layers_import_only_downwards() -> None:
    tests = {p.stem for p in (REPO / "tests").glob("*.py")} | {"tests", "support"}
    forbidden = {FEEDSTOCK: tests, MEGABUILD: tests | {"feedstock"}}
    wrong = [
        f"{path.relative_to(REPO)}: imports {sorted(imported(path) & names)}"
        for root, names in forbidden.items()
        for path in sorted(root.rglob("*.py"))
        if imported(path) & names
    ]
    assert not wrong, "\n".join(wrong)


def test_an_upward_import_is_caught(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    source = "import os.path\nfrom feedstock.paths import REPO\nfrom support import cuda\nfrom . import x\n"
    module.write_text(source)
    assert imported(module) == {"os", "feedstock", "support"}
