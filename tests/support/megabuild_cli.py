"""Run the build-time helpers the way the recipe's scripts do: ``python -m megabuild ...`` in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from feedstock.paths import RECIPE


def run_megabuild(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(RECIPE))
    return subprocess.run(
        [sys.executable, "-m", "megabuild", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )
