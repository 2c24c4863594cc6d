"""The comparison: the same upstream wheel installed by pip into a plain venv, as a pip user gets
it. Figures: ``import torch`` time (best of three fresh interpreters), installed bytes, and every
smoke check that works there and not in the rehearsal's env."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import checks
from .tree import PipError, run_pip
from .wheels import Downloads


def tree_bytes(root: Path) -> int:
    """Bytes of the regular files under ``root``, each inode once (conda's hard links)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) in seen or not os.path.isfile(os.path.join(dirpath, name)):
                continue
            seen.add((st.st_dev, st.st_ino))
            if not os.path.islink(os.path.join(dirpath, name)):
                total += st.st_size
    return total


def import_seconds(python: Path, env: Mapping[str, str]) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.monotonic()
        subprocess.run([str(python), "-c", "import torch"], env=dict(env), check=True, capture_output=True)
        best = min(best, time.monotonic() - t0)
    return best


def pip_venv(python: Path, downloads: Downloads, venv: Path) -> Path:
    subprocess.run([str(python), "-m", "venv", str(venv)], check=True, capture_output=True)
    py = venv / "bin" / "python"
    run_pip(py, ["pip", "install", "--no-index", "--disable-pip-version-check",
                 "--find-links", str(downloads.runtime_dir), str(downloads.torch)])  # fmt: skip
    return py


def report(
    prefix: Path,
    downloads: Downloads,
    work: Path,
    ours: Mapping[str, list[Any]],
    env: Mapping[str, str],
    base: Path,
) -> list[str]:
    """The comparison's lines (``base``: the CPython the env's python is); a failure to build the
    venv is one warning line, never a failed run."""
    try:
        py = pip_venv(base, downloads, work / "pip-venv")
    except (OSError, subprocess.CalledProcessError, PipError) as exc:
        return [f"compare: warning: no pip venv ({exc})"]
    venv_env = {"PATH": f"{py.parent}:/usr/bin:/bin", "HOME": env.get("HOME", str(work)), "LANG": "C.UTF-8"}
    theirs = checks.smoke_test(py, venv_env, work)
    ours_import = import_seconds(prefix / "bin" / "python", env)
    theirs_import = import_seconds(py, venv_env)
    lines = [
        f"compare: import torch {ours_import:.2f}s here, {theirs_import:.2f}s in a pip venv (best of 3)",
        f"compare: installed {tree_bytes(prefix) / 2**30:.2f} GiB here (env, CUDA libraries included), "
        f"{tree_bytes(work / 'pip-venv') / 2**30:.2f} GiB in the pip venv",
    ]
    only_there = [k for k, v in theirs.items() if v[0] is True and k in ours and ours[k][0] is not True]
    only_here = [k for k, v in ours.items() if v[0] is True and k in theirs and theirs[k][0] is not True]
    lines.append(f"compare: works in the pip venv only: {', '.join(only_there) or 'nothing'}")
    lines.append(f"compare: works here only: {', '.join(only_here) or 'nothing'}")
    return lines
