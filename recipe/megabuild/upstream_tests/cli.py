"""``megabuild upstream-tests ...``: the upstream tests of the ``pytorch`` output's test section.

Synopsis (the recipe's test command; conda-build copies ``megabuild/`` and ``upstream_tests.json``
into the test dir, and the upstream ``test/`` tree with ``source_files``)::

    python -m megabuild upstream-tests run --target-platform linux-64 --cuda 13.0 --blas mkl \\
        --megabuild-python 3.12

``run`` takes the Python from the interpreter running it (``3.14t`` for a free-threaded one: the
recipe's selectors cannot tell 3.14t from 3.14), prints the pytest command and runs it with
this Python; a Python outside ``full_pythons`` prints one line and runs nothing (its smoke
checks are the section's other commands). ``show`` prints the command for a given ``--python``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.upstream_tests.selection import PackageTestEnv, load_selection, pytest_args

# next to the megabuild package: recipe/ in the feedstock, the test dir in conda-build's test phase
DEFAULT_DATA = Path(__file__).resolve().parents[2] / "upstream_tests.json"


def this_python() -> str:
    """``3.12``, or ``3.14t`` for a free-threaded build."""
    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    return f"{sys.version_info[0]}.{sys.version_info[1]}{'t' if free_threaded else ''}"


def _env(args: argparse.Namespace, python: str) -> PackageTestEnv:
    return PackageTestEnv(
        platform=args.target_platform,
        cuda=args.cuda,
        blas=args.blas,
        python=python,
        megabuild_python=args.megabuild_python,
    )


def _command(args: argparse.Namespace, python: str) -> tuple[list[str] | None, dict[str, str]]:
    selection = load_selection(args.data)
    env = _env(args, python)
    pytest = pytest_args(selection, env)
    if pytest is None:
        return None, {}
    return [sys.executable, "-m", "pytest", *pytest], dict(selection.environment)


def _cmd_show(args: argparse.Namespace) -> int:
    argv, environment = _command(args, args.python)
    if argv is None:
        print(f"Python {args.python}: smoke checks only, no upstream tests")
        return 0
    argv[0] = "python"
    print(" ".join(f"{k}={shlex.quote(v)}" for k, v in environment.items()), shlex.join(argv))
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    python = this_python()
    argv, environment = _command(args, python)
    if argv is None:
        print(f"upstream-tests: Python {python} gets the smoke checks only (not in full_pythons)")
        return 0
    missing = [a for a in argv if a.startswith("test/") and not Path(a).is_file()]
    if missing:
        raise MegabuildError(f"upstream test files missing in {Path.cwd()}: {missing} (source_files: test)")
    print(
        "upstream-tests:", " ".join(f"{k}={v}" for k, v in environment.items()), shlex.join(argv), flush=True
    )
    return subprocess.run(argv, env={**os.environ, **environment}, check=False).returncode


def register(groups: Any) -> None:
    group = groups.add_parser(
        "upstream-tests",
        help="the upstream tests of the pytorch output's test section",
        description=__doc__,
    )
    sub = group.add_subparsers(dest="upstream_tests_command", metavar="<subcommand>", required=True)
    run = sub.add_parser("run", help="run the upstream tests for this Python (prints the command first)")
    show = sub.add_parser("show", help="print the pytest command of one test env")
    show.add_argument("--python", required=True, help="3.12, 3.14t, ...")
    for parser, handler in ((run, _cmd_run), (show, _cmd_show)):
        parser.add_argument("--target-platform", required=True, help="conda subdir: linux-64, win-64, ...")
        parser.add_argument("--cuda", required=True, help="cuda_compiler_version (None for CPU)")
        parser.add_argument("--blas", required=True, help="blas_impl: mkl or generic")
        parser.add_argument("--megabuild-python", required=True, help="the top-level build's Python")
        parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="default: %(default)s")
        parser.set_defaults(handler=handler)
