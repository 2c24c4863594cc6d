"""The lint cross-check explains exactly one conda-smithy hint: the top level's megabuild Python.

The hint texts are conda-smithy 2026.8.5's (``PinnedDependencyOverridden``, CF-006), as the real
lint printed them on this recipe."""

from __future__ import annotations

from feedstock.cross_checks.smithy_lint import PINNED_HINT, explained_hints, split_hints
from feedstock.paths import REPO
from feedstock.split_check.recipe import read_recipe

TAIL = (
    "Requirement spec should not list version specifiers to respect conda-forge-pinning. If you "
    "need to force another version, please override the pin via `conda_build_config.yaml`."
)


def _hint(*specs: str, output: str = "top-level") -> str:
    head = PINNED_HINT.replace("top-level", output)
    return f"{head}\n{[f'- In section host: `{s}`' for s in specs]}\n{TAIL}"


def test_the_megabuild_python_pin_is_explained() -> None:
    python = read_recipe(REPO).megabuild_python
    hints, lines = split_hints([_hint(f"python {python}")], explained_hints(REPO))
    assert hints == [] and len(lines) == 1 and f"megabuild Python {python}" in lines[0]


def test_another_python_or_another_pin_or_output_is_not() -> None:
    python = read_recipe(REPO).megabuild_python
    other = "3.11" if python != "3.11" else "3.13"
    planted = [
        _hint(f"python {other}"),
        _hint(f"python {python}", "numpy 2.0"),
        _hint(f"python {python}", output="libtorch"),
        "some other hint",
    ]
    hints, lines = split_hints(planted, explained_hints(REPO))
    assert hints == planted and lines == []
