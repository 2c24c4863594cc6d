#!/usr/bin/env python3
"""Time `conda smithy rerender` of this feedstock and of conda-forge's pytorch-cpu feedstock (figures).

Usage: python -m feedstock bench-rerender [--sources DIR] [--workdir DIR] [--ref NAME=REF] [--python PY]
                                        [--patch FILE] [--phases | --profile] [--only NAME ...]

The environment is the cross-checks' (``python -m feedstock cross-check``: conda,
conda-build and conda-smithy at their pinned refs, the pinned conda-forge-pinning checkout as
``--exclusive-config-file``); ``--sources`` and ``--ref`` mean what they mean there, and a
``--workdir`` that already holds that environment is reused. Then, one after the other, it
rerenders copies of

* ``conda-forge``: conda-forge's pytorch-cpu feedstock at the commit the cross-checks pin;
* ``this``: this feedstock's working tree (``--patch FILE``: with that diff applied);
* ``this+1py``: the same with one more Python in the megabuild's list (a migration adding
  ``3.15.* *_cp315``, the shape of the next PyTorch), so that the cost of a Python is known;
* ``conda-forge+1py``: conda-forge's with the same migration, the growth to compare with.

For each it prints the wall time, the CPU time (user + system; a busy machine stretches the wall
time, hardly the CPU time), the peak memory and the number of configs, then the ratio
``this / conda-forge`` and each feedstock's growth with one more Python, of both times, and
whether ``this`` rerendered to the committed ``.ci_support/`` byte for byte. ``--phases`` times
conda-build's and conda-smithy's phases inside each rerender (a few wrapped functions, little
overhead) and prints them; docs/testing.md explains them. ``--profile`` runs each rerender under
cProfile (about twice as slow), keeps ``logs/NAME.prof`` in the work dir and prints its top
functions.
No test runs this: a rerender takes minutes.
"""

from __future__ import annotations

import argparse
import collections
import functools
import importlib
import json
import os
import platform
import pstats
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from feedstock.cross_checks import run_cross_checks as rc
from feedstock.errors import FeedstockError, UsageError
from feedstock.paths import REPO

PROG = "feedstock bench-rerender"

PHASE_SHIM = "--phase-shim"  # internal: run conda-smithy in this process with the phase timers
IDENTITY = {"NAME": "t", "EMAIL": "t@example.invalid"}  # of the snapshot commits, as the tests'
COPY_IGNORE = (".git", "build_artifacts", "__pycache__", ".pytest_cache", ".ruff_cache")
CONDA_FORGE = "pytorch-cpu-feedstock"  # the cross-checks' source of conda-forge's feedstock
NAMES = ("conda-forge", "this", "this+1py", "conda-forge+1py")
EXTRA = "+1py"  # the suffix of a name rerendered with one more Python
EXTRA_PYTHON = "3.15.* *_cp315"
# one more Python, as conda-forge's pinning adds one: a key_add migration of the python zip
# (python, is_python_min, is_freethreading, is_abi3), kept by the rerender (use_local)
EXTRA_PYTHON_MIGRATION = f"""migrator_ts: 1790000000
__migrator:
    commit_message: Rebuild for python 3.15 (benchmark only)
    migration_number: 1
    operation: key_add
    primary_key: python
    use_local: true
    ordering:
        python:
            - 3.10.* *_cpython
            - 3.11.* *_cpython
            - 3.12.* *_cpython
            - 3.13.* *_cp313
            - 3.14.* *_cp314
            - 3.14.* *_cp314t
            - {EXTRA_PYTHON}
python:
- {EXTRA_PYTHON}
is_python_min:
- false
is_freethreading:
- false
is_abi3:
- false
"""


# -- the phase timers (run inside the environment's Python, by PHASE_SHIM) ---------------------


def _variant_tag(meta: Any) -> str:
    variant = meta.config.variant
    return f"is_rc={variant.get('is_rc')} with_magma={variant.get('with_magma', '-')}"


def _module(name: str) -> Any:
    return importlib.import_module(name)


def phase_shim(argv: Sequence[str]) -> int:
    """``conda-smithy <argv[1:]>`` with inclusive timers on its phases; writes them to ``argv[0]``."""
    # the environment's conda-build and conda-smithy (no type information)
    cb_config, cb_metadata, cb_render, cb_variants = (
        _module(f"conda_build.{name}") for name in ("config", "metadata", "render", "variants")
    )
    smithy_cli, smithy_configure, smithy_utils = (
        _module(f"conda_smithy.{name}") for name in ("cli", "configure_feedstock", "utils")
    )

    seconds: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter[str] = collections.Counter()
    stack: list[str] = []

    def timed(name: str, fn: Callable[..., Any], tag: Callable[..., str] | None = None) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = name if tag is None else f"{name} [{tag(*args, **kwargs)}]"
            if name in (k.split(" [")[0] for k in stack):  # recursion: counted once, outermost
                return fn(*args, **kwargs)
            stack.append(key)
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[key] += time.perf_counter() - start
                calls[key] += 1
                stack.pop()

        return wrapper

    def in_phase(meta: Any, *_: Any, **__: Any) -> str:
        where = "top level" if any(k.startswith("distribute_variants") for k in stack) else "outputs"
        return f"{where}, {_variant_tag(meta)}"

    def platform_of(_recipe: Any, *_: Any, **kwargs: Any) -> str:
        return f"{kwargs.get('platform')}-{kwargs.get('arch')}"

    def output_of(_meta: Any, output: dict[str, Any], *_: Any, **__: Any) -> str:
        return str(output.get("name"))

    smithy_configure._conda_build_api_render_for_smithy = timed(
        "conda-build render", smithy_configure._conda_build_api_render_for_smithy, platform_of
    )
    smithy_configure.dump_subspace_config_files = timed(
        "smithy: collapse variants, write configs", smithy_configure.dump_subspace_config_files
    )
    cb_render.distribute_variants = timed("distribute_variants", cb_render.distribute_variants)
    meta_cls = cb_metadata.MetaData
    for method, tag in (
        ("get_output_metadata_set", None),
        ("parse_until_resolved", in_phase),
        ("get_output_metadata", output_of),
        ("get_used_vars", None),
        ("_get_contents", None),
        ("skip", None),
        ("get_reduced_variant_set", None),
        ("copy", None),
    ):
        setattr(meta_cls, method, timed(f"MetaData.{method}", getattr(meta_cls, method), tag))
    cb_config.Config.copy_variants = timed("Config.copy_variants", cb_config.Config.copy_variants)
    original = cb_variants.list_of_dicts_to_dict_of_lists
    wrapped = timed("list_of_dicts_to_dict_of_lists", original)
    for name in list(sys.modules):  # conda-build's modules import it by name
        module: Any = sys.modules[name]
        if getattr(module, "list_of_dicts_to_dict_of_lists", None) is original:
            module.list_of_dicts_to_dict_of_lists = wrapped
    hashable = smithy_utils.HashableDict
    hashable.__hash__ = timed("smithy: HashableDict.__hash__", hashable.__hash__)

    sys.argv = ["conda-smithy", *argv[1:]]
    start = time.perf_counter()
    try:
        smithy_cli.main()
    finally:
        record = {"total": time.perf_counter() - start, "seconds": seconds, "calls": calls}
        Path(argv[0]).write_text(json.dumps(record, indent=1))
    return 0


# -- the benchmark --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    name: str
    wall: float
    cpu: float
    peak_gb: float
    configs: int
    phases: dict[str, Any] | None = None


def git(repo: Path, *args: str) -> None:
    who = {f"GIT_{role}_{key}": value for role in ("AUTHOR", "COMMITTER") for key, value in IDENTITY.items()}
    proc = subprocess.run(
        ["git", "-C", str(repo), *args],
        env={**os.environ, **who},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise FeedstockError(f"git {' '.join(args)} in {repo} failed: {proc.stderr.strip()}")


def snapshot(source: Path, dest: Path, patch: Path | None = None, extra_python: bool = False) -> Path:
    """A committed copy of a feedstock, as the rerender cross-check makes one."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*COPY_IGNORE), symlinks=True)
    git(dest, "init", "-q")
    if patch is not None:
        git(dest, "apply", str(patch.resolve()))
    if extra_python:
        migrations = dest / ".ci_support" / "migrations"
        migrations.mkdir(parents=True, exist_ok=True)
        (migrations / "python315_benchmark.yaml").write_text(EXTRA_PYTHON_MIGRATION)
    git(dest, "add", "-A", "-f", ".")
    git(dest, "commit", "-qm", "snapshot")
    return dest


def rerender(name: str, command: list[str], feedstock: Path, env: dict[str, str], logs: Path) -> Result:
    log = logs / f"{name}.log"
    print(f"rerender.py: {name}: {shlex.join([*command, str(feedstock)])}", flush=True)
    start = time.monotonic()
    with log.open("w") as out:
        proc = subprocess.Popen([*command, str(feedstock)], env=env, stdout=out, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-1500:]
        raise FeedstockError(f"the rerender of {name} failed (exit {proc.returncode}); {log}: {tail}")
    configs = len(list((feedstock / ".ci_support").glob("*.yaml")))
    return Result(name, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 2**20, configs)


def same_ci_support(ours: Path, theirs: Path) -> str:
    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}

    a, b = files(ours / ".ci_support"), files(theirs / ".ci_support")
    differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return (
        "byte for byte the committed one" if not differ else f"DIFFERS in {len(differ)} files: {differ[:3]}"
    )


def environment(ns: argparse.Namespace, work: Path) -> tuple[Path, Path, dict[str, str]]:
    """The cross-checks' environment (built, or reused from the workdir), its sources and env."""
    sources = rc.with_refs(ns.ref)
    src, venv = work / "src", work / "venv"
    if not (venv / "bin" / "conda-smithy").exists():
        rc.gather_sources(sources, ns.sources, src)
        print(f"rerender.py: installing the cross-checks' environment into {venv}", flush=True)
        rc.install(ns.python, venv, src, sources)
        rc.add_stand_ins(venv)
    _with_this_checkout(venv)
    full = work / "conda-forge-feedstock"
    if not (full / CONDA_FORGE / "conda-forge.yml").exists():  # all of it, not only recipe/
        shutil.rmtree(full, ignore_errors=True)
        whole = [replace(s, paths=()) for s in sources if s.name == CONDA_FORGE]
        rc.gather_sources(whole, ns.sources, full)
    shutil.rmtree(work / "pinning", ignore_errors=True)
    return venv, full / CONDA_FORGE, rc.tool_env(venv, work, src)


def _with_this_checkout(venv: Path) -> None:
    """``--phases`` runs ``python -m feedstock`` in the environment: a reused one made from another
    checkout (or before the tools were a package) gets this one, editable."""
    python = str(rc.venv_python(venv))
    ours = str(REPO / "scripts" / "feedstock" / "__init__.py")
    probe = f"import feedstock, sys; sys.exit(feedstock.__file__ != {ours!r})"
    if subprocess.run([python, "-c", probe], capture_output=True, check=False).returncode != 0:
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps"]
        rc.run([*pip, "-e", str(REPO)], what="pip install -e (this checkout)")


def run(ns: argparse.Namespace, work: Path) -> list[Result]:
    venv, conda_forge, env = environment(ns, work)
    command = shlex.split(env["CONDA_SMITHY_RERENDER"])
    copies, logs = work / "copies", work / "logs"
    shutil.rmtree(copies, ignore_errors=True)
    copies.mkdir()
    logs.mkdir(exist_ok=True)
    results = []
    for name in ns.only or NAMES:
        dest = copies / name.replace("+", "-")
        extra_python = name.endswith(EXTRA)
        if name.startswith("conda-forge"):
            snapshot(conda_forge, dest, extra_python=extra_python)
        else:
            snapshot(REPO, dest, ns.patch, extra_python=extra_python)
        timed = command
        python = str(venv / "bin" / "python")
        if ns.phases:
            timed = [
                python,
                "-m",
                "feedstock",
                "bench-rerender",
                PHASE_SHIM,
                str(logs / f"{name}.phases.json"),
                *command[1:],
            ]
        elif ns.profile:
            timed = [python, "-m", "cProfile", "-o", str(logs / f"{name}.prof"), *command]
        result = rerender(name, timed, dest, env, logs)
        if ns.phases:
            result = replace(result, phases=json.loads((logs / f"{name}.phases.json").read_text()))
        elif ns.profile:
            print_profile(name, logs / f"{name}.prof")
        results.append(result)
        print(f"rerender.py: {name}: {result.wall:.0f} s wall, {result.cpu:.0f} s CPU", flush=True)
        if name == "this":
            print(f"rerender.py: this: .ci_support/ is {same_ci_support(dest, REPO)}", flush=True)
    return results


def print_profile(name: str, path: Path, top: int = 30) -> None:
    stats = pstats.Stats(str(path))
    print(f"rerender.py: {name}: cProfile in {path}; the top {top} by cumulative time:")
    stats.sort_stats("cumulative").print_stats(top)


def report(results: Sequence[Result]) -> None:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    print(f"\n{time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB")
    print(f"{'':16} {'wall s':>8} {'CPU s':>8} {'peak GiB':>9} {'configs':>8}")
    for r in results:
        print(f"{r.name:16} {r.wall:8.0f} {r.cpu:8.0f} {r.peak_gb:9.2f} {r.configs:8d}")
    by = {r.name: r for r in results}
    for label, a, b in (
        ("ratio this / conda-forge", "this", "conda-forge"),
        ("growth this+1py / this", "this+1py", "this"),
        ("growth conda-forge+1py / conda-forge", "conda-forge+1py", "conda-forge"),
    ):
        if a in by and b in by:
            print(f"{label}: wall {by[a].wall / by[b].wall:.2f}, CPU {by[a].cpu / by[b].cpu:.2f}")
    for r in results:
        if r.phases:
            total = r.phases["total"]
            print(f"\nphases of {r.name}, {total:.0f} s (inclusive seconds: nested phases overlap):")
            for key, value in sorted(r.phases["seconds"].items(), key=lambda kv: -kv[1]):
                print(f"{value:9.1f} {r.phases['calls'][key]:8d}  {key}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == [PHASE_SHIM]:
        return phase_shim(args[1:])
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sources",
        type=Path,
        default=os.environ.get("FEEDSTOCK_CROSS_CHECK_SOURCES") or None,
        help="local repositories of the tools (as run_cross_checks.py --sources)",
    )
    parser.add_argument(
        "--ref", action="append", default=[], metavar="NAME=REF", help="another ref of a source"
    )
    parser.add_argument("--python", default=sys.executable, help="the environment's interpreter (3.11+)")
    parser.add_argument(
        "--workdir", type=Path, help="build the environment here and keep it (reused when there)"
    )
    parser.add_argument("--patch", type=Path, help="a diff applied to this feedstock's copies (git apply)")
    how = parser.add_mutually_exclusive_group()
    how.add_argument("--phases", action="store_true", help="time conda-build's and conda-smithy's phases")
    how.add_argument("--profile", action="store_true", help="run each rerender under cProfile")
    parser.add_argument("--only", action="append", choices=NAMES, help="rerender only these (repeatable)")
    ns = parser.parse_args(args)
    if ns.patch is not None and not ns.patch.is_file():
        raise UsageError(f"--patch {ns.patch}: no such file")
    if ns.sources is not None and not ns.sources.is_dir():
        raise UsageError(f"--sources {ns.sources} is not a directory")
    if ns.workdir is not None:
        ns.workdir.mkdir(parents=True, exist_ok=True)
        report(run(ns, ns.workdir.resolve()))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-rerender-") as tmp:
            report(run(ns, Path(tmp)))
    return 0
