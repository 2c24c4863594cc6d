#!/usr/bin/env python3
"""Check what a new upstream PyTorch version changes for this feedstock, in one report.

Usage: python -m feedstock bump NEW [--platforms linux-64,osx-arm64] [--offline]
       [--cache DIR] [--feedstock DIR] [--write-listings] [--json]

Takes upstream's torch NEW wheels (from the cache, ~/.cache/pytorch-feedstock/wheels or
$PYTORCH_FEEDSTOCK_WHEEL_CACHE, else `pip download`) for every platform the recipe builds, and
checks them against the recipe: Requires-Python against the variant Pythons, the build backend
(WHEEL's Generator), Requires-Dist against pytorch's run requirements, the file listings against
tests/data (libraries, headers, top-level dirs, files per package by the split spec), every patch
(dry run), and the split with the recipe's rendered file tests on the new layouts. Exit status:
0 when nothing needs a person, 1 when something does, 2 for bad input (malformed or unknown
version, no network, nothing cached with --offline). The tarball's sha256 is left to the bot or a
person. tests/data is written only with --write-listings.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from feedstock.patch_check import cache_dir
from feedstock.paths import REPO
from feedstock.split_check.platforms import parse_platforms
from feedstock.split_check.run import Options, check_bump

PROG = "feedstock bump"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("version", help="the new upstream version, e.g. 2.15.0")
    parser.add_argument("--platforms", help="comma-separated conda platforms (default: all)")
    parser.add_argument("--offline", action="store_true", help="use cached wheels only")
    parser.add_argument("--cache", type=Path, help="wheel cache (default: check_patches.py's)")
    parser.add_argument("--feedstock", type=Path, default=REPO, help="feedstock root (default: this one)")
    parser.add_argument("--write-listings", action="store_true", help="write the new listings to tests/data")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--rehearse",
        action="store_true",
        help="then rehearse NEW on real binaries (python -m feedstock rehearse)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    options = Options(
        version=args.version,
        feedstock=args.feedstock.resolve(),
        cache=args.cache or cache_dir(),
        offline=args.offline,
        platforms=parse_platforms(args.platforms),
        write_listings=args.write_listings,
    )
    report = check_bump(options)
    print(report.json() if args.json else report.text())
    if args.rehearse:  # docs/rehearsal.md; its own exit status joins the report's
        from feedstock.commands import rehearse

        rehearsed = rehearse.main(["--version", args.version, *(["--offline"] if args.offline else [])])
        return max(report.exit_code, rehearsed)
    return report.exit_code
