"""Where things are, for every test module (the suite imports recipe/ and scripts/ code)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipe"
SCRIPTS = REPO / "scripts"
# Real data from a PyTorch configure (see ../shared/data/pytorch-cmakecache/README.md);
# never committed, tests that need it skip when it is absent.
REAL_PYTORCH_CACHE = REPO.parent / "shared" / "data" / "pytorch-cmakecache" / "CMakeCache-cpu-py311.txt"
