"""What conda installed into a prefix: ``$PREFIX/conda-meta/<name>-<version>-<build>.json``.

conda writes one such record per package it links into an env (conda-build's host envs too);
its ``files`` list is the package's exact contents, relative to the prefix.
"""

from __future__ import annotations

import json
from pathlib import Path

from megabuild.errors import MegabuildError


def installed_files(prefix: Path, name: str) -> list[str]:
    """The files of the installed package ``name`` (exactly one record must exist)."""
    meta = prefix / "conda-meta"
    records = []
    for path in sorted(meta.glob(f"{name}-*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise MegabuildError(f"{path} is unreadable ({exc})") from None
        if isinstance(data, dict) and data.get("name") == name:
            records.append((path, data))
    if len(records) != 1:
        found = ", ".join(p.name for p, _ in records) or "none"
        raise MegabuildError(f"expected one conda-meta record of {name} in {meta}, found {found}")
    path, data = records[0]
    files = data.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise MegabuildError(f"{path}: 'files' is not a list of paths")
    return list(files)
