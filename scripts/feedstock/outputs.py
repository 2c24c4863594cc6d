"""Reading the JSON list of rendered outputs (``python -m feedstock render --json``) that other tools accept.

Standard library only: cfep03_bundle.py reads such a file where jinja2 is not installed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .errors import UsageError, capped

# What every consumer (the solver channel's index records, cfep03's package keys) reads.
REQUIRED_FIELDS = ("name", "version", "build_string", "build_number", "subdir")


def load_outputs(path: Path) -> list[dict[str, Any]]:
    """The outputs listed in ``path``; a UsageError names the first thing wrong with the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, list):
        kind = type(data).__name__
        raise UsageError(f"{path}: expected a JSON list of outputs (render.py --json), got a {kind}")
    for index, output in enumerate(data):
        if not isinstance(output, dict):
            raise UsageError(f"{path}: item {index} is {type(output).__name__}, not an output object")
        missing = [name for name in REQUIRED_FIELDS if name not in output]
        if missing:
            raise UsageError(f"{path}: item {index} has no {capped(missing)}")
        try:
            int(output["build_number"])
        except (TypeError, ValueError):
            number = output["build_number"]
            raise UsageError(f"{path}: item {index}: build_number {number!r} is not a number") from None
    return data
