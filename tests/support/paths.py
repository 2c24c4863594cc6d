"""Paths only the tests use; the feedstock's own layout is in scripts/feedstock/paths.py."""

from __future__ import annotations

from feedstock.paths import REPO, TESTS

FIXTURE = TESTS / "fixture"
# Real data from a PyTorch configure (see ../shared/data/pytorch-cmakecache/README.md);
# never committed, tests that need it skip when it is absent.
SHARED_DATA = REPO.parent / "shared" / "data"
REAL_PYTORCH_CACHE = SHARED_DATA / "pytorch-cmakecache" / "CMakeCache-cpu-py311.txt"
