#!/usr/bin/env python3
"""conda-smithy's conda-forge lint of the recipe; any lint or unexplained hint fails.

    python -m feedstock smithy-lint --pinning PINNING_RECIPE_DIR [RECIPE_DIR]

Runs with the Python of the cross-check environment (``run_cross_checks.py`` beside it builds it
and calls this), where conda-smithy is installed. It calls ``conda_smithy.lint_recipe.main``,
the function behind ``conda smithy lint --conda-forge``, and prints its lints and hints the way
that command does. The command exits 0 when there are only hints; this one exits 1 on any but
the one the recipe answers on purpose (:func:`explained_hints`: exact text, with its reason).

Two inputs of the linter come from the network, so they are pinned or stubbed here:

* the linter hints (``recipe/linter_hints/hints.toml``) and the global pinning's ``python_min``
  conda-smithy reads from conda-forge-pinning-feedstock's main branch: read from
  ``PINNING_RECIPE_DIR``, the same pinning checkout the cross-check rerender uses;
* whether each recipe maintainer is a GitHub account: checked as usual when github.com
  resolves; otherwise not checked, and the names are printed as unchecked.

``conda-forge.yml``'s ``bot:`` section is validated against the schema that
``CONDA_SMITHY_BOT_SCHEMA_URI`` names (conda-smithy's own variable; the runner points it at a
local copy).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

from feedstock.cross_checks.run_cross_checks import github_resolves
from feedstock.errors import FeedstockError, UsageError
from feedstock.paths import RECIPE
from feedstock.split_check.recipe import read_recipe

PROG = "feedstock smithy-lint"

PINNED_HINT = "top-level output overrides versions pinned in the feedstock:"


def _attribute(module: Any, name: str) -> Any:
    if not hasattr(module, name):
        raise FeedstockError(
            f"{module.__name__} has no {name}: this runner patches it (pinned pinning files, offline "
            "maintainer check) and needs updating for this conda-smithy"
        )
    return getattr(module, name)


def pin_the_pinning_files(pinning_recipe: Path) -> None:
    """Serve conda-forge-pinning-feedstock's raw files from the local checkout."""
    from conda_smithy.linter import utils

    prefix = str(_attribute(utils, "PINNING_FEEDSTOCK_RAW")).rstrip("/") + "/"
    fetch: Callable[[str], str | None] = _attribute(utils, "_try_fetch_url_content_cached")

    def local_fetch(url: str) -> str | None:
        if not url.startswith(prefix + "recipe/"):
            return fetch(url)
        path = pinning_recipe / url[len(prefix + "recipe/") :]
        return path.read_text(encoding="utf-8") if path.is_file() else None

    utils._try_fetch_url_content_cached = local_fetch


def skip_maintainer_checks(unchecked: list[str]) -> None:
    """Offline: take every maintainer and team as existing, and remember their names."""
    from conda_smithy import lint_recipe

    for name in ("_maintainer_exists", "_team_exists"):
        _attribute(lint_recipe, name)

    def unchecked_exists(name: str) -> bool:
        unchecked.append(name)
        return True

    lint_recipe._maintainer_exists = unchecked_exists
    lint_recipe._team_exists = unchecked_exists


def print_findings(recipe: str, lints: list[str], hints: list[str]) -> None:
    """As ``conda smithy lint`` prints them."""
    for kind, found in (("has some lint", lints), ("has some suggestions", hints)):
        if found:
            print(f"{recipe} {kind}:\n  " + "\n  ".join(item.replace("\n", "\n    ") for item in found))
    if not lints and not hints:
        print(f"{recipe} is in fine form")


def explained_hints(feedstock: Path) -> dict[str, str]:
    """The hint lines (the first two of a hint) this recipe answers on purpose, with the reason.

    Every config is a megabuild: the top level builds libtorch once, with one Python (meta.yaml's
    ``megabuild_python``), so its host names ``python X.Y`` where the pinning lists every Python;
    the outputs' hosts take the pinning's. (conda-forge's pytorch-cpu feedstock pins ``python 3.12``
    at its top level alike.) Only that spec, with the recipe's own megabuild Python, is explained."""
    python = read_recipe(feedstock).megabuild_python
    spec = str([f"- In section host: `python {python}`"])
    return {f"{PINNED_HINT}\n{spec}": f"the top level builds with the megabuild Python {python} on purpose"}


def split_hints(hints: list[str], explained: dict[str, str]) -> tuple[list[str], list[str]]:
    """(unexplained hints, one line per explained one)."""
    unexplained, lines = [], []
    for hint in hints:
        head = "\n".join(line.strip() for line in hint.splitlines()[:2])
        if head in explained:
            lines.append(f"hint explained: {head.splitlines()[0]} {head.splitlines()[1]}: {explained[head]}")
        else:
            unexplained.append(hint)
    return unexplained, lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("recipe", nargs="?", type=Path, default=RECIPE, help="default: this feedstock's recipe/")
    p.add_argument("--pinning", type=Path, required=True, help="conda-forge-pinning-feedstock's recipe/")
    ns = p.parse_args(argv)
    if not (ns.pinning / "conda_build_config.yaml").is_file():
        raise UsageError(
            f"{ns.pinning} is not conda-forge-pinning-feedstock's recipe/ (no conda_build_config.yaml)"
        )
    if not (ns.recipe / "meta.yaml").is_file():
        raise UsageError(f"{ns.recipe} has no meta.yaml")
    try:
        from conda_smithy import __version__, lint_recipe
    except ImportError as exc:
        raise FeedstockError(
            f"conda-smithy is not importable ({exc}): run this with the cross-check environment's Python"
        ) from exc
    pin_the_pinning_files(ns.pinning.resolve())
    unchecked: list[str] = []
    if not github_resolves():
        skip_maintainer_checks(unchecked)
    print(f"conda-smithy {__version__}: lint --conda-forge {ns.recipe}")
    lints, all_hints = lint_recipe.main(str(ns.recipe), conda_forge=True, return_hints=True)
    hints, explained = split_hints(all_hints, explained_hints(ns.recipe.resolve().parent))
    print_findings(str(ns.recipe), lints, hints)
    for line in explained:
        print(line)
    if unchecked:
        print(f"note: github.com does not resolve: maintainers not checked on GitHub: {', '.join(unchecked)}")
    print(f"lint: {len(lints)} lints, {len(hints)} hints ({len(explained)} explained)")
    return 1 if lints or hints else 0
