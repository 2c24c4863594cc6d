"""What the top level records for every later output in the shared work dir: the Python it built
libtorch with (the megabuild Python).

``megabuild_python`` in ``recipe/meta.yaml`` is the one place that writes that Python; conda-build
gives it to the top level as its host Python, the top level writes ``top-level.json`` next to the
forwarded-environment record, and each pytorch output reads it from there (to know whether its
Python is the top level's own, and what to swap in the CMake cache otherwise).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

RECORD_NAME = "top-level.json"
_PYTHON = re.compile(r"\d+\.\d+t?")


@dataclass(frozen=True)
class TopLevelRecord:
    python: str
    """The top level's Python build, ``3.12`` (``3.14t`` for a free-threaded one)."""


def write(work: Path, record: TopLevelRecord) -> Path:
    """Write the record into ``work`` whole (a temporary file renamed), never half."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / RECORD_NAME
    temporary = path.with_name(f".{RECORD_NAME}.tmp")
    temporary.write_text(json.dumps({"python": record.python}) + "\n", encoding="utf-8")
    os.replace(temporary, path)
    return path


def read(work: Path) -> TopLevelRecord:
    """The top level's record; missing or malformed is a one-line error."""
    path = work / RECORD_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MegabuildError(f"{path} is missing: the top level must run first in this work dir") from None
    except (OSError, ValueError) as exc:
        raise MegabuildError(f"cannot read the top level's record {path}: {exc}") from None
    python = data.get("python") if isinstance(data, dict) else None
    if not isinstance(python, str) or not _PYTHON.fullmatch(python):
        raise MegabuildError(f"{path}: 'python' must be a Python such as 3.12, got {python!r}")
    return TopLevelRecord(python)
