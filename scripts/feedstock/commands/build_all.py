#!/usr/bin/env python3
"""Build every config (or those an alias / glob selects) in turn with build-locally.py.

    python -m feedstock build-all                      # every linux config, then zip the logs
    python -m feedstock build-all linux_64_cuda12.6    # an alias (see build-locally.py --help)
    python -m feedstock build-all --filter '*cuda*' --prune --keep-going
    python -m feedstock build-all --compiler-cache ~/.cache/pytorch-sccache   # cache outside the checkout
    python -m feedstock build-all --shard 2/3 --compiler-cache s3://team-sccache \
        --compiler-cache-endpoint https://ACCOUNT.r2.cloudflarestorage.com --aws-credentials ~/.aws/sccache

Resumable: a config counts as done only when build-locally.py has written its marker
(``build_artifacts/build-locally-done/<config>.json``, the very last step of a successful build);
done configs are skipped. Each config's output goes to ``build_artifacts/logs/<config>.log``
(the previous attempt's log is kept as ``<config>.log.prev``); a progress line shows
``[i/n] config | phase | elapsed``, the phase parsed from the log. At the end all logs are
zipped into ``build_artifacts/logs/build_logs.zip`` (post it with the CFEP-03 PR).

Every config shares one compiler cache (build-locally.py's default
``build_artifacts/compiler-cache``; ``--compiler-cache DIR``, ``--no-compiler-cache``, or a remote
store that several machines share: ``--compiler-cache s3://...`` or ``redis://...``, options as in
build-locally.py). ``--shard I/N`` builds the I-th of N shares of the selected configs, the same
split on every machine (balanced by expected build time, scripts/feedstock/shards.py); their
build_artifacts dirs merge into one CFEP-03 bundle (python -m feedstock cfep03-bundle). After the
run, the build reports of all configs (``build_artifacts/telemetry/<config>/``) are aggregated into
``build_artifacts/logs/build_times.{md,json,png}``: one table and one plot, zipped with the logs.

Standard library only, except matplotlib for the plot (skipped with a note without it).
"""

from __future__ import annotations

import argparse
import fnmatch
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

from feedstock import compiler_cache as cc
from feedstock.configs import ConfigError, list_configs, resolve_configs
from feedstock.errors import UsageError
from feedstock.paths import ARTIFACTS_DIR, REPO, done_marker
from feedstock.shards import expected_hours, parse_shard, shard_of
from feedstock.telemetry import (
    TelemetryError,
    load_build,
    overview_markdown,
    summarize,
    write_overview,
)

PROG = "feedstock build-all"

DOCKER_PLATFORMS = ("linux_",)

# (regex, phase) in priority order; the first match of a log line sets the phase.
_PHASES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^(Configure Docker|Start Docker|Configuring conda)\s*$"), r"\1"),
    (re.compile(r"^(Inspecting artifacts|Validating outputs|Uploading packages|Final checks)\s*$"), r"\1"),
    (re.compile(r"BUILD START: \[?'?([A-Za-z0-9_.-]+?)-\d"), r"build \1"),
    (re.compile(r"TEST START: (?:\S*/)?([A-Za-z0-9_.-]+?)-\d"), r"test \1"),
    (re.compile(r"^Packaging ([A-Za-z0-9_.-]+)\s*$"), r"package \1"),
    (re.compile(r"^-- Configuring done"), "cmake configured"),
    (re.compile(r"^\[(\d+)/(\d+)\] "), r"ninja \1/\2"),
    (re.compile(r"^Solving environment"), "solving"),
    (re.compile(r"^(Downloading and Extracting Packages|Preparing transaction)"), "fetching packages"),
]


def phase_of(line: str) -> str | None:
    """The build phase a log line announces, or None."""
    line = line.rstrip("\r\n")
    for pattern, template in _PHASES:
        match = pattern.search(line)
        if match:
            return match.expand(template)
    return None


def format_elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600:d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def select(root: Path, names: list[str], pattern: str | None) -> list[str]:
    configs = list_configs(root)
    chosen: dict[str, None] = {}
    if names:
        for name in names:
            for config in resolve_configs(name, configs):
                chosen.setdefault(config.name, None)
    else:
        for config in configs:
            if config.name.startswith(DOCKER_PLATFORMS):
                chosen.setdefault(config.name, None)
    result = [n for n in chosen if pattern is None or fnmatch.fnmatch(n, pattern)]
    return result


def select_shard(root: Path, names: list[str], index: int, count: int) -> list[str]:
    """The configs of shard ``index`` of ``count`` among ``names`` (printed with their expected hours)."""
    by_name = {c.name: c for c in list_configs(root)}
    mine = shard_of([by_name[n] for n in names], index, count)
    hours = sum(expected_hours(c) for c in mine)
    print(f"shard {index}/{count}: {len(mine)} of {len(names)} config(s), about {hours:.1f} h expected")
    return [c.name for c in mine]


class Progress:
    """One status line, rewritten in place on a terminal, printed on phase changes otherwise."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty()
        self.phase = "starting"
        self.start = time.monotonic()
        self.last_draw = 0.0

    def line(self) -> str:
        return f"{self.label} | {self.phase} | {format_elapsed(time.monotonic() - self.start)}"

    def update(self, phase: str | None) -> None:
        changed = phase is not None and phase != self.phase
        if changed:
            self.phase = phase  # type: ignore[assignment]
        now = time.monotonic()
        if self.tty and (changed or now - self.last_draw >= 1):
            self.stream.write("\r\x1b[2K" + self.line())
            self.stream.flush()
            self.last_draw = now
        elif not self.tty and changed and not self.phase.startswith("ninja"):
            self.stream.write(self.line() + "\n")
            self.stream.flush()

    def finish(self, result: str) -> None:
        self.phase = result
        self.stream.write(("\r\x1b[2K" if self.tty else "") + self.line() + "\n")
        self.stream.flush()


def run_config(cmd: list[str], log_path: Path, progress: Progress, cwd: Path) -> int:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        log_path.replace(log_path.with_name(log_path.name + ".prev"))
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            errors="replace",
            cwd=cwd,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            progress.update(phase_of(line))
        log.flush()
        return proc.wait()


def zip_logs(log_dir: Path, target: Path, names: Iterable[str], telemetry: Path) -> Path:
    """The configs' logs, the aggregate build times and each config's report (as <config>/...)."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in names:
            for suffix in (".log", ".log.prev"):
                path = log_dir / f"{name}{suffix}"
                if path.is_file():
                    zf.write(path, path.name)
            for report in ("report.md", "report.json", "timeline.png"):
                path = telemetry / name / report
                if path.is_file():
                    zf.write(path, f"{name}/{report}")
        for path in sorted(log_dir.glob("build_times.*")):
            zf.write(path, path.name)
    return target


def aggregate(telemetry: Path, names: Sequence[str], log_dir: Path) -> list[Path]:
    """build_times.{md,json,png} in ``log_dir`` from the telemetry of the configs that have it."""
    summaries: list[tuple[str, dict[str, Any]]] = []
    for name in names:
        try:
            summaries.append((name, summarize(load_build(telemetry / name))))
        except TelemetryError as exc:
            print(f"{PROG}: no build report for {name}: {exc}")
    if not summaries:
        return []
    log_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path, text in (
        (log_dir / "build_times.md", overview_markdown(summaries)),
        (log_dir / "build_times.json", json.dumps(dict(summaries), indent=1) + "\n"),
    ):
        path.with_name(path.name + ".tmp").write_text(text)
        path.with_name(path.name + ".tmp").replace(path)
        written.append(path)
    if importlib.util.find_spec("matplotlib") is None:
        print(f"{PROG}: no build_times.png (python -m pip install matplotlib)")
    else:
        written.append(write_overview(summaries, log_dir / "build_times.png"))
    return written


def prune(docker: str) -> None:
    print(f"$ {docker} system prune -f", flush=True)
    subprocess.run([docker, "system", "prune", "-f"], check=False)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog=PROG,
        usage="%(prog)s [CONFIG ...] [options]  (--help lists them)",
        description=__doc__.split("\n\n")[0],
    )
    p.add_argument("configs", nargs="*", help="config names or aliases (default: every linux config)")
    p.add_argument("--filter", help="glob on config names, applied after the aliases")
    p.add_argument("--prune", action="store_true", help="run `docker system prune -f` between configs")
    p.add_argument("--keep-going", action="store_true", help="continue with the next config after a failure")
    p.add_argument("--cpu-count", help="CPU_COUNT passed to build-locally.py")
    p.add_argument("--force", action="store_true", help="rebuild configs that are already done")
    p.add_argument(
        "--shard", metavar="I/N", help="build the I-th of N shares of the configs (one per machine)"
    )
    cc.add_arguments(p, "build_artifacts/compiler-cache")
    p.add_argument(
        "--build-locally",
        default=str(REPO / "build-locally.py"),
        help=argparse.SUPPRESS,  # tests point this at a copy
    )
    ns = p.parse_args(argv)
    root = Path(ns.build_locally).resolve().parent
    try:
        names = select(root, ns.configs, ns.filter)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    if not names:
        raise UsageError("no config selected")
    if ns.shard:
        names = select_shard(root, names, *parse_shard(ns.shard))
    cache_args = cc.args_from(ns)
    cc.resolve(cache_args, root / ARTIFACTS_DIR / "compiler-cache", root)  # a bad option fails here, once
    artifacts = root / ARTIFACTS_DIR
    log_dir = artifacts / "logs"
    telemetry = artifacts / "telemetry"
    docker = os.environ.get("DOCKER_EXECUTABLE", "docker")
    failed: list[str] = []
    started = time.monotonic()
    print(f"{len(names)} config(s); logs in {log_dir.relative_to(root)}/")
    for i, name in enumerate(names, 1):
        label = f"[{i}/{len(names)}] {name}"
        if done_marker(root, name).is_file() and not ns.force:
            print(f"{label} | done earlier, skipped")
            continue
        cmd = [sys.executable, str(ns.build_locally), name]
        if ns.cpu_count:
            cmd += ["--cpu-count", ns.cpu_count]
        cmd += cc.to_argv(cache_args)
        progress = Progress(sys.stdout, label)
        progress.update(None)
        rc = run_config(cmd, log_dir / f"{name}.log", progress, root)
        ok = rc == 0 and done_marker(root, name).is_file()
        progress.finish("ok" if ok else f"FAILED (exit {rc}, see {log_dir.name}/{name}.log)")
        if ns.prune and i < len(names):
            prune(docker)
        if not ok:
            failed.append(name)
            if rc == 2:
                print(f"{PROG}: build-locally.py refused to start (see the log); stopping", file=sys.stderr)
                break
            if not ns.keep_going:
                break
    times = aggregate(telemetry, [n for n in names if (telemetry / n).is_dir()], log_dir)
    archive = zip_logs(log_dir, log_dir / "build_logs.zip", names, telemetry) if log_dir.is_dir() else None
    done = sum(done_marker(root, n).is_file() for n in names)
    took = format_elapsed(time.monotonic() - started)
    print(f"{done}/{len(names)} config(s) done in total; this run took {took}")
    if times:
        print(f"build times: {', '.join(str(t.relative_to(root)) for t in times)}")
    if archive:
        print(f"logs: {archive.relative_to(root)}")
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
        return 1
    return 0 if done == len(names) else 1
