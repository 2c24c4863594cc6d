"""The top level's pip install, taken out of the host prefix once staged.

conda-build copies the files a multi-output recipe's top level adds to the host prefix into every
output's new host env before that output's script runs, and packages only the files an output's
script adds. What the top level's ``pip install`` left in ``$SP_DIR`` would be in each output's
env: the megabuild Python's pytorch output, whose ``pip install`` writes the same paths, would
package none of torch's Python files, and every other output's env would hold the megabuild
Python's ``lib/python3.X``. Staging moved libtorch's files away; this removes what is left of
what the wheel's ``RECORD`` lists, and the directories that leaves empty (``__pycache__`` too).
"""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

from megabuild.errors import MegabuildError


def remove_installed(sp_dir: Path, prefix: Path, dist: str = "torch") -> str:
    """Remove the files of ``dist``'s install in ``sp_dir`` (its ``RECORD``); the line to print."""
    records = sorted(sp_dir.glob(f"{dist}-*.dist-info/RECORD"))
    if not records:
        raise MegabuildError(f"no {dist}-*.dist-info/RECORD in {sp_dir}: nothing says what pip installed")
    removed, tops = 0, set()
    with records[0].open(newline="", encoding="utf-8") as fh:
        for row in csv.reader(fh):
            if not row:
                continue
            path = Path(os.path.normpath(sp_dir / row[0]))
            if not path.is_relative_to(prefix):
                continue
            if path.is_relative_to(sp_dir):
                tops.add(sp_dir / path.relative_to(sp_dir).parts[0])
            if path.is_file() or path.is_symlink():
                path.unlink()
                removed += 1
    left = 0
    for top in sorted(tops):
        if not top.is_dir() or top.is_symlink():
            continue
        for cache in sorted(top.rglob("__pycache__"), reverse=True):
            shutil.rmtree(cache)
        for directory in sorted((d for d in top.rglob("*") if d.is_dir()), reverse=True):
            if not any(directory.iterdir()):
                directory.rmdir()
        if any(top.iterdir()):
            left += sum(1 for p in top.rglob("*") if not p.is_dir())
        else:
            top.rmdir()
    return f"top level: removed {removed} files of its pip install ({left} not in RECORD kept)"
