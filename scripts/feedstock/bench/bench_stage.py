#!/usr/bin/env python3
"""Benchmark ``megabuild split stage`` + ``install`` on a tree of the wheel's size.

Run: ``python -m feedstock bench-stage [--dir DIR] [--keep]``

Lays out the torch 2.14.1 linux-64 CUDA 13.0 wheel's files (tests/data listing:
~12k files, ~1.1 GB) with real bytes written (not sparse) where the top level's
``pip install .`` puts them (``$SP_DIR/torch``), stages them (CUDA, nomagma) with the
spec, installs libtorch into a prefix, and prints the times and the bytes
copied. Fails (exit 1) if any file over 1 MB was copied instead of moved
(checked by inode) or if any byte was copied at all on one file system.
Not collected by pytest (the file name does not match ``test_*.py``).
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from megabuild.model import LIBTORCH, LinalgVariant
from megabuild.split.fsmove import COPY_LIMIT, human
from megabuild.split.install import plan_install
from megabuild.split.spec import load_spec
from megabuild.split.stage import plan_stage

from feedstock.paths import TESTS

NOMAGMA = LinalgVariant.NOMAGMA.value  # the linalg variants' names


PROG = "feedstock bench-stage"

LISTING = TESTS / "data/torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv"
BLOCK = bytes(range(256)) * 4096  # 1 MiB of non-zero data


def lay_out(sp_dir: Path) -> tuple[int, int]:
    files = total = 0
    with open(LISTING, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t")
        next(reader)
        for path, size_s, executable in reader:
            size = int(size_s)
            dest = sp_dir / path
            dest.parent.mkdir(parents=True, exist_ok=True)
            with open(dest, "wb") as out:
                left = size
                while left > 0:
                    chunk = BLOCK[: min(left, len(BLOCK))]
                    out.write(chunk)
                    left -= len(chunk)
            if executable == "1":
                os.chmod(dest, 0o755)
            files += 1
            total += size
    return files, total


def inodes_of_big_files(root: Path) -> dict[str, tuple[int, int]]:
    out = {}
    for path in root.rglob("*"):
        st = path.lstat()
        if path.is_file() and not path.is_symlink() and st.st_size > COPY_LIMIT:
            out[path.relative_to(root).as_posix()] = (st.st_dev, st.st_ino)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, help="work dir (default: a new temp dir, removed afterwards)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-stage-", dir=args.dir))
    try:
        sp_dir = work / "prefix-top/lib/python3.12/site-packages"
        t0 = time.perf_counter()
        files, total = lay_out(sp_dir)
        t_layout = time.perf_counter() - t0
        tree = sp_dir / "torch"
        big_before = inodes_of_big_files(tree)

        spec = load_spec(target_platform="linux-64")
        t0 = time.perf_counter()
        report = plan_stage(spec, tree, work / "staging", cuda=True, linalg_variant=NOMAGMA).run()
        t_stage = time.perf_counter() - t0
        print("\n".join(report.lines()))

        moved_big = {}
        for name in (LIBTORCH, "libtorch-cuda-linalg-nomagma", "_dropped"):
            for rel, ident in inodes_of_big_files(work / "staging" / name).items():
                moved_big[rel] = ident
        moved_big.update(inodes_of_big_files(tree))
        copied_big = sorted(rel for rel, ident in big_before.items() if moved_big.get(rel) != ident)

        t0 = time.perf_counter()
        inst = plan_install(spec, LIBTORCH, work / "staging", work / "prefix").run()
        t_install = time.perf_counter() - t0
        print("\n".join(inst.lines()))

        print(f"tree: {files} files, {total} bytes ({human(total)}) written in {t_layout:.1f} s")
        print(f"stage: {t_stage:.2f} s; install libtorch: {t_install:.2f} s")
        print(
            f"bytes copied: stage {report.stats.bytes_copied}, install {inst.stats.bytes_copied}; "
            f"files over {COPY_LIMIT} bytes: {len(big_before)}, copied: {len(copied_big)}"
        )
        ok = not copied_big and report.stats.bytes_copied == 0 and inst.stats.bytes_copied == 0
        if not ok:
            print(f"FAIL: copied instead of moved: {copied_big[:10]}", file=sys.stderr)
            return 1
        print("OK: big files were moved (same inode), 0 bytes copied")
        return 0
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
