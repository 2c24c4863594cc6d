"""``megabuild cache ...``: inspect and edit ``build/CMakeCache.txt`` between builds.

Synopsis (by hand; the build's steps call the same functions in process)::

    python -m megabuild cache save CACHE [--force]
    python -m megabuild cache restore CACHE [--swap-python-from X.Y --to X.Y[.Z]] [--prefix DIR]
    python -m megabuild cache swap-python --from X.Y --to X.Y[.Z] [--prefix DIR] [--dry-run] CACHE
    python -m megabuild cache set [--create [--type TYPE]] [--dry-run] KEY=VALUE [KEY=VALUE ...] CACHE
    python -m megabuild cache show CACHE [KEY | --grep PATTERN | --python]
    python -m megabuild cache diff A B

Every edit is validated completely in memory and then written with one
atomic rename; on any error the file is left untouched.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from megabuild.cache import options, python_swap, store
from megabuild.cache.model import CacheFile
from megabuild.cache.restore import PythonSwap, restore
from megabuild.errors import MegabuildError


def _out(lines: list[str]) -> None:
    try:
        for line in lines:
            print(line)
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. `cache show ... | head`: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def _cmd_swap(args: argparse.Namespace) -> int:
    path = Path(args.cache)
    cache = store.read_cache(path)
    result = python_swap.swap_python(cache, args.from_version, args.to_version, prefix=args.prefix)
    _out(result.report_lines())
    verb = "would swap" if args.dry_run else "swapped"
    count = len(result.changes)
    print(f"swap-python: {verb} Python {result.old} -> {result.new} ({result.mode} mode, {count} entries)")
    if not args.dry_run:
        store.write_cache(path, cache)
    return 0


def _cmd_set(args: argparse.Namespace) -> int:
    path = Path(args.cache)
    cache = store.read_cache(path)
    result = options.set_options(cache, args.assignments, create=args.create, type_=args.type)
    lines = result.report_lines()
    _out(lines or ["set: nothing to change"])
    if lines and not args.dry_run:
        store.write_cache(path, cache)
    return 0


def _cmd_save(args: argparse.Namespace) -> int:
    _saved, message = store.save(Path(args.cache), force=args.force)
    print(message)
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    if (args.swap_from is None) != (args.to_version is None):
        raise MegabuildError("--swap-python-from and --to go together")
    swap = None if args.swap_from is None else PythonSwap(args.swap_from, args.to_version, args.prefix)
    _out(restore(Path(args.cache), swap))
    return 0


def _show_line(key: str, type_: str, value: str) -> str:
    return f"{key}:{type_}={value}"


def _cmd_show(args: argparse.Namespace) -> int:
    cache = store.read_cache(Path(args.cache))
    entries = cache.as_dict()
    if args.key is not None:
        entry = entries.get(args.key)
        if entry is None:
            raise MegabuildError(f"no cache entry {args.key}")
        print(entry.value if args.value_only else _show_line(entry.key, entry.type, entry.value))
        return 0
    pattern: re.Pattern[str] | None = None
    if args.grep is not None:
        try:
            pattern = re.compile(args.grep, re.IGNORECASE)
        except re.error as exc:
            raise MegabuildError(f"bad --grep pattern {args.grep!r}: {exc}") from None
    lines = []
    for entry in entries.values():
        if args.python and not python_swap.is_python_key(entry.key):
            continue
        line = _show_line(entry.key, entry.type, entry.value)
        if pattern is None or pattern.search(line):
            lines.append(line)
    _out(lines)
    return 0


def diff_caches(a: CacheFile, b: CacheFile) -> list[str]:
    """Entry-level differences: ``- KEY`` removed, ``+ KEY`` added, ``~ KEY`` changed."""
    da, db = a.as_dict(), b.as_dict()
    lines = []
    for key in sorted(da.keys() - db.keys()):
        lines.append(f"- {_show_line(key, da[key].type, da[key].value)}")
    for key in sorted(db.keys() - da.keys()):
        lines.append(f"+ {_show_line(key, db[key].type, db[key].value)}")
    for key in sorted(da.keys() & db.keys()):
        ea, eb = da[key], db[key]
        if (ea.type, ea.value) != (eb.type, eb.value):
            lines.append(f"~ {key}: {ea.type}={ea.value} -> {eb.type}={eb.value}")
    return lines


def _cmd_diff(args: argparse.Namespace) -> int:
    lines = diff_caches(store.read_cache(Path(args.a)), store.read_cache(Path(args.b)))
    _out(lines or ["no differences"])
    return 0


def register(groups: Any) -> None:
    cache = groups.add_parser("cache", help="inspect and edit build/CMakeCache.txt", description=__doc__)
    sub = cache.add_subparsers(dest="cache_command", metavar="<subcommand>", required=True)

    p = sub.add_parser("swap-python", help="rewrite the Python version recorded in the cache")
    p.add_argument("--from", dest="from_version", required=True, metavar="X.Y", help="version configured")
    p.add_argument("--to", dest="to_version", required=True, metavar="X.Y[.Z]", help="version to switch to")
    p.add_argument("--prefix", help="host prefix (default: from the cache's Python_EXECUTABLE)")
    p.add_argument("--dry-run", action="store_true", help="report, do not write")
    p.add_argument("cache", metavar="CACHE")
    p.set_defaults(handler=_cmd_swap)

    p = sub.add_parser("set", help="set existing BOOL/STRING entries (USE_MAGMA=ON clears MAGMA memos)")
    p.add_argument("--create", action="store_true", help="allow adding entries that do not exist")
    p.add_argument("--type", help="type of created entries (BOOL, STRING, PATH, FILEPATH)")
    p.add_argument("--dry-run", action="store_true", help="report, do not write")
    # KEY=VALUE first, the cache last: `cache set USE_MAGMA=ON build/CMakeCache.txt`
    p.add_argument("assignments", nargs="+", metavar="KEY=VALUE")
    p.add_argument("cache", metavar="CACHE")
    p.set_defaults(handler=_cmd_set)

    p = sub.add_parser("save", help="keep a pristine copy as CACHE.orig (the first save wins)")
    p.add_argument("--force", action="store_true", help="overwrite an existing CACHE.orig")
    p.add_argument("cache", metavar="CACHE")
    p.set_defaults(handler=_cmd_save)

    p = sub.add_parser(
        "restore", help="restore CACHE from CACHE.orig, optionally swapping Python in one step"
    )
    p.add_argument("--swap-python-from", dest="swap_from", metavar="X.Y")
    p.add_argument("--to", dest="to_version", metavar="X.Y[.Z]")
    p.add_argument("--prefix", help="host prefix (default: from the cache's Python_EXECUTABLE)")
    p.add_argument("cache", metavar="CACHE")
    p.set_defaults(handler=_cmd_restore)

    p = sub.add_parser("show", help="print entries as KEY:TYPE=VALUE")
    p.add_argument("cache", metavar="CACHE")
    what = p.add_mutually_exclusive_group()
    what.add_argument("key", nargs="?", metavar="KEY", help="print one entry")
    what.add_argument("--grep", metavar="PATTERN", help="entries whose line matches (regex, any case)")
    what.add_argument("--python", action="store_true", help="Python-related entries only")
    p.add_argument("--value-only", action="store_true", help="with KEY: print only the value")
    p.set_defaults(handler=_cmd_show)

    p = sub.add_parser("diff", help="entry-level differences between two caches")
    p.add_argument("a", metavar="A")
    p.add_argument("b", metavar="B")
    p.set_defaults(handler=_cmd_diff)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: python -m megabuild cache ...")
