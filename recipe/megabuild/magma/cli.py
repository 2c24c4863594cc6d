"""``megabuild magma-linalg``: the MAGMA variant of libtorch_cuda_linalg from its own objects."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from megabuild.magma import replay


def _handle(args: argparse.Namespace) -> int:
    planned = replay.plan(
        args.build_dir, args.out, args.library, args.target, args.magma_home, list(args.define), args.lib_dir
    )
    for line in planned.lines() if args.dry_run else replay.run(planned):
        print(line, flush=True)
    return 0


def register(groups: Any) -> None:
    parser = groups.add_parser(
        "magma-linalg",
        help="compile only the linalg target with MAGMA and link it against libmagma",
        description=__doc__,
    )
    parser.add_argument("--build-dir", type=Path, default=Path("build"), help="the nomagma Ninja build dir")
    parser.add_argument("--out", type=Path, required=True, help="directory for the header, objects, library")
    parser.add_argument(
        "--magma-home", type=Path, required=True, help="prefix with include/magma.h, lib/libmagma.so"
    )
    parser.add_argument("--lib-dir", type=Path, help="where the library goes (default: OUT/lib)")
    parser.add_argument("--library", default=replay.LIBRARY, help="the library's Ninja output")
    parser.add_argument("--target", default=replay.TARGET, help="its CMake target")
    parser.add_argument("--define", action="append", default=[], help="extra define (MAGMA's, e.g. MAGMA_V2)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    parser.set_defaults(handler=_handle)
