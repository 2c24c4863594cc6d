"""The free-threaded (``t``) forms a Python-version swap of the CMake cache must handle.

A free-threaded CPython (PEP 703, ``--disable-gil``) differs from the GIL build of the same
version only in names that carry the ABI flag ``t`` (measured on CPython 3.13.5t; 3.14t has the
same shape): interpreter ``python3.14t``, ``include/python3.14t``, ``lib/python3.14t``,
``libpython3.14t.so`` (``.dylib`` on macOS), ``config-3.14t-<triplet>``, SOABI
``cpython-314t-<platform>`` and, on Windows, ``python314t.lib``/``.dll`` and ``cp314t-win_amd64``.
FindPython's ``_Python_INTERPRETER_PROPERTIES`` records the flag in field 5 (ABIFLAGS: ``t``, and
``<none>`` for a GIL build); field 7
(SOSABI) comes from the interpreter's ``.abi3`` suffix, which 3.13t lists too.

Version atoms (``3.14``, ``3.14.1``, ``3;14``) are the same for both builds, and so is the pyc
cache tag (``sys.implementation.cache_tag`` is ``cpython-314`` for 3.14t). A swap between the
two builds of one version (3.14 <-> 3.14t) therefore changes flags only, and its leftover check
looks for the old build's flagged (or unflagged) names, not for the version.

``python_swap`` applies these rules; this module only knows the names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLAG = "t"
# FindPython's _Python_INTERPRETER_PROPERTIES: ID;MAJOR;MINOR;PATCH;ARCH;ABIFLAGS;SOABI;SOSABI;...
ABIFLAGS_FIELD = 5
NO_FLAGS = "<none>"  # how FindPython records a GIL build's empty ABIFLAGS (measured, CMake 4.4)
SOABI_FIELD = 6
SOSABI_FIELD = 7


def flag(freethreaded: bool) -> str:
    return FLAG if freethreaded else ""


def soabi_is_freethreaded(soabi: str, nodot: str) -> bool:
    """``cpython-314t-x86_64-linux-gnu`` / ``cp314t-win_amd64``: the SOABI of a free-threaded build."""
    return bool(re.search(rf"(?:python-?|cp){nodot}{FLAG}(?![0-9A-Za-z])", soabi, re.IGNORECASE))


def properties_are_freethreaded(fields: list[str]) -> bool:
    """Whether FindPython's interpreter properties describe a free-threaded interpreter."""
    if len(fields) > ABIFLAGS_FIELD and FLAG in fields[ABIFLAGS_FIELD]:
        return True
    nodot = f"{fields[1]}{fields[2]}" if len(fields) > 2 else ""
    return len(fields) > SOABI_FIELD and soabi_is_freethreaded(fields[SOABI_FIELD], nodot)


@dataclass(frozen=True)
class FlagChange:
    """The ABI flag going from ``old`` to ``new`` (both bool: free-threaded or not)."""

    old: bool
    new: bool

    @property
    def changes(self) -> bool:
        return self.old != self.new

    def properties(self, fields: list[str], sosabi: str | None = None) -> list[str]:
        """ABIFLAGS for the new build, and SOSABI when the interpreter told (``sosabi``).

        Only touched when the flag changes, so a swap between two GIL builds writes what it
        always did. SOSABI is left as it was in string mode: 3.13t lists ``.abi3.so`` among its
        extension suffixes like the GIL build (measured), so nothing says it differs.
        """
        if not self.changes or len(fields) <= SOSABI_FIELD:
            return fields
        out = list(fields)
        base = out[ABIFLAGS_FIELD].replace(NO_FLAGS, "").replace(FLAG, "")
        out[ABIFLAGS_FIELD] = base + FLAG if self.new else base or NO_FLAGS
        if sosabi is not None:
            out[SOSABI_FIELD] = sosabi
        return out

    def same_version_leftover(self, short: str, nodot: str) -> str:
        """A regex for names of the old build when only the flag changes (3.14 <-> 3.14t)."""
        dot = re.escape(short)
        if self.old:  # 3.14t -> 3.14: any flagged name is a leftover
            return rf"(?<![0-9]){dot}{FLAG}(?![0-9A-Za-z])|(?<![0-9]){nodot}{FLAG}(?![0-9A-Za-z])"
        # 3.14 -> 3.14t: a name that should carry the flag and does not (the version alone is fine)
        return (
            rf"(?i:(?<![A-Za-z0-9])(?:lib)?python{dot}(?![0-9{FLAG}])"
            rf"|(?<![A-Za-z0-9])config-{dot}(?![0-9{FLAG}])"
            rf"|(?<![A-Za-z0-9])(?:c?python-?|cp){nodot}(?![0-9{FLAG}]))"
        )

    def properties_leftover(self, fields: list[str]) -> bool:
        """Whether the ABIFLAGS field still describes the old build."""
        if not self.changes or len(fields) <= ABIFLAGS_FIELD:
            return False
        return (FLAG in fields[ABIFLAGS_FIELD]) != self.new
