"""``cache set KEY=VALUE``: change options in a configured cache, MAGMA included.

Only existing BOOL/STRING/PATH/FILEPATH/UNINITIALIZED entries may be changed;
INTERNAL and STATIC entries belong to CMake and its modules and are refused.
Unknown keys are refused unless ``--create`` (then ``--type``, default STRING).

MAGMA (facts from PyTorch's ``cmake/Dependencies.cmake`` and
``cmake/Modules/FindMAGMA.cmake``):

* ``find_package(MAGMA)`` only runs ``if(USE_MAGMA)`` (CUDA/ROCm builds);
  otherwise, or when it fails, ``caffe2_update_option(USE_MAGMA OFF)`` forces
  the cache entry back to OFF.
* FindMAGMA returns early ``if(MAGMA_FOUND)``, then calls
  ``find_library(MAGMA_LIBRARIES magma ...)`` and
  ``find_path(MAGMA_INCLUDE_DIR magma.h ...)`` (hints ``$ENV{MAGMA_HOME}``),
  both cached. A failed search is memoised as ``...-NOTFOUND``.
* ``check_prototype_definition(magma_get_sgeqrf_nb ... MAGMA_V2)`` caches its
  result as ``MAGMA_V2:INTERNAL``; check_* macros skip the test whenever the
  variable is defined, so a result memoised while magma.h was missing
  (empty value) would silently drop ``-DMAGMA_V2``.

So turning ``USE_MAGMA`` on also removes ``MAGMA_LIBRARIES``,
``MAGMA_INCLUDE_DIR`` when they hold NOTFOUND (CMake then re-searches),
``MAGMA_FOUND`` if someone cached it as false, and ``MAGMA_V2`` unless it
recorded a successful check made against a magma that is still cached as
found. Turning it off changes only ``USE_MAGMA``: Dependencies.cmake does not
look at the other entries then, and keeping them makes a later ON cheap.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from megabuild.cache.model import KNOWN_TYPES, CacheFile
from megabuild.errors import MegabuildError

EDITABLE_TYPES = frozenset({"BOOL", "STRING", "PATH", "FILEPATH", "UNINITIALIZED"})
PROTECTED_TYPES = frozenset({"INTERNAL", "STATIC"})
_TRUE = {"1", "ON", "YES", "TRUE", "Y"}
_FALSE = {"0", "OFF", "NO", "FALSE", "N", "IGNORE", ""}
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.+\-/]*")


@dataclass
class SetResult:
    changes: list[tuple[str, str, str]] = field(default_factory=list)  # key, old, new
    removed: list[tuple[str, str]] = field(default_factory=list)  # key, old value (memoised search)
    created: list[tuple[str, str, str]] = field(default_factory=list)  # key, type, value

    def report_lines(self) -> list[str]:
        lines = [f"set: {k}: {o} -> {n}" for k, o, n in self.changes]
        lines += [f"set: created {k}:{t}={v}" for k, t, v in self.created]
        lines += [f"set: removed {k} (was {v!r}) so CMake searches again" for k, v in self.removed]
        return lines


def parse_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise MegabuildError(f"expected KEY=VALUE, got {text!r}")
    if ":" in key:
        raise MegabuildError(f"{text!r}: give the type with --type, not KEY:TYPE=VALUE")
    if not _KEY.fullmatch(key):
        raise MegabuildError(f"invalid cache key {key!r}")
    if "\n" in value or "\r" in value:
        raise MegabuildError(f"value for {key} contains a line break")
    return key, value


def is_true(value: str) -> bool:
    upper = value.strip().upper()
    return upper in _TRUE or (upper not in _FALSE and not upper.endswith("-NOTFOUND"))


def set_options(
    cache: CacheFile, assignments: list[str], create: bool = False, type_: str | None = None
) -> SetResult:
    if type_ is not None and not create:
        raise MegabuildError("--type only applies together with --create")
    new_type = (type_ or "STRING").upper()
    if new_type not in KNOWN_TYPES or new_type in PROTECTED_TYPES:
        raise MegabuildError(f"--type must be one of BOOL, STRING, PATH, FILEPATH (got {type_})")
    result = SetResult()
    parsed = [parse_assignment(a) for a in assignments]
    seen: set[str] = set()
    for key, _ in parsed:
        if key in seen:
            raise MegabuildError(f"{key} given twice")
        seen.add(key)
        entry = cache.get(key)
        if entry is None:
            if not create:
                raise MegabuildError(f"no cache entry {key} (use --create --type TYPE to add one)")
        elif entry.type in PROTECTED_TYPES:
            raise MegabuildError(f"refusing to change {key}: it is an {entry.type} entry owned by CMake")
        elif entry.type not in EDITABLE_TYPES:
            raise MegabuildError(f"refusing to change {key}: unknown entry type {entry.type}")
    for key, value in parsed:
        entry = cache.get(key)
        if entry is None:
            cache.add(key, new_type, value, help_text="Set by megabuild cache set")
            result.created.append((key, new_type, value))
        elif entry.value != value:
            if entry.type == "BOOL" and value.upper() not in _TRUE | _FALSE:
                raise MegabuildError(f"{key} is a BOOL; {value!r} is not ON/OFF/1/0/TRUE/FALSE")
            cache.set_value(key, value)
            result.changes.append((key, entry.value, value))
        if key == "USE_MAGMA" and is_true(value):
            _clear_magma_memos(cache, result)
    return result


def _clear_magma_memos(cache: CacheFile, result: SetResult) -> None:
    def notfound(key: str) -> bool:
        entry = cache.get(key)
        return entry is not None and (entry.value == "" or entry.value.endswith("-NOTFOUND"))

    found_before = all(k in cache and not notfound(k) for k in ("MAGMA_LIBRARIES", "MAGMA_INCLUDE_DIR"))
    for key in ("MAGMA_LIBRARIES", "MAGMA_INCLUDE_DIR"):
        if notfound(key):
            entry = cache.get(key)
            assert entry is not None
            cache.remove(key)
            result.removed.append((key, entry.value))
    found = cache.get("MAGMA_FOUND")
    if found is not None and not is_true(found.value):
        cache.remove("MAGMA_FOUND")
        result.removed.append(("MAGMA_FOUND", found.value))
    v2 = cache.get("MAGMA_V2")
    if v2 is not None and not (found_before and is_true(v2.value)):
        cache.remove("MAGMA_V2")
        result.removed.append(("MAGMA_V2", v2.value))
