"""``megabuild env --shell sh|cmd``: the build environment as lines the build script applies;
``megabuild activation-scripts --prefix PREFIX``: the CUDA libtorch's activation scripts.

Synopsis (build.sh, bld.bat)::

    megabuild_env="$(python -m megabuild env --shell sh)"; eval "${megabuild_env}"
    "%PREFIX%\\python.exe" -m megabuild env --shell cmd > FILE  (then a FOR /F loop over FILE)

Reads the target (``target_platform``, ``build_platform``, ``cuda_compiler_version``,
``blas_impl``, ``CPU_COUNT``, ``CI``) and the locations (``PREFIX``, ``BUILD_PREFIX``, ``SRC_DIR``,
``PKG_VERSION``, ``CMAKE_ARGS``, ...) from the environment. An unknown platform, CUDA version or
BLAS is one error line and exit status 1, and nothing is printed on stdout.

``activation-scripts`` (install_libtorch.sh / .bat) reads the same target and writes
``etc/conda/{activate,deactivate}.d/libtorch_*`` into PREFIX for a CUDA target, nothing for a CPU
one (:mod:`megabuild.buildenv.activation`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from megabuild.buildenv.activation import install_activation_scripts
from megabuild.buildenv.environment import build_environment
from megabuild.buildenv.shell import SHELLS, render
from megabuild.buildenv.target import locations_from_environment, target_from_environment


def _env(args: argparse.Namespace) -> int:
    target = target_from_environment(os.environ)
    text = render(build_environment(target, locations_from_environment(os.environ, target)), args.shell)
    sys.stdout.write(text)  # all or nothing: rendered completely before the first byte is written
    return 0


def _activation_scripts(args: argparse.Namespace) -> int:
    target = target_from_environment(os.environ)
    for path in install_activation_scripts(target, Path(args.prefix)):
        print(f"activation-scripts: wrote {path}")
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "env", help="print the build environment for build.sh / bld.bat", description=__doc__
    )
    parser.add_argument("--shell", required=True, choices=SHELLS, help="sh: export K='V'; cmd: set \"K=V\"")
    parser.set_defaults(handler=_env)
    scripts = subparsers.add_parser(
        "activation-scripts", help="write the CUDA libtorch's activation scripts (CF_TORCH_CUDA_ARCH_LIST)"
    )
    scripts.add_argument("--prefix", required=True, help="the libtorch output's PREFIX")
    scripts.set_defaults(handler=_activation_scripts)
