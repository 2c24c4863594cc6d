"""The tables of docs/architecture.md and docs/packages.md that describe code or data, rendered from
that code and data.

A table lies between ``<!-- generated: NAME -->`` and ``<!-- end generated -->``; :func:`refresh`
renders every such block again (``python -m feedstock update-doc-tables`` writes the docs of
:data:`DOCS`, and ``tests/test_docs.py`` keeps them equal). The pipeline table reads
:data:`megabuild.pipeline.description.PIPELINE` through its public names (``Phase``, ``Step``,
``When``); the split-outputs table reads ``recipe/split_spec.json`` as the split does; the
conda-forge table (packages.md) is :func:`feedstock.parity.rows`; the requirements table
(packages.md) is :func:`feedstock.requirements_compare.table_rows`, from the committed comparison
``tests/data/requirements-vs-conda-forge.json``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from megabuild.pipeline.description import PIPELINE, Step

from feedstock import parity, requirements_compare
from feedstock.errors import FeedstockError
from feedstock.paths import RECIPE, REPO

ARCHITECTURE = REPO / "docs" / "architecture.md"
PACKAGES = REPO / "docs" / "packages.md"
DOCS = (ARCHITECTURE, PACKAGES)
"""The docs that hold generated tables."""
SPLIT_SPEC = RECIPE / "split_spec.json"
END = "<!-- end generated -->"
_BLOCK = re.compile(r"^<!-- generated: ([a-z-]+) -->\n(.*?)^" + re.escape(END) + r"$", re.M | re.S)


class DocTableError(FeedstockError):
    """A generated block the doc cannot hold (an unknown name, an unclosed block)."""


def _cell(text: object) -> str:
    # a note's <variant> would be an HTML tag to a Markdown renderer, a | a column
    return str(text).replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    # inside a code span only a | needs escaping (the table's); &lt; would show as such
    return "`" + text.replace("|", "\\|") + "`"


def _table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _step_text(step: Step) -> str:
    details = [step.wheel.value] if step.wheel is not None else []
    if step.drop_libtorch_headers:
        details.append("libtorch's headers dropped from the pytorch output")
    return ": ".join([step.name, "; ".join(details)]) if details else step.name


def pipeline_table() -> list[str]:
    """Every phase's steps in order, with the platform rule and whether the real tree is needed."""
    rows = []
    for phase, steps in PIPELINE.phases:
        for index, step in enumerate(steps):
            rows.append(
                (f"`{phase.value}`" if index == 0 else "", _step_text(step), step.when.value,
                 "yes" if step.build_tree else "")
            )  # fmt: skip
    return _table(("phase", "step", "runs on", "needs the real build tree"), rows)


def load_split_spec(path: Path = SPLIT_SPEC) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise DocTableError(f"{path}: not a JSON object")
    return data


def split_outputs_table(spec: Mapping[str, Any]) -> list[str]:
    """The spec's outputs, their variants and what each holds."""
    default = spec.get("default_output")
    rows = [
        (f"`{name}`" + (" (default)" if name == default else ""),
         ", ".join(f"`{v}`" for v in entry.get("variants", [])), entry.get("note", ""))
        for name, entry in spec.get("outputs", {}).items()
    ]  # fmt: skip
    return _table(("output", "variants", "what it holds"), rows)


def conda_forge_table() -> list[str]:
    """What changes for users of conda-forge's pytorch packages (:mod:`feedstock.parity`)."""
    header = ("what", f"conda-forge ({parity.CONDA_FORGE_COMMIT})", "this feedstock", "why")
    return _table(header, parity.rows())


def requirements_table() -> list[str]:
    """Every difference of the requirements from conda-forge's, with its reason
    (:mod:`feedstock.requirements_compare`)."""
    recorded = requirements_compare.load()
    header = ("package: field", "this feedstock", f"conda-forge ({recorded.commit[:8]})", "where", "why")
    lines = _table(header, [])
    for output, field, ours, theirs, where, why in requirements_compare.table_rows(recorded):
        cells = [f"{_code(output)}: {_cell(field)}"]
        cells += [", ".join(_code(s) for s in side) or "—" for side in (ours, theirs)]
        lines.append("| " + " | ".join([*cells, _cell(where), _cell(why)]) + " |")
    return lines


def tables() -> dict[str, Callable[[], list[str]]]:
    """Every table a doc can hold, by the name its block gives."""
    return {
        "pipeline": pipeline_table,
        "split-outputs": lambda: split_outputs_table(load_split_spec()),
        "conda-forge-changes": conda_forge_table,
        "requirements-vs-conda-forge": requirements_table,
    }


def refresh(text: str, where: str = "docs/architecture.md") -> str:
    """``text`` with every generated block rendered again; an unknown or unclosed block raises."""
    known = tables()
    opened = len(re.findall(r"^<!-- generated: ", text, re.M))
    found = _BLOCK.findall(text)
    if opened != len(found):
        raise DocTableError(f"{where}: {opened} generated blocks open, {len(found)} end with {END!r}")
    unknown = sorted({name for name, _ in found} - set(known))
    if unknown:
        raise DocTableError(f"{where}: unknown generated tables {unknown} (known: {sorted(known)})")

    def render(match: re.Match[str]) -> str:
        body = "\n".join(known[match[1]]())
        return f"<!-- generated: {match[1]} -->\n{body}\n{END}"

    return _BLOCK.sub(render, text)
