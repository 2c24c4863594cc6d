"""Build telemetry: where a build's time went, from Ninja's own log and the compiler cache's counters.

``recipe/build.sh`` records every build pass (top level ``libtorch``, ``magma``, one
``python3.X`` per pytorch output) in a telemetry dir (``$FEEDSTOCK_BUILD_TELEMETRY``, else
``$SRC_DIR/_megabuild/telemetry``): a line in ``passes.jsonl`` (name, wall-clock start/end),
a copy of ``build/.ninja_log`` taken after the pass, and sccache's statistics of that pass
(``--zero-stats`` before it) when the compiler cache was on.

A pass's edges are the ``.ninja_log`` entries of its copy that no earlier pass's copy had
(Ninja keeps one line per output, and may recompact the file; ``megabuild build-state restore``
puts earlier entries back, which is not a run). Ninja records an edge's start and
end in milliseconds since its own start; a pass's ninja run starts after CMake's configure, so the
timeline places edges relative to the pass start. "Edge seconds" (the sum of edge durations) is the
CPU time of the pass as far as the compiles are single-threaded, which compiles and links are.

Any finished Ninja build dir works too (no ``passes.jsonl``: one pass, no cache statistics).

Standard library only; the PNG needs matplotlib (``write_timeline``, ``write_overview``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# megabuild (recipe/, standard library only) holds how an output names its target, for the
# build's own rebuild check and this report alike
from megabuild.ninja_tool import edge_kind, edge_target

from feedstock.errors import FeedstockError

PASSES_FILE = "passes.jsonl"
# Where build.sh's telemetry lies under the dirs a user may point at.
TELEMETRY_SUBDIRS = (".", "_megabuild/telemetry", "work/_megabuild/telemetry")
SLOWEST = 20

# CMake names a CUDA source's object <file>.cu.o: nvcc compiles, counted apart from C++ ones
_CUDA_COMPILE_SUFFIXES = (".cu.o", ".cu.obj")


class TelemetryError(FeedstockError):
    """A build dir without usable telemetry, or a malformed record."""


@dataclass(frozen=True)
class Edge:
    """One Ninja edge of a pass: its first output and when it ran (seconds since ninja's start)."""

    output: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def kind(self) -> str:
        return edge_kind(self.output)

    @property
    def target(self) -> str:
        return edge_target(self.output)


@dataclass(frozen=True)
class CacheStats:
    """sccache's counters of one pass (compile requests it looked up)."""

    hits: int
    misses: int
    not_cached: int  # requests sccache passed through to the compiler (links, unsupported flags)
    backend: str = ""  # sccache's "cache location": "s3, name: ..., prefix: ...", "Local disk: ..."
    compilations: int = 0  # compiler runs (the misses, and what was not cacheable)
    compile_seconds: float = 0.0  # their total time
    read_hit_seconds: float = 0.0  # time spent fetching the hits
    write_errors: int = 0  # objects that could not be stored (read-only mode or credentials)
    # sccache's own split of the hits by language ("C/C++", "CUDA", "PTX", "CUBIN", ...)
    hits_by_language: Mapping[str, int] = field(default_factory=dict)

    @property
    def lookups(self) -> int:
        return self.hits + self.misses

    @property
    def hit_rate(self) -> float | None:
        return self.hits / self.lookups if self.lookups else None


@dataclass
class Pass:
    name: str
    start: float | None  # wall clock (epoch seconds); None for a bare ninja dir
    end: float | None
    edges: list[Edge] = field(default_factory=list)
    cache: CacheStats | None = None
    # the rebuild check before a per-Python pass: edges it found outside the Python-dependent
    # targets (None: not a per-Python pass, or the check could not tell)
    unexpected_edges: int | None = None

    @property
    def wall(self) -> float:
        if self.start is not None and self.end is not None:
            return self.end - self.start
        return max((e.end for e in self.edges), default=0.0)

    @property
    def edge_seconds(self) -> float:
        return sum(e.seconds for e in self.edges)

    @property
    def compiles(self) -> int:
        return sum(e.kind == "compile" for e in self.edges)

    @property
    def cuda_compiles(self) -> int:
        """The compiles of CUDA sources (nvcc), part of :attr:`compiles`."""
        return sum(e.output.endswith(_CUDA_COMPILE_SUFFIXES) for e in self.edges)


@dataclass
class Build:
    source: Path
    passes: list[Pass]

    @property
    def start(self) -> float | None:
        starts = [p.start for p in self.passes if p.start is not None]
        return min(starts) if starts else None


# ------------------------------------------------------------------------------------------ reading

NinjaLog = dict[str, tuple[int, int, str, str]]  # output -> (start ms, end ms, mtime, hash)


def parse_ninja_log(text: str, source: str = ".ninja_log") -> NinjaLog:
    """``.ninja_log`` (v5-v7: ``start end mtime output hash``, tab-separated) as output -> latest entry."""
    entries: NinjaLog = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 5:
            raise TelemetryError(f"{source}:{number}: not a .ninja_log line: {line[:80]!r}")
        start, end, mtime, output, cmd_hash = parts
        try:
            entries[output] = (int(start), int(end), mtime, cmd_hash)
        except ValueError:
            raise TelemetryError(f"{source}:{number}: start/end are not integers: {line[:80]!r}") from None
    return entries


def edges_between(seen: Mapping[str, Collection[tuple[int, int, str, str]]], after: NinjaLog) -> list[Edge]:
    """The edges that ran before the snapshot ``after`` of a build dir's ``.ninja_log`` and after
    the snapshots whose entries ``seen`` holds (output -> its entries), by start time.

    Ninja logs every output of an edge on its own line with the edge's start, end and command
    hash: outputs that share them are one edge (PyTorch's code generation writes hundreds of
    files in one step), named by its first output."""
    grouped: dict[tuple[int, int, str], list[str]] = {}
    for out, entry in after.items():
        if entry not in seen.get(out, ()):
            grouped.setdefault((entry[0], entry[1], entry[3]), []).append(out)
    edges = [Edge(_edge_name(outs), start / 1000, end / 1000) for (start, end, _), outs in grouped.items()]
    return sorted(edges, key=lambda e: (e.start, e.output))


def _edge_name(outputs: list[str]) -> str:
    relative = sorted(o for o in outputs if not o.startswith("/"))
    return (relative or sorted(outputs))[0]


def _seconds(duration: Any) -> float:
    """sccache's ``{"secs": S, "nanos": N}``."""
    if not isinstance(duration, Mapping):
        return 0.0
    return int(duration.get("secs", 0)) + int(duration.get("nanos", 0)) / 1e9


def _backend(data: Mapping[str, Any]) -> str:
    """sccache's cache location; for a multi-level chain each level's, first level first."""
    levels = data["stats"].get("multi_level")
    if isinstance(levels, list) and levels:
        return " then ".join(str(level.get("location", "?")) for level in levels)
    return str(data.get("cache_location") or "")


def cache_stats(data: Mapping[str, Any]) -> CacheStats:
    """sccache's ``--show-stats --stats-format=json``."""
    try:
        stats = data["stats"]
        hits = sum(int(n) for n in stats["cache_hits"]["counts"].values())
        misses = sum(int(n) for n in stats["cache_misses"]["counts"].values())
        not_cached = int(stats.get("requests_not_compile", 0)) + int(stats.get("requests_not_cacheable", 0))
        return CacheStats(
            hits, misses, not_cached, backend=_backend(data),
            compilations=int(stats.get("compilations", 0)),
            compile_seconds=_seconds(stats.get("compiler_write_duration")),
            read_hit_seconds=_seconds(stats.get("cache_read_hit_duration")),
            write_errors=int(stats.get("cache_write_errors", 0)),
            hits_by_language={str(k): int(n) for k, n in stats["cache_hits"]["counts"].items()},
        )  # fmt: skip
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise TelemetryError(f"not sccache's JSON statistics (missing {exc})") from None


def mean_compile_seconds(stats: Iterable[CacheStats]) -> float | None:
    """Seconds one compile took where sccache ran the compiler; None if it ran none."""
    runs = [s for s in stats if s.compilations]
    total = sum(s.compilations for s in runs)
    return sum(s.compile_seconds for s in runs) / total if total else None


def saved_seconds(stats: CacheStats, mean_compile: float | None) -> float | None:
    """Compile time the hits saved: each hit at the mean compile time, less the time fetching them.

    An estimate: a hit's own compile was never timed here. ``mean_compile`` is this pass's, else
    the build's (a pass that hit everything ran no compiler); None when no compile ran at all."""
    if mean_compile is None:
        return None if stats.hits else 0.0
    return max(stats.hits * mean_compile - stats.read_hit_seconds, 0.0)


def find_telemetry(build_dir: Path) -> Path | None:
    for sub in TELEMETRY_SUBDIRS:
        candidate = build_dir / sub
        if (candidate / PASSES_FILE).is_file():
            return candidate.resolve()
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise TelemetryError(f"cannot read {path}: {exc}") from None


def load_build(build_dir: Path | str) -> Build:
    """The passes of a build: from build.sh's telemetry if there is any, else from a ``.ninja_log``."""
    build_dir = Path(build_dir)
    if not build_dir.is_dir():
        raise TelemetryError(f"{build_dir}: no such directory")
    telemetry = find_telemetry(build_dir)
    if telemetry is not None:
        return _load_passes(telemetry)
    for log in (build_dir / ".ninja_log", build_dir / "build" / ".ninja_log"):
        if log.is_file():
            edges = edges_between({}, parse_ninja_log(log.read_text(errors="replace"), str(log)))
            return Build(build_dir.resolve(), [Pass("ninja", None, None, edges)])
    raise TelemetryError(
        f"{build_dir}: neither build telemetry ({PASSES_FILE}) nor a .ninja_log "
        "(give a build dir, a conda-build work dir or a telemetry dir)"
    )


def _load_passes(telemetry: Path) -> Build:
    passes: list[Pass] = []
    seen: dict[str, set[tuple[int, int, str, str]]] = {}
    lines = (telemetry / PASSES_FILE).read_text().splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            name, start, end = str(record["pass"]), float(record["start"]), float(record["end"])
        except (ValueError, KeyError, TypeError):
            raise TelemetryError(f"{telemetry / PASSES_FILE}:{number}: not a pass record") from None
        edges: list[Edge] = []
        if record.get("ninja_log"):
            log = telemetry / str(record["ninja_log"])
            current = parse_ninja_log(log.read_text(errors="replace"), str(log)) if log.is_file() else {}
            edges = edges_between(seen, current)
            for out, entry in current.items():
                seen.setdefault(out, set()).add(entry)
        cache = None
        if record.get("cache"):
            cache = cache_stats(_read_json(telemetry / str(record["cache"])))
        unexpected = record.get("unexpected_edges")
        unexpected = unexpected if isinstance(unexpected, int) and not isinstance(unexpected, bool) else None
        passes.append(Pass(name, start, end, edges, cache, unexpected))
    if not passes:
        raise TelemetryError(f"{telemetry / PASSES_FILE}: no passes recorded")
    return Build(telemetry, passes)


# ------------------------------------------------------------------------------------------ summary


def target_table(edges: Iterable[Edge]) -> list[dict[str, Any]]:
    """Per target: edges, compiles, edge seconds and the span it was busy; slowest first."""
    rows: dict[str, dict[str, Any]] = {}
    for e in edges:
        row = rows.setdefault(
            e.target,
            {"target": e.target, "edges": 0, "compiles": 0, "seconds": 0.0, "first": e.start, "last": e.end},
        )
        row["edges"] += 1
        row["compiles"] += e.kind == "compile"
        row["seconds"] += e.seconds
        row["first"] = min(row["first"], e.start)
        row["last"] = max(row["last"], e.end)
    return sorted(rows.values(), key=lambda r: (-r["seconds"], r["target"]))


def _cache_summary(stats: CacheStats, build_mean: float | None) -> dict[str, Any]:
    mean = mean_compile_seconds([stats])
    saved = saved_seconds(stats, mean if mean is not None else build_mean)
    return {
        "hits": stats.hits,
        "misses": stats.misses,
        "not_cached": stats.not_cached,
        "hit_rate": stats.hit_rate,
        "backend": stats.backend,
        "write_errors": stats.write_errors,
        "saved_seconds": None if saved is None else round(saved, 3),
        "hits_by_language": dict(stats.hits_by_language),
    }


def summarize(build: Build, slowest: int = SLOWEST) -> dict[str, Any]:
    """The report as plain data (written as report.json; rendered by ``render_markdown``)."""
    build_mean = mean_compile_seconds(p.cache for p in build.passes if p.cache)
    passes = []
    for p in build.passes:
        passes.append(
            {
                "pass": p.name,
                "wall_seconds": round(p.wall, 3),
                "edge_seconds": round(p.edge_seconds, 3),
                "edges": len(p.edges),
                "compiles": p.compiles,
                "cuda_compiles": p.cuda_compiles,
                "unexpected_edges": p.unexpected_edges,
                "cache": None if p.cache is None else _cache_summary(p.cache, build_mean),
                "targets": [
                    {k: (round(v, 3) if isinstance(v, float) else v) for k, v in row.items()}
                    for row in target_table(p.edges)
                ],
            }
        )
    every = [(p.name, e) for p in build.passes for e in p.edges]
    top = sorted(every, key=lambda pe: -pe[1].seconds)[:slowest]
    hits = sum(p.cache.hits for p in build.passes if p.cache)
    misses = sum(p.cache.misses for p in build.passes if p.cache)
    with_cache = any(p.cache for p in build.passes)
    checked = [p.unexpected_edges for p in build.passes if p.unexpected_edges is not None]
    saved = [_cache_summary(p.cache, build_mean)["saved_seconds"] for p in build.passes if p.cache]
    backends = sorted({p.cache.backend for p in build.passes if p.cache and p.cache.backend})
    return {
        "source": str(build.source),
        "passes": passes,
        "total": {
            "wall_seconds": round(sum(p.wall for p in build.passes), 3),
            "edge_seconds": round(sum(p.edge_seconds for p in build.passes), 3),
            "edges": sum(len(p.edges) for p in build.passes),
            "compiles": sum(p.compiles for p in build.passes),
            "cuda_compiles": sum(p.cuda_compiles for p in build.passes),
            "unexpected_edges": sum(checked) if checked else None,
            "cache": {
                "hits": hits,
                "misses": misses,
                "hit_rate": hits / (hits + misses) if hits + misses else None,
                "backend": "; ".join(backends),
                "write_errors": sum(p.cache.write_errors for p in build.passes if p.cache),
                "saved_seconds": None if None in saved else round(sum(s for s in saved if s is not None), 3),
            }
            if with_cache
            else None,
        },
        "slowest": [
            {"pass": name, "output": e.output, "target": e.target, "seconds": round(e.seconds, 3)}
            for name, e in top
        ],
    }


def _compiles(row: Mapping[str, Any]) -> str:
    """``12``, or ``12 (5 CUDA)`` when nvcc compiled some of them."""
    cuda = row.get("cuda_compiles") or 0
    return f"{row['compiles']} ({cuda} CUDA)" if cuda else str(row["compiles"])


def _unexpected(count: object) -> str:
    """The rebuild check's count; ``-`` where it did not run or could not tell."""
    return "-" if count is None else f"**{count}**" if count else "0"


def _rate(cache: Mapping[str, Any] | None) -> str:
    if cache is None:
        return "off"
    if cache["hit_rate"] is None:
        return "0 lookups"
    return f"{cache['hits']}/{cache['hits'] + cache['misses']} ({100 * cache['hit_rate']:.1f}%)"


def _saved(cache: Mapping[str, Any]) -> str:
    saved = cache.get("saved_seconds")
    return "unknown (no compile ran to time)" if saved is None else f"{saved:.1f} s"


def cache_section(summary: Mapping[str, Any]) -> list[str]:
    """The compiler cache of a build: backend, hits and misses, compile time saved, per pass."""
    total = summary["total"]["cache"]
    if total is None:
        return ["", "Compiler cache: off."]
    out = ["", "## Compiler cache", "", f"Backend: {total.get('backend') or 'unknown'}", ""]
    out += [
        "Saved: each hit counted at the mean time of the compiles sccache ran (this pass's, else the "
        "build's), less the time spent fetching hits.",
        "",
        "| pass | hits | misses | hit rate | compile time saved | write errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    rows = [*(p for p in summary["passes"] if p["cache"]), {"pass": "**total**", "cache": total}]
    for p in rows:
        c = p["cache"]
        rate = "-" if c["hit_rate"] is None else f"{100 * c['hit_rate']:.1f}%"
        errors = c.get("write_errors", 0)
        out.append(f"| {p['pass']} | {c['hits']} | {c['misses']} | {rate} | {_saved(c)} | {errors} |")
    if total.get("write_errors"):
        out += ["", "Write errors: the cache was read-only (mode or credentials) or refused some objects."]
    return out


def render_markdown(summary: Mapping[str, Any], title: str) -> str:
    out = [f"# Build report: {title}", "", f"Source: `{summary['source']}`", ""]
    out += [
        "Wall: the pass as build.sh timed it. Edge seconds: the sum of Ninja's edge durations "
        "(CPU time of single-threaded compiles and links). Not Python's: the edges the rebuild check "
        "found, before a per-Python pass, outside the targets that include Python.h (each one costs "
        "again for every Python; the build log names them with Ninja's reason).",
        "",
        "| pass | wall s | edge s | edges | compiles | not Python's | cache hits |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    rows = [*summary["passes"], {"pass": "**total**", **summary["total"]}]
    for p in rows:
        out.append(
            f"| {p['pass']} | {p['wall_seconds']:.1f} | {p['edge_seconds']:.1f} | {p['edges']} "
            f"| {_compiles(p)} | {_unexpected(p.get('unexpected_edges'))} | {_rate(p['cache'])} |"
        )
    out += cache_section(summary)
    for p in summary["passes"]:
        out += [
            "",
            f"## Pass {p['pass']}: targets",
            "",
            "| target | edges | compiles | edge s |",
            "|---|---:|---:|---:|",
        ]
        out += [
            f"| {t['target']} | {t['edges']} | {t['compiles']} | {t['seconds']:.2f} |" for t in p["targets"]
        ]
    out += [
        "",
        f"## The {len(summary['slowest'])} slowest edges",
        "",
        "| pass | seconds | output |",
        "|---|---:|---|",
    ]
    out += [f"| {e['pass']} | {e['seconds']:.2f} | `{e['output']}` |" for e in summary["slowest"]]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------ plots


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TelemetryError("the PNG needs matplotlib: python -m pip install matplotlib") from None
    return plt


def timeline_rows(build: Build) -> list[tuple[str, float, float]]:
    """(``pass: target``, start, end) of every edge, in seconds since the build's first pass started."""
    origin = build.start
    offset = 0.0
    rows: list[tuple[str, float, float]] = []
    for p in build.passes:
        base = (p.start - origin) if (p.start is not None and origin is not None) else offset
        rows += [(f"{p.name}: {e.target}", base + e.start, base + e.end) for e in p.edges]
        offset = base + p.wall
    return rows


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Write the PNG whole or not at all."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.replace(path)
    return path


def write_timeline(build: Build, path: Path, title: str) -> Path:
    """One row per (pass, target), a bar per edge; x axis: seconds since the build started."""
    plt = _pyplot()
    rows = timeline_rows(build)
    labels = list(dict.fromkeys(label for label, _, _ in rows))
    index = {label: i for i, label in enumerate(labels)}
    height = max(3.0, 0.3 * len(labels) + 1.5)
    fig, ax = plt.subplots(figsize=(12, height))
    colours = plt.get_cmap("tab10")
    pass_names = list(dict.fromkeys(label.split(": ", 1)[0] for label in labels))
    for label, start, end in rows:
        colour = colours(pass_names.index(label.split(": ", 1)[0]) % 10)
        ax.barh(
            index[label],
            max(end - start, 0.01),
            left=start,
            height=0.7,
            color=colour,
            edgecolor="black",
            linewidth=0.3,
        )
    for p in build.passes:
        if p.start is not None and build.start is not None:
            ax.axvline(p.start - build.start, color="grey", linestyle=":", linewidth=0.8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the build started")
    ax.set_title(f"{title}: Ninja edges per pass and target (dotted: pass starts)")
    ax.grid(axis="x", linestyle=":", linewidth=0.5)
    return _save(plt, fig, path)


def short_config(name: str) -> str:
    """A config name without the compiler and stdlib versions, short enough for an axis label."""
    return re.sub(r"(c|cxx)_compiler_version[0-9.]+|c_stdlib_version[0-9.]+", "", name)


def write_overview(summaries: Sequence[tuple[str, Mapping[str, Any]]], path: Path) -> Path:
    """Several configs: wall seconds per pass, stacked per config, hit rate in the label."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, max(3.0, 0.5 * len(summaries) + 1.5)))
    colours = plt.get_cmap("tab10")
    pass_names: list[str] = []
    for _, s in summaries:
        pass_names += [p["pass"] for p in s["passes"] if p["pass"] not in pass_names]
    labels = []
    legend: set[str] = set()
    for i, (config, s) in enumerate(summaries):
        left = 0.0
        for p in s["passes"]:
            label = None if p["pass"] in legend else p["pass"]
            legend.add(p["pass"])
            colour = colours(pass_names.index(p["pass"]) % 10)
            ax.barh(i, p["wall_seconds"], left=left, color=colour, label=label)
            left += p["wall_seconds"]
        labels.append(f"{short_config(config)}\ncache {_rate(s['total']['cache'])}")
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("wall seconds")
    ax.set_title("build time per config and pass")
    ax.legend(fontsize=8, loc="lower right")
    return _save(plt, fig, path)


def overview_markdown(summaries: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    return "\n".join([*_times_table(summaries), "", *_cache_table(summaries)]) + "\n"


def _cache_table(summaries: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    out = [
        "## Compiler cache per config",
        "",
        "| config | backend | hits | misses | compile time saved |",
        "|---|---|---:|---:|---:|",
    ]
    for config, s in summaries:
        c = s["total"]["cache"]
        if c is None:
            out.append(f"| {config} | off | - | - | - |")
        else:
            out.append(
                f"| {config} | {c.get('backend') or '?'} | {c['hits']} | {c['misses']} | {_saved(c)} |"
            )
    return out


def _times_table(summaries: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    out = [
        "# Build times of all configs",
        "",
        "| config | wall s | edge s | compiles | cache hits | passes (wall s) |",
        "|---|---:|---:|---:|---|---|",
    ]
    for config, s in summaries:
        t = s["total"]
        per_pass = ", ".join(f"{p['pass']} {p['wall_seconds']:.0f}" for p in s["passes"])
        out.append(
            f"| {config} | {t['wall_seconds']:.1f} | {t['edge_seconds']:.1f} | {t['compiles']} "
            f"| {_rate(t['cache'])} | {per_pass} |"
        )
    return out


def write_report(build: Build, out_dir: Path, title: str, png: bool = True) -> dict[str, Path]:
    """report.json, report.md and (with matplotlib) timeline.png in ``out_dir``."""
    if png:
        _pyplot()  # fail before writing anything
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(build)
    written = {}
    for name, text in (
        ("report.json", json.dumps(summary, indent=1) + "\n"),
        ("report.md", render_markdown(summary, title)),
    ):
        tmp = out_dir / (name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out_dir / name)
        written[name] = out_dir / name
    if png:
        written["timeline.png"] = write_timeline(build, out_dir / "timeline.png", title)
    return written
