"""``conda-build`` as the cross-check runs it: offline, from a local ``file://`` channel.

    python -m feedstock.cross_checks.conda_build_offline build RECIPE -m CONFIG \\
        --override-channels -c file://CHANNEL ...

One change to conda-build 26.7.1, made here at start and nowhere else: ``conda_build.index``
builds its solver index with conda's ``Index(...)``, whose ``use_system`` defaults to False, so
the classic solver sees no virtual packages while its specs name them (``__unix``, ``__linux``,
``__glibc``, ``__archspec``, ``__conda``): every non-empty environment is "unsatisfiable". Here
that ``Index`` is built with ``use_system=True`` (the machine's virtual packages), as a
``conda create`` gets them. conda-forge's CI uses the libmamba solver, which pip cannot install.
"""

from __future__ import annotations

import sys
from typing import Any


def patch_index() -> None:
    import conda_build.index as cb_index

    original = cb_index.Index

    class SystemIndex(original):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["use_system"] = True
            super().__init__(*args, **kwargs)

    cb_index.Index = SystemIndex


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "build":
        sys.stderr.write("usage: conda_build_offline.py build RECIPE [conda-build options]\n")
        return 2
    patch_index()
    from conda_build.cli.main_build import execute

    execute(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
