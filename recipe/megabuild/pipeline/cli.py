"""``megabuild build ...``: the pipeline's steps (``recipe/build.sh`` sets the environment only).

    python -m megabuild build top-level        # PKG_NAME=libtorch-split
    python -m megabuild build pytorch [--full-wheel]
    python -m megabuild build forwarded-env    # what EnvVarForwarding.cmake would put in the cache
    python -m megabuild build adopt [--build-dir build] [--source-dir .]   # run with the host Python

Everything else comes from conda-build's environment (``PKG_NAME``, ``PY_VER``, ``SRC_DIR``,
``PREFIX``, ``SP_DIR``, ``RECIPE_DIR``, ``target_platform``, ``cuda_compiler_version``,
``megabuild``, ``MAGMA_HOME``); a missing one is a one-line error.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.pipeline import forwarded_env, options, skbuild_state, steps
from megabuild.pipeline.description import Phase


def _expect(opts: options.BuildOptions, pkg_name: str) -> None:
    if opts.pkg_name != pkg_name:
        raise MegabuildError(f"this step builds {pkg_name}, but PKG_NAME is {opts.pkg_name!r}")


def _top_level(_args: argparse.Namespace) -> int:
    opts = options.from_environment()
    _expect(opts, options.TOP_LEVEL)
    steps.run(opts, os.environ, Phase.TOP_LEVEL)
    return 0


def _pytorch(args: argparse.Namespace) -> int:
    opts = options.from_environment()
    _expect(opts, options.PYTORCH)
    steps.run(opts, os.environ, Phase.PYTORCH, full_wheel=args.full_wheel)
    return 0


def _forwarded_env(_args: argparse.Namespace) -> int:
    print(json.dumps(forwarded_env.forwarded(os.environ), indent=1))
    return 0


def _adopt(args: argparse.Namespace) -> int:
    adoption = skbuild_state.adopt(args.build_dir, args.source_dir, skbuild_state.installed_backend())
    print(adoption.line())
    skbuild_state.mark(args.build_dir)
    return 0


def register(groups: Any) -> None:
    parser = groups.add_parser("build", help="the recipe's build steps (top level, pytorch outputs)",
                               description=__doc__)  # fmt: skip
    commands = parser.add_subparsers(dest="command", metavar="<step>", required=True)
    sub = commands.add_parser("top-level", help="build libtorch once and stage every output's files")
    sub.set_defaults(handler=_top_level)
    sub = commands.add_parser("pytorch", help="rebuild the Python-dependent targets for this Python")
    sub.add_argument(
        "--full-wheel",
        action="store_true",
        help="pack libtorch into the wheel too, as scikit-build-core does by default (benchmarks)",
    )
    sub.set_defaults(handler=_pytorch)
    sub = commands.add_parser("adopt", help="adopt build/ for this Python's scikit-build-core")
    sub.add_argument("--build-dir", type=Path, default=Path("build"))
    sub.add_argument("--source-dir", type=Path, default=Path("."))
    sub.set_defaults(handler=_adopt)
    sub = commands.add_parser("forwarded-env", help="print the variables EnvVarForwarding.cmake forwards")
    sub.set_defaults(handler=_forwarded_env)
