"""Files linked into a directory as conda links a package's files into an env: hard links, and
symlinks stay symlinks (the rehearsal's package directories and its CUDA runtime files)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def link_files(src: Path, files: Iterable[str], dest: Path) -> None:
    """Each of ``files`` (relative to ``src``) at the same path under ``dest``."""
    for rel in sorted(files):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        source = src / rel
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            os.link(source, target)
