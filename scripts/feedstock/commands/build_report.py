#!/usr/bin/env python3
"""Report where a build's time went: wall and edge time per pass and target, the 20 slowest
edges, the compiler cache's hits, and a PNG timeline.

    python -m feedstock build-report BUILD_DIR [--out DIR] [--title TEXT] [--no-png]

BUILD_DIR is a telemetry dir of recipe/build.sh (``build_artifacts/telemetry/<config>`` from
build-locally.py, or ``<work>/_megabuild/telemetry``), a conda-build work dir, or any finished
Ninja build dir (one pass, from its ``.ninja_log``). Writes ``report.md``, ``report.json`` and
``timeline.png`` into ``--out`` (default: the telemetry dir, or BUILD_DIR) and prints report.md.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from feedstock.errors import UsageError
from feedstock.telemetry import find_telemetry, load_build, write_report

PROG = "feedstock build-report"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("build_dir", type=Path, help="telemetry dir, conda-build work dir or Ninja build dir")
    p.add_argument("--out", type=Path, help="where to write the report (default: next to the telemetry)")
    p.add_argument("--title", help="report title (default: the dir's name)")
    p.add_argument("--no-png", action="store_true", help="skip the timeline (no matplotlib needed)")
    ns = p.parse_args(argv)
    if not ns.build_dir.is_dir():
        raise UsageError(f"{ns.build_dir}: no such directory")
    build = load_build(ns.build_dir)
    out = ns.out or find_telemetry(ns.build_dir) or ns.build_dir
    title = ns.title or ns.build_dir.resolve().name
    written = write_report(build, out, title, png=not ns.no_png)
    sys.stdout.write(written["report.md"].read_text())
    print(f"\nwritten: {', '.join(str(path) for path in written.values())}")
    return 0
