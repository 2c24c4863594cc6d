"""Which files of a pytorch package belong to another Python build ("no bytecode of another Python").

A free-threaded build shares the GIL build's pyc cache tag (``cpython-314`` for 3.14t, measured
on 3.13t: ``sys.implementation.cache_tag == "cpython-313"``), so the tag alone cannot tell a
3.14 package's bytecode from a 3.14t package's. What does: the site-packages dir it lies in
(``lib/python3.14`` vs ``lib/python3.14t``) and the extension suffix (``cpython-314-`` vs
``cpython-314t-``, ``cp314-win_amd64`` vs ``cp314t-win_amd64``), compared whole, not as substrings
(``python3.14`` is a prefix of ``python3.14t``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_LIB_DIR = re.compile(r"^lib/(python\d+\.\d+t?)/")
_EXTENSION = re.compile(r"\.(?:cpython-|cp)(\d+t?)-")
_PYC = re.compile(r"(?:^|/)__pycache__/[^/]+\.cpython-(\d+)(?:\.opt-\d+)?\.pyc$")


def python_of_abi(depends: Iterable[str]) -> str:
    """``3.14t`` from a package's ``python_abi 3.14.* *_cp314t`` (``3.14`` for ``*_cp314``)."""
    for dep in depends:
        parts = dep.split()
        if parts[0] == "python_abi" and len(parts) > 1:
            short = parts[1].rstrip(".*")
            return short + ("t" if len(parts) > 2 and parts[2].endswith("t") else "")
    raise ValueError(f"no python_abi among {list(depends)}")


def foreign_python_files(files: Iterable[str], python: str) -> list[str]:
    """Files of a package for ``python`` (``3.14`` or ``3.14t``) that belong to another build."""
    short = python.removesuffix("t")
    own_dir, own_ext, own_tag = f"python{python}", python.replace(".", ""), short.replace(".", "")
    foreign = []
    for path in files:
        lib = _LIB_DIR.match(path)
        ext = _EXTENSION.search(path.rsplit("/", 1)[-1])
        pyc = _PYC.search(path)
        if (
            (lib and lib.group(1) != own_dir)
            or (ext and ext.group(1) != own_ext and not pyc)
            or (pyc and pyc.group(1) != own_tag)
        ):
            foreign.append(path)
    return foreign
