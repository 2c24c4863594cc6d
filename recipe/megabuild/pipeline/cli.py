"""``megabuild build ...``: every conda-build script is one call (the scripts set the environment only).

    python -m megabuild build top-level        # build.sh / bld.bat, PKG_NAME=libtorch-split
    python -m megabuild build libtorch-cuda-linalg   # install_linalg.sh (with_magma: the variant)
    python -m megabuild build libtorch         # install_libtorch.sh / .bat
    python -m megabuild build pytorch [--full-wheel]
    python -m megabuild build forwarded-env    # what EnvVarForwarding.cmake would put in the cache
    python -m megabuild build adopt [--build-dir build] [--source-dir .]   # run with the host Python

Everything else comes from conda-build's environment (``PKG_NAME``, ``PY_VER``, ``SRC_DIR``,
``PREFIX``, ``SP_DIR``, ``RECIPE_DIR``, ``target_platform``, ``cuda_compiler_version``,
``with_magma``, ``MAGMA_HOME``); a missing one is a one-line error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from megabuild.compiler_cache import session as compiler_cache
from megabuild.errors import MegabuildError
from megabuild.pipeline import forwarded_env, options, skbuild_state, steps
from megabuild.pipeline.description import Phase

COMPILING = (Phase.TOP_LEVEL, Phase.PYTORCH)


def _phase(args: argparse.Namespace) -> int:
    """One phase, in the script of the output it belongs to (``PKG_NAME`` says whose script runs)."""
    phase: Phase = args.phase
    opts = options.from_environment()
    if opts.pkg_name != phase.output:
        raise MegabuildError(f"this step builds {phase.output}, but PKG_NAME is {opts.pkg_name!r}")
    # the phases that compile run inside the build's compiler cache, when it has one
    cache = compiler_cache.session(os.environ, opts.work) if phase in COMPILING else nullcontext(False)
    with cache as cached:
        opts = dataclasses.replace(opts, compiler_cache=cached)
        steps.run(opts, os.environ, phase, full_wheel=getattr(args, "full_wheel", False))
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
    parser = groups.add_parser(
        "build", help="the recipe's build steps: one call per conda-build script", description=__doc__
    )
    commands = parser.add_subparsers(dest="command", metavar="<step>", required=True)
    sub = commands.add_parser("top-level", help="build libtorch once and stage every output's files")
    sub.set_defaults(handler=_phase, phase=Phase.TOP_LEVEL)
    for phase in (Phase.LINALG, Phase.LIBTORCH):
        sub = commands.add_parser(phase.output, help=f"install the staged {phase.output} into $PREFIX")
        sub.set_defaults(handler=_phase, phase=phase)
    sub = commands.add_parser(
        Phase.PYTORCH.output, help="rebuild the Python-dependent targets for this Python"
    )
    sub.add_argument(
        "--full-wheel",
        action="store_true",
        help="pack libtorch into the wheel too, as scikit-build-core does by default (benchmarks)",
    )
    sub.set_defaults(handler=_phase, phase=Phase.PYTORCH)
    sub = commands.add_parser("adopt", help="adopt build/ for this Python's scikit-build-core")
    sub.add_argument("--build-dir", type=Path, default=Path("build"))
    sub.add_argument("--source-dir", type=Path, default=Path("."))
    sub.set_defaults(handler=_adopt)
    sub = commands.add_parser("forwarded-env", help="print the variables EnvVarForwarding.cmake forwards")
    sub.set_defaults(handler=_forwarded_env)
