#!/usr/bin/env python3
"""Render the generated tables of docs/architecture.md and docs/packages.md from the code and data
they describe.

    python -m feedstock update-doc-tables [--check]

Every block between ``<!-- generated: NAME -->`` and ``<!-- end generated -->`` is rendered again
(scripts/feedstock/doc_tables.py). ``--check`` writes nothing and exits 1 if a doc is stale.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from feedstock.doc_tables import DOCS, refresh
from feedstock.errors import FeedstockError

PROG = "feedstock update-doc-tables"


class StaleDoc(FeedstockError):
    """The doc's generated tables differ from the code."""


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 if the doc is stale")
    ns = p.parse_args(argv)
    stale = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        fresh = refresh(text, f"docs/{doc.name}")
        if fresh == text:
            print(f"{doc.name}: the generated tables are up to date")
            continue
        if ns.check:
            stale.append(doc.name)
            continue
        tmp = doc.with_name(f".{doc.name}.tmp")
        tmp.write_text(fresh, encoding="utf-8")
        tmp.replace(doc)
        print(f"{doc.name}: generated tables rewritten")
    if stale:
        raise StaleDoc(f"{', '.join(stale)}: generated tables are stale; run python -m {PROG}")
    return 0
