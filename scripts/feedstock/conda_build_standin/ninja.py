"""Which Ninja edges a build step re-ran.

Two sources, both Ninja's own records:

* ``.ninja_log`` (``start<TAB>end<TAB>mtime<TAB>output<TAB>hash``): Ninja may recompact it (one line
  per output, any order), so a step's edges are the outputs whose entry after the step was in no
  earlier snapshot. (``megabuild build-state restore`` puts an earlier entry back: not a run.)
* the ``[k/N] <description>`` status lines in a script's log: they separate the ninja runs *within*
  one script (a script may run Ninja more than once). CMake's descriptions
  name the output: ``Building CXX object <obj>``, ``Linking CXX shared library <lib>``,
  ``Linking CXX executable <exe>``; ``Re-running CMake...`` regenerates ``build.ninja``.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from megabuild.ninja_tool import edge_kind, edge_target

from feedstock.telemetry import edges_between, parse_ninja_log

_STATUS = re.compile(r"^\s*\[(?P<k>\d+)/(?P<n>\d+)\] (?P<desc>.*)$")
_DESC = re.compile(
    r"^(?:Building (?:CXX|C) object"
    r"|Linking (?:CXX|C) (?:shared library|shared module|static library|executable)) (?P<out>\S+)"
)


class LogHistory:
    """Every ``.ninja_log`` entry seen so far, to tell the edges a step ran from restored entries."""

    def __init__(self) -> None:
        self._seen: dict[str, set[tuple[int, int, str, str]]] = {}

    def ran(self, build_dir: Path) -> list[str]:
        """The edges whose entry in ``build_dir``'s log is new, each named by one output (as
        ``feedstock.telemetry`` names them); the log then counts as seen."""
        path = Path(build_dir) / ".ninja_log"
        after = parse_ninja_log(path.read_text(errors="replace"), str(path)) if path.exists() else {}
        ran = sorted(edge.output for edge in edges_between(self._seen, after))
        for out, entry in after.items():
            self._seen.setdefault(out, set()).add(entry)
        return ran


def status_runs(log_text: str) -> list[list[str]]:
    """Outputs of the edges each ninja run in a script log reported, one list per run."""
    runs: list[list[str]] = []
    last_k: int | None = None
    for line in log_text.splitlines():
        m = _STATUS.match(line)
        if not m:
            continue
        k, desc = int(m["k"]), m["desc"]
        if last_k is None or k <= last_k:  # the counter restarts with every ninja run
            runs.append([])
        last_k = k
        if desc.startswith("Re-running CMake"):
            runs[-1].append("build.ninja")
            continue
        d = _DESC.match(desc)
        runs[-1].append(d["out"] if d else desc)
    return [r for r in runs if r]


# the build report's definitions: one reading of an output name for both
kind = edge_kind
target = edge_target


def by_target(outputs: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for out in outputs:
        counts[target(out)] = counts.get(target(out), 0) + 1
    return dict(sorted(counts.items()))


def summary(outputs: Iterable[str]) -> dict[str, int]:
    counts = {"compile": 0, "link": 0, "other": 0}
    for out in outputs:
        counts[kind(out)] += 1
    return counts


def deps(build_dir: Path) -> dict[str, set[str]]:
    """``ninja -t deps``: object file -> headers it was compiled with."""
    out = subprocess.run(
        ["ninja", "-C", str(build_dir), "-t", "deps"], capture_output=True, text=True, check=True
    ).stdout
    result: dict[str, set[str]] = {}
    current: str | None = None
    for line in out.splitlines():
        if not line.strip():
            current = None
        elif not line.startswith(" ") and ":" in line:
            current = line.split(":", 1)[0]
            result[current] = set()
        elif current is not None:
            result[current].add(line.strip())
    return result


def objects_including(build_dir: Path, header_suffix: str) -> set[str]:
    """Object files whose recorded header dependencies include a path ending in ``header_suffix``."""
    return {
        obj for obj, headers in deps(build_dir).items() if any(h.endswith(header_suffix) for h in headers)
    }
