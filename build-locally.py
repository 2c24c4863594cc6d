#!/bin/sh
"""exec" "python3" "$0" "$@" #"""  # fmt: off # fmt: on

#
# The line above this comment is a bash / sh / zsh guard
# to stop people from running it with the wrong interpreter
#
# Build the recipe locally in the conda-forge docker image, like CI does:
# `python build-locally.py [CONFIG] [options]` (--help lists the options; docs/local-builds.md).
#
# conda-smithy generates this file; the feedstock keeps its own thin version, out of
# `conda smithy rerender` by `skip_render: [build-locally.py]` in conda-forge.yml. The work is
# done by the feedstock's tools (`python -m pip install -e .`; the same command is
# `python -m feedstock build-locally`), which get this file's directory as the feedstock.
from __future__ import annotations

import os
import sys
from collections.abc import Sequence

PROG = "build-locally"
ROOT = os.path.dirname(os.path.abspath(__file__))


def main(argv: Sequence[str] | None = None) -> int:
    if sys.version_info < (3, 10):  # the tools' requires-python
        return error(
            f"the feedstock's tools need Python >= 3.10, {sys.executable} is {sys.version.split()[0]}"
        )
    try:
        from feedstock.commands import build_locally
        from feedstock.errors import run_main
    except ModuleNotFoundError as exc:
        if exc.name != "feedstock" and not (exc.name or "").startswith("feedstock."):
            raise
        return error(f"the feedstock's tools are not installed: run `python -m pip install -e .` in {ROOT}")
    args = sys.argv[1:] if argv is None else argv
    return run_main(PROG, lambda a: build_locally.main(a, root=ROOT, prog=PROG), args)


def error(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
