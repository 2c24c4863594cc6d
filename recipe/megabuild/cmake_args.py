"""``megabuild cmake-args ...``: edit the ``$CMAKE_ARGS`` conda-forge's compiler activation exports.

Synopsis (by hand; in a build, ``megabuild env`` makes the same edit in process)::

    CMAKE_ARGS="$(python -m megabuild cmake-args add-find-root "$SRC_DIR")"

``add-find-root DIR`` prints ``$CMAKE_ARGS`` (or ``--value``) with ``;DIR`` appended to every
``-DCMAKE_FIND_ROOT_PATH=...`` in it and every other character unchanged; a value without such an
entry (macOS: clang's activation sets none) comes back as it was. A note on stderr says how many
entries changed.

Why: on Linux the gcc activation exports ``-DCMAKE_FIND_ROOT_PATH=$PREFIX;$BUILD_PREFIX/<triplet>/sysroot``
with ``-DCMAKE_FIND_ROOT_PATH_MODE_{INCLUDE,LIBRARY}=ONLY``, and cuda-nvcc's activation appends a
second ``-DCMAKE_FIND_ROOT_PATH=`` (CMake keeps the last). scikit-build-core (PyTorch 2.14's
backend) passes ``$CMAKE_ARGS`` to cmake, so every ``find_path``/``find_library`` into the source tree
(FindMKLDNN's ``third_party/ideep``) is re-rooted under ``$PREFIX`` and finds nothing: USE_MKLDNN
silently turns off. A path that already lies under a root is not re-rooted, hence ``$SRC_DIR``
as an extra root in each entry.

Tokens are split on whitespace: conda recipes expand ``$CMAKE_ARGS`` unquoted (no quote removal),
scikit-build-core splits it like a shell (``shlex.split``). The output is read the same both
ways as long as it holds no quotes, so none are added: re-joining with ``shlex.join`` would quote
every token containing ``;`` and the quotes would reach cmake literally through an unquoted
expansion. A root containing whitespace or ``;`` cannot be
expressed in such a value and is an error, as is a quoted find-root token (its meaning to the
consumers is ambiguous).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from megabuild.errors import MegabuildError

VARIABLE = "CMAKE_FIND_ROOT_PATH"
# -DCMAKE_FIND_ROOT_PATH=... or the typed form -DCMAKE_FIND_ROOT_PATH:PATH=...; the _MODE_*
# variables have another name and never match.
_JOINED = re.compile(rf"^(-D{VARIABLE}(?::[A-Za-z]+)?=)(.*)$", re.DOTALL)
# cmake also accepts "-D" and the assignment as two arguments
_SEPARATE = re.compile(rf"^({VARIABLE}(?::[A-Za-z]+)?=)(.*)$", re.DOTALL)
_QUOTES = ("'", '"', "\\")
_ANYWHERE = re.compile(rf"{VARIABLE}(?::[A-Za-z]+)?=")


def _check_root(root: str) -> None:
    if not root:
        raise MegabuildError("add-find-root: the directory is empty")
    if any(ch.isspace() for ch in root):
        raise MegabuildError(
            f"add-find-root: {root!r} contains whitespace; CMAKE_ARGS is split on whitespace"
        )
    if ";" in root:
        raise MegabuildError(f"add-find-root: {root!r} contains ';', which separates CMake list entries")
    if not os.path.isabs(root):
        raise MegabuildError(f"add-find-root: {root!r} is not an absolute path")


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path


def add_find_root(cmake_args: str, root: str) -> tuple[str, int]:
    """``cmake_args`` with ``root`` appended to each find-root entry; (new value, entries seen).

    Entries that already list ``root`` are kept as they are (still counted), so running the
    edit twice changes nothing.
    """
    _check_root(root)
    # even indices: tokens (possibly empty at the ends); odd indices: the whitespace between them
    parts = re.split(r"(\s+)", cmake_args)
    seen = 0
    previous = ""
    for index in range(0, len(parts), 2):
        token = parts[index]
        if not token:
            continue
        match = _JOINED.match(token) or (_SEPARATE.match(token) if previous == "-D" else None)
        previous = token
        quoted = any(q in token for q in _QUOTES)
        if quoted and (match is not None or _ANYWHERE.search(token)):
            raise MegabuildError(f"add-find-root: quoted or escaped {VARIABLE} entry {token!r}; not edited")
        if match is None:
            continue
        name, value = match.group(1), match.group(2)
        seen += 1
        if _norm(root) in {_norm(entry) for entry in value.split(";")}:
            continue
        parts[index] = f"{name}{value};{root}" if value else f"{name}{root}"
    return "".join(parts), seen


def _cmd_add_find_root(args: argparse.Namespace) -> int:
    value = args.value if args.value is not None else os.environ.get("CMAKE_ARGS", "")
    new, seen = add_find_root(value, args.root)
    if seen:
        note = f"{args.root} is a find root in {seen} -D{VARIABLE} entr{'y' if seen == 1 else 'ies'}"
    else:
        note = f"no -D{VARIABLE} in CMAKE_ARGS; unchanged"
    print(f"megabuild cmake-args: {note}", file=sys.stderr)
    sys.stdout.write(new + "\n")
    sys.stdout.flush()
    return 0


def register(groups: Any) -> None:
    group = groups.add_parser(
        "cmake-args",
        help="edit the CMAKE_ARGS of conda-forge's compiler activation",
        description=__doc__.split("\n\nWhy:")[0],
    )
    sub = group.add_subparsers(dest="cmake_args_command", metavar="<subcommand>", required=True)
    p = sub.add_parser(
        "add-find-root",
        help=f"print CMAKE_ARGS with DIR appended to every -D{VARIABLE}= entry",
        description=f"Print $CMAKE_ARGS (or --value) with ';DIR' appended to every -D{VARIABLE}= entry; "
        "everything else is printed unchanged.",
    )
    p.add_argument("root", metavar="DIR", help="absolute directory to add (build.sh: $SRC_DIR)")
    p.add_argument(
        "--value", default=None, help="edit this string instead of $CMAKE_ARGS (write --value=STRING)"
    )
    p.set_defaults(handler=_cmd_add_find_root)
