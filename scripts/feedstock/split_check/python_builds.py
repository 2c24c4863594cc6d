"""A CPython build as wheels, listings and conda variants name it: the version and the ABI.

``3.14`` and ``3.14t`` are two builds of one version: two conda variants (``3.14.* *_cp314`` and
``3.14.* *_cp314t``), two wheels (``cp314-cp314``, ``cp314-cp314t``), two site-packages. Picking
by the version alone finds both; :meth:`PythonBuild.selects` compares the whole variant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import FeedstockError

_TAG = re.compile(r"cp(3)(\d+)(t?)")


@dataclass(frozen=True)
class PythonBuild:
    version: str
    """``3.14``: conda-build's ``PY_VER`` (the same for both builds of a version)."""
    freethreading: bool = False

    @property
    def name(self) -> str:
        """``3.14t`` / ``3.14``: the site-packages directory's ``python<name>``."""
        return self.version + ("t" if self.freethreading else "")

    @property
    def cache_tag(self) -> str:
        """``sys.implementation.cache_tag``: ``cpython-314`` for 3.14t too (the GIL build's bytecode)."""
        return "cpython-" + self.version.replace(".", "")

    @property
    def abi_tag(self) -> str:
        """A wheel's ABI tag and a listing's Python: ``cp314t``."""
        return "cp" + self.name.replace(".", "")

    def selects(self, variant_python: str) -> bool:
        """Whether a config's ``python`` value (``3.14.* *_cp314t``, ``3.12.* *_cpython``) is this build."""
        version, _, build = variant_python.partition(" ")
        if version.split(".")[:2] != self.version.split("."):
            return False
        return build.endswith("t") == self.freethreading

    @classmethod
    def from_abi_tag(cls, tag: str) -> PythonBuild:
        """``cp314t`` -> 3.14 free-threaded; anything but a CPython ABI tag is bad input."""
        found = _TAG.fullmatch(tag)
        if found is None:
            raise FeedstockError(f"{tag!r} is not a CPython ABI tag such as cp312 or cp314t")
        return cls(f"{found.group(1)}.{found.group(2)}", bool(found.group(3)))

    def __str__(self) -> str:
        return self.name
