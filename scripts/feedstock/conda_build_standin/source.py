"""The fixture's source as conda-build hands it to build.sh: a copy, with the recipe's patches.

Most recipe patches change files the fixture has no real copy of (it is a miniature). The ones in
``MIRRORED_PATCHES`` change lines the fixture carries verbatim from upstream, so they are applied
here like conda-build applies them (``patch -p1``, no fuzz): removing one from ``meta.yaml``
changes what the fixture builds, and a fixture edit that breaks its context fails loudly.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from feedstock.errors import FeedstockError
from feedstock.paths import RECIPE, REPO

FIXTURE = REPO / "tests" / "fixture" / "minitorch"
# recipe/patches whose context the fixture carries verbatim (see each fixture file's comment)
MIRRORED_PATCHES = ("0012-caffe2-write-empty.cpp-only-when-it-is-missing.patch",)


def mirrored(listed: Sequence[str]) -> list[Path]:
    """The patches of a rendered ``source.patches`` list that apply to the fixture, in order."""
    return [RECIPE / entry for entry in listed if Path(entry).name in MIRRORED_PATCHES]


def copy_fixture(dest: Path, patches: Sequence[Path]) -> None:
    """Copy the fixture to ``dest`` (no build products) and apply ``patches`` to it."""
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("build", "__pycache__", "*.egg-info"))
    for patch in patches:
        proc = subprocess.run(
            ["patch", "-p1", "--fuzz=0", "--batch", "--forward", "--no-backup-if-mismatch", "-i", str(patch)],
            cwd=dest, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            raise FeedstockError(f"{patch.name} does not apply to the fixture: {proc.stdout.strip()}")
