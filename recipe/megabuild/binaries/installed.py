"""The files and build string of an installed package, from ``$PREFIX/conda-meta`` (as conda,
rattler and the split's install steps write it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError


@dataclass(frozen=True)
class Installed:
    name: str
    build: str
    files: tuple[str, ...]


def installed(prefix: Path, name: str) -> Installed | None:
    """The package ``name`` installed in ``prefix``; ``None`` when it is not installed."""
    meta = prefix / "conda-meta"
    for record in sorted(meta.glob(f"{name}-*.json")) if meta.is_dir() else []:
        try:
            raw = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise MegabuildError(f"cannot read {record}: {exc}") from None
        if isinstance(raw, dict) and raw.get("name") == name:
            files = raw.get("files", [])
            if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
                raise MegabuildError(f"{record}: 'files' is not a list of paths")
            return Installed(name, str(raw.get("build", "")), tuple(f.replace("\\", "/") for f in files))
    return None


def package_files(prefix: Path, name: str) -> tuple[str, ...]:
    found = installed(prefix, name)
    if found is None:
        raise MegabuildError(f"package {name} is not installed in {prefix} (no conda-meta record)")
    return found.files
