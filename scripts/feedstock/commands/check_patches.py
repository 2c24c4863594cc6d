#!/usr/bin/env python3
"""Dry-run recipe/patches against the real PyTorch 2.14.1 files found in upstream wheels.

A wheel holds some of the files the patches change, in one of three forms:

- ``copy``: the file itself (``torch/**/*.py``; ``cmake/Modules/X`` installed as
  ``torch/share/cmake/Caffe2/X``, ``cmake/public/X`` as ``.../Caffe2/public/X``);
- ``header``: an installed header (``torch/include/...``); the install step
  (2.14: ``tools/wrap_headers.py``, run by ``cmake/PostBuildSteps.cmake``; 2.13:
  setup.py) wraps every installed header in a ``TORCH_STABLE_ONLY`` guard, which
  is removed again;
- ``template``: the configured output of a ``*.in`` file; lines of the patch
  that contain ``@VAR@`` are matched against the configured lines as patterns
  and put back in their template form, everything else must match as is.

The Windows wheels are built from a checkout with CRLF line endings; a member
with CRLF endings is compared with them turned into LF (the source tarball's
endings), and the result says so.

Which patched files are reachable is decided from the wheel's member list. The
patches are applied in series order to a scratch tree of the reachable files:
each one first with ``patch -p1 --dry-run --fuzz=0`` (the result: hunks that
fail, need fuzz, or apply at an offset), then for real, so that a later patch
of the same file sees the earlier ones. Files in no wheel are reported as
unverified. With several wheels the first one holding a file is used;
``--per-wheel`` checks every wheel on its own instead.

    python -m feedstock check-patches --wheel torch-2.14.1-...whl [--wheel ...] [--per-wheel]
    python -m feedstock check-patches --download      # the macOS wheel, cached
"""

from __future__ import annotations

import argparse
import json
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from feedstock.errors import FeedstockError, UsageError
from feedstock.patch_check import (  # the logic lives in the library; tests use these names here too
    DEFAULT_PLATFORM,
    TORCH_VERSION,
    PatchResult,
    check,
    download_wheel,
)

PROG = "feedstock check-patches"


def report(results: list[PatchResult]) -> str:
    lines: list[str] = []
    for res in results:
        lines.append(f"{res.patch}: {'OK' if res.ok else 'FAILED'} (wheel holds {res.coverage})")
        for f in res.files:
            where = f"{f.member} [{f.form}]" if f.member else "-"
            lines.append(f"  {f.path}: {where}: {f.message}")
    return "\n".join(lines)


def as_json(results: list[PatchResult]) -> list[dict[str, Any]]:
    return [
        {"patch": r.patch, "ok": r.ok, "coverage": r.coverage, "files": [asdict(f) for f in r.files]}
        for r in results
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--wheel", action="append", type=Path, default=[], help=f"a torch {TORCH_VERSION} wheel"
    )
    parser.add_argument("--download", action="store_true", help=f"use the cached {DEFAULT_PLATFORM} wheel")
    parser.add_argument("--per-wheel", action="store_true", help="check every wheel on its own")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    wheels = list(args.wheel)
    for wheel in wheels:
        if not wheel.is_file():
            raise UsageError(f"no such wheel: {wheel}")
        if not zipfile.is_zipfile(wheel):
            raise UsageError(f"{wheel}: not a wheel (not a zip archive)")
    if args.download or not wheels:
        try:
            wheels.append(download_wheel())
        except (OSError, subprocess.SubprocessError) as exc:
            raise FeedstockError(f"cannot download the torch {TORCH_VERSION} wheel: {exc}") from None
    runs = [(w.name, check([w])) for w in wheels] if args.per_wheel else [("", check(wheels))]
    if args.json:
        out: Any = as_json(runs[0][1]) if not args.per_wheel else {n: as_json(r) for n, r in runs}
        print(json.dumps(out, indent=2))
    else:
        print("\n\n".join((f"== {name}\n" if name else "") + report(results) for name, results in runs))
    return 0 if all(r.ok for _, results in runs for r in results) else 1
