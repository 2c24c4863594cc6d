"""Conda match specs and build strings: the one definition the renderer, the test channel,
the harness and cfep03_bundle.py share.

Standard library only: cfep03_bundle.py masks hashes without the render library's jinja2.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["as_list", "mask_hash", "spec_name", "spec_parts"]

# conda-build's hash is ``h`` + 7 hex digits, standing alone between ``_`` separators.
_HASH_RE = re.compile(r"(?<![0-9a-z])h[0-9a-f]{7}(?=_|$)")
_NAME_END = re.compile(r"[\s=<>!~\[]")


def mask_hash(build_string: str) -> str:
    """``cuda126_mkl_py312_h1a2b3c4_200`` -> ``cuda126_mkl_py312_h<hash>_200``."""
    return _HASH_RE.sub("h<hash>", build_string)


def spec_name(spec: str) -> str:
    """The package name of a match spec: ``numpy >=1.26``, ``numpy>=1.26``, ``numpy[build=*]``."""
    return _NAME_END.split(spec.strip(), maxsplit=1)[0]


def spec_parts(spec: str) -> tuple[str, str | None, str | None]:
    """(name, version spec, build glob) of ``name [version [build]]``, ``name>=1.2`` or ``name=1.2=build``.

    Absent parts are None; bracket options (``name[build=...]``) are not modelled.
    """
    name = spec_name(spec)
    rest = spec.strip()[len(name) :].strip()
    if rest.startswith("=") and not rest.startswith("=="):
        # conda's ``name=1.2=build`` shorthand: ``=1.2`` means ``1.2.*``.
        version, _, build = rest[1:].partition("=")
        return name, (f"{version}.*" if version and "*" not in version else version or None), build or None
    fields = rest.split()
    return name, (fields[0] if fields else None), (fields[1] if len(fields) > 1 else None)


def as_list(value: Any) -> list[Any]:
    """A recipe field that may be absent, a scalar or a list, as a list."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]
