"""CMake's own view of a build's cache, through the CMake File API (``cache-v2`` reply).

Tests compare caches through this reader instead of ``megabuild.cache.model.CacheFile``, so the
oracle for "this cache equals a fresh configure" is CMake, not the parser under test.
Call :func:`request_cache` before a configure (or any CMake re-run) of the build directory; every
later configure of that directory writes a reply, and :func:`read_cache` reads the newest one.
See https://cmake.org/cmake/help/latest/manual/cmake-file-api.7.html
"""

from __future__ import annotations

import json
from pathlib import Path

API = Path(".cmake") / "api" / "v1"

CacheEntries = dict[str, tuple[str, str]]


class FileApiError(AssertionError):
    """The build directory has no usable cache-v2 reply."""


def request_cache(build: Path) -> None:
    """A shared stateless query: CMake answers it on every configure of ``build``."""
    query = build / API / "query" / "cache-v2"
    query.parent.mkdir(parents=True, exist_ok=True)
    query.touch()


def read_cache(build: Path, *, build_placeholder: str | None = None) -> CacheEntries:
    """Cache entries as CMake reports them: name -> (type, value).

    With ``build_placeholder``, the build directory's path inside values is replaced by it, so
    caches of two build directories can be compared.
    """
    reply = build / API / "reply"
    # the File API's rule: the index file with the largest name is the current one
    indexes = sorted(reply.glob("index-*.json"))
    if not indexes:
        raise FileApiError(f"no File API reply in {reply}: call request_cache() before configuring")
    index = json.loads(indexes[-1].read_text())
    answer = index.get("reply", {}).get("cache-v2")
    if not isinstance(answer, dict) or "jsonFile" not in answer:
        raise FileApiError(f"{indexes[-1]} has no cache-v2 reply: {answer!r}")
    entries = json.loads((reply / answer["jsonFile"]).read_text())["entries"]
    found: CacheEntries = {}
    for entry in entries:
        value = str(entry["value"])
        if build_placeholder is not None:
            value = value.replace(str(build), build_placeholder)
        found[str(entry["name"])] = (str(entry["type"]), value)
    return found


def differences(ours: CacheEntries, theirs: CacheEntries) -> dict[str, tuple[object, object]]:
    """Entries whose (type, value) differ, or that only one side has."""
    return {
        key: (ours.get(key), theirs.get(key))
        for key in sorted(ours.keys() | theirs.keys())
        if ours.get(key) != theirs.get(key)
    }
