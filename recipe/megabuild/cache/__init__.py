"""Lossless editing of CMake's ``CMakeCache.txt`` for megabuild (``megabuild cache ...``).

* :mod:`.model`: byte-exact parser/renderer with a typed view of entries.
* :mod:`.python_swap`: ``swap-python`` (rewrite the recorded Python version).
* :mod:`.options`: ``set`` (option changes; USE_MAGMA and its memoised searches).
* :mod:`.store`: atomic writes, ``save``/``restore`` of ``CMakeCache.txt.orig``.
* :mod:`.cli`: the ``cache`` command group.
"""

from __future__ import annotations

from megabuild.cache.model import CacheFile, CacheFormatError, Entry

__all__ = ["CacheFile", "CacheFormatError", "Entry"]
