"""Before a per-Python pass builds: what would Ninja rebuild outside the Python-dependent targets?

A per-Python pass should rebuild only what includes ``Python.h`` (torch_python, ``_C``, functorch,
nnapi_backend) and what CMake re-runs on every configure. Anything else (libtorch_cpu relinked
because NNPACK's codegen command line changed, a flipped cache entry recompiling ``c10``) costs
hours across five extra Pythons and is silent: the build still succeeds. The guard prints every
such edge with Ninja's reason and returns their count for the build report; it warns, never fails
the build, and an error of its own is one warning line too.

How it asks. The pass's real configure happens inside scikit-build-core (``pip install .``), with
no point between its configure and its build where a step can run; ``ninja -n`` before it only
reports that ``build.ninja`` would be regenerated (in a dry run Ninja stops after the regeneration
edge, which it does not run) and the tree still holds the previous pass's manifest, so it cannot
tell. So the guard runs CMake's re-run itself, as the pass's configure will: the cache's own
``CMAKE_COMMAND`` with ``-S <source> -B build``, this pass's ``-C cmake.define`` values as ``-D``,
and the environment pip gives the backend (``[tool.scikit-build.env]`` included). The cache the
swap left already holds this Python's hints (what scikit-build-core's ``CMakeInit.txt`` forces),
so the manifest this writes is the one the pass's configure writes again; then ``ninja -n -d
explain`` (the cache's ``CMAKE_MAKE_PROGRAM``) lists exactly the edges the pass will run, and
``explain`` says why. Values that change with each backend run (its temporary wheel dirs) only
reach install rules, never an edge. The cost is one extra configure per Python.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.ninja_tool import edge_target
from megabuild.pipeline import wheel_settings

# CMake targets whose sources include Python.h (upstream 2.14; the fixture has the first two)
PYTHON_TARGETS = frozenset({"torch_python", "_C", "functorch", "nnapi_backend"})
# edges CMake re-runs on every configure: the manifest's regeneration
RERUN_OUTPUTS = frozenset({"build.ninja"})
_STATUS = re.compile(r"^\[\d+/\d+\] (?P<desc>.*)$")
_DESC = re.compile(
    r"^(?:Building \S+ object|Linking \S+ (?:shared library|shared module|static library|executable)"
    r"|Generating) (?P<out>\S+)$"
)
_OWN_REASON = (
    re.compile(r"^command line changed for (?P<node>.+)$"),
    re.compile(r"^output (?P<node>.+?) doesn't exist$"),
    re.compile(r"^output (?P<node>.+?) older than most recent input .+$"),
    re.compile(r"^recorded mtime of (?P<node>.+?) older than most recent input .+$"),
    re.compile(r"^deps for '(?P<node>.+)' are missing$"),
)
_DIRTY_INPUT = re.compile(r"^(?P<node>.+) is dirty$")
EXPLAIN = "ninja explain: "
SKIPPED = "megabuild: warning: rebuild check skipped (the build goes on): "


class GuardError(Exception):
    """The guard could not tell: one warning line, the build goes on."""


@dataclass(frozen=True)
class Edge:
    output: str  # the edge's output, as build.ninja names it (its description where unknown)
    reason: str  # Ninja's explanation, or "(no explanation)"

    @property
    def expected(self) -> bool:
        return self.output in RERUN_OUTPUTS or edge_target(self.output) in PYTHON_TARGETS


def cache_value(cache: Path, name: str) -> str:
    prefix = f"{name}:"
    try:
        lines = cache.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise GuardError(f"cannot read {cache}: {exc.strerror}") from None
    for line in lines:
        if line.startswith(prefix) and "=" in line:
            return line.split("=", 1)[1]
    raise GuardError(f"{cache} has no {name}")


def _run(cmd: list[str], env: Mapping[str, str], what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(cmd, env=dict(env), capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GuardError(f"{what}: {exc}") from None
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GuardError(f"{what} failed with exit status {proc.returncode}: {detail[-1] if detail else '?'}")
    return proc


def regenerate(source_dir: Path, build_dir: Path, defines: Mapping[str, str], env: Mapping[str, str]) -> None:
    """CMake's re-run, as the pass's configure will do it (module docstring)."""
    cmake = cache_value(build_dir / "CMakeCache.txt", "CMAKE_COMMAND")
    cmd = [cmake, "-S", str(source_dir), "-B", str(build_dir), *(f"-D{k}={v}" for k, v in defines.items())]
    _run(cmd, env, "CMake's re-run")


def explain_lines(stderr: str) -> list[str]:
    return [line[len(EXPLAIN) :] for line in stderr.splitlines() if line.startswith(EXPLAIN)]


def planned_outputs(stdout: str) -> list[str]:
    """The edge each ``[k/N] description`` line of a dry run stands for (CMake's descriptions name
    the output; ``Generating`` relative to its directory; others are kept as they are)."""
    outputs = []
    for line in stdout.splitlines():
        status = _STATUS.match(line.strip())
        if status is None:
            continue
        desc = status["desc"]
        if desc.startswith("Re-running CMake"):
            outputs.append("build.ninja")
            continue
        named = _DESC.match(desc)
        outputs.append(named["out"] if named else desc)
    return outputs


def _ninja(
    ninja: str, build_dir: Path, env: Mapping[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return _run([ninja, "-C", str(build_dir), *args], env, f"ninja {' '.join(args)}")


def resolve(names: list[str], nodes: list[str]) -> dict[str, str]:
    """Each name as build.ninja's node: itself, else the one non-alias node ending in ``/name``."""
    known = set(nodes)
    resolved: dict[str, str] = {}
    for name in names:
        if name in known:
            resolved[name] = name
            continue
        found = [n for n in nodes if n.endswith(f"/{name}") and not os.path.isabs(n)]
        if len(found) == 1:
            resolved[name] = found[0]
    return resolved


def query_inputs(text: str) -> dict[str, list[str]]:
    """``ninja -t query NODE...``: each node's inputs (explicit and implicit, not order-only)."""
    inputs: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            inputs[line[:-1]] = []
            current = None
        elif line.startswith("  ") and not line.startswith("   "):  # "  input: RULE", "  outputs:"
            current = inputs[next(reversed(inputs))] if inputs and line.strip().startswith("input:") else None
        elif current is not None and line.strip() and not line.strip().startswith("||"):
            current.append(line.strip().removeprefix("| "))
    return inputs


def reasons(explained: list[str], inputs: Mapping[str, list[str]]) -> dict[str, str]:
    """Ninja's reason for each node: its own explanation, else the first of its inputs it calls dirty."""
    own: dict[str, str] = {}
    dirty: set[str] = set()
    for line in explained:
        for pattern in _OWN_REASON:
            match = pattern.match(line)
            if match:
                own.setdefault(match["node"], line)
                break
        else:
            match = _DIRTY_INPUT.match(line)
            if match:
                dirty.add(match["node"])
    out = dict(own)
    for node, node_inputs in inputs.items():
        if node not in out:
            first = next((i for i in node_inputs if i in dirty), None)
            if first is not None:
                out[node] = f"{first} is dirty"
    return out


def plan(source_dir: Path, build_dir: Path, defines: Mapping[str, str], env: Mapping[str, str]) -> list[Edge]:
    """Every edge this pass would run, with Ninja's reason."""
    env = wheel_settings.backend_env(source_dir, env)
    regenerate(source_dir, build_dir, defines, env)
    ninja = cache_value(build_dir / "CMakeCache.txt", "CMAKE_MAKE_PROGRAM")
    dry = _ninja(ninja, build_dir, env, "-n", "-d", "explain")
    names = planned_outputs(dry.stdout)
    if not names:
        return []
    listing = _ninja(ninja, build_dir, env, "-t", "targets", "all").stdout.splitlines()
    resolved = resolve(names, [line.rsplit(": ", 1)[0] for line in listing if ": " in line])
    explained = explain_lines(dry.stderr)
    nodes = sorted(set(resolved.values()))
    inputs = query_inputs(_ninja(ninja, build_dir, env, "-t", "query", *nodes).stdout) if nodes else {}
    why = reasons(explained, inputs)
    edges = []
    for name in names:
        node = resolved.get(name, name)
        edges.append(Edge(node, why.get(node, "(no explanation)")))
    return edges


def _warn(line: str) -> None:
    print(f"megabuild: warning: {line}", flush=True)


def guard(
    source_dir: Path, build_dir: Path, defines: Mapping[str, str], env: Mapping[str, str] | None = None
) -> int | None:
    """Print every edge the pass would run outside the Python-dependent targets; their count, or
    None where the guard could not tell (one warning: the build goes on)."""
    try:
        edges = plan(source_dir, build_dir, defines, os.environ if env is None else env)
    except (GuardError, MegabuildError, OSError, ValueError) as exc:
        print(f"{SKIPPED}{exc}", flush=True)
        return None
    unexpected = [e for e in edges if not e.expected]
    print(
        f"rebuild check: this pass will run {len(edges)} edges, "
        f"{len(unexpected)} outside the Python-dependent targets",
        flush=True,
    )
    if unexpected:
        _warn(
            f"this pass rebuilds {len(unexpected)} edges that do not depend on Python "
            "(one Python's values reach them; every Python pays again):"
        )
        for edge in unexpected:
            print(f"  {edge.output}: {edge.reason}", flush=True)
    return len(unexpected)
