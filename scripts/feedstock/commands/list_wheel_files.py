#!/usr/bin/env python3
"""List the files of a torch wheel as TSV (path, size, is-executable).

Usage: python -m feedstock list-wheel-files WHEEL [-o OUT.tsv]

Reads the wheel with zipfile (standard library only). Lists ``torch/`` and the
other top-level package dirs (``functorch/``, ``torchgen/``, ...), not the
``.dist-info``. The listings are committed as test data
(``tests/data/torch-2.13.0-<python tag>-<platform>[-<variant>]-files.tsv``) so
tests can lay out the wheel's tree without the wheel. The TSV has no comment
lines (other readers take it as plain TSV); with ``-o`` the script prints the
wheel's name and SHA-256 for the provenance table in ``tests/data/README.md``.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path

from feedstock.errors import FeedstockError, UsageError
from feedstock.wheel_files import list_wheel, listing_text, sha256_of, write_atomically

PROG = "feedstock list-wheel-files"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("wheel", type=Path)
    parser.add_argument("-o", "--output", type=Path, help="write here instead of stdout")
    args = parser.parse_args(argv)
    try:
        rows = list_wheel(args.wheel)
        digest = sha256_of(args.wheel) if args.output else ""
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"cannot read {args.wheel}: {exc}") from None
    text = listing_text(rows)
    if args.output:
        try:
            write_atomically(args.output, text)
        except OSError as exc:
            raise FeedstockError(f"cannot write {args.output}: {exc.strerror or exc}") from None
        total = sum(s for _, s, _ in rows)
        print(f"{args.wheel.name} sha256 {digest}: {len(rows)} files, {total} bytes -> {args.output}")
    else:
        sys.stdout.write(text)
    return 0
