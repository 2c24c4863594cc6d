#!/usr/bin/env python
"""What does ``conda install pytorch`` give users?  Solver-level checks over every config.

Renders every ``.ci_support`` config (``scripts/feedstock/render.py``), writes the outputs as a
local channel with stand-ins for their external dependencies (``scripts/feedstock/channel.py``)
and solves typical user requests with py-rattler, printing what gets installed::

    python -m feedstock solver-check                 # table of all scenarios, exit 1 on a mismatch
    python -m feedstock solver-check --markdown      # the same as a Markdown table (for docs/packages.md)
    python -m feedstock solver-check --keep DIR      # also keep the channel in DIR
    python -m feedstock solver-check --records F     # use rendered records from a JSON file

Each scenario states what it expects (build-string globs per package, or unsatisfiable).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import fnmatch
import os
import re
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from megabuild import model
from megabuild.model import LIBTORCH, LINALG, PYTORCH, PYTORCH_CPU, PYTORCH_GPU, LinalgVariant

from feedstock.channel import Channel, Installed, SolveError, write_channel
from feedstock.outputs import load_outputs
from feedstock.paths import REPO

MAGMA, NOMAGMA = LinalgVariant.MAGMA.value, LinalgVariant.NOMAGMA.value  # the linalg variants' names


PROG = "feedstock solver-check"

INTERESTING: tuple[str, ...] = (
    "python",
    "python_abi",
    PYTORCH,
    LIBTORCH,
    LINALG,
    "libmagma",
    "libblas",
    "cuda-version",
    PYTORCH_CPU,
    PYTORCH_GPU,
)
"""Packages the table shows (when installed)."""

CUDA = "12.6"  # the driver a "GPU machine" reports, unless a scenario says otherwise


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One user request and what it should resolve to.

    ``expect`` maps package names to a build-string glob, or to None for "must not be installed".
    """

    key: str
    platform: str
    specs: tuple[str, ...]
    cuda: str | None = None
    expect: Mapping[str, str | None] = dataclasses.field(default_factory=dict)
    unsat: bool = False

    @property
    def virtuals(self) -> dict[str, str]:
        return {"__cuda": self.cuda} if self.cuda else {}

    def describe_virtuals(self) -> str:
        return f"__cuda={self.cuda}" if self.cuda else "-"


@dataclasses.dataclass
class Outcome:
    scenario: Scenario
    installed: dict[str, Installed] | None
    error: str | None = None

    @property
    def problems(self) -> list[str]:
        s = self.scenario
        if self.installed is None:
            return [] if s.unsat else [f"expected a solution, got: {self.error}"]
        if s.unsat:
            return ["expected unsatisfiable, got a solution"]
        problems = []
        for name, glob in s.expect.items():
            got = self.installed.get(name)
            if glob is None and got is not None:
                problems.append(f"{name} should not be installed (got {got.build})")
            elif glob is not None and (got is None or not fnmatch.fnmatchcase(got.build, glob)):
                problems.append(f"{name}: expected build {glob}, got {got.build if got else 'nothing'}")
        return problems


TEGRA = "arm-variant * tegra"
"""What a Jetson (Orin, JetPack 6) has installed: conda-forge's Tegra CUDA packages."""
TEGRA_CUDA = "12.6"  # JetPack 6's driver


def _tegra_build(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> str | None:
    """The CUDA tag (``cuda129``) of the linux-aarch64 Tegra build (megabuild.model.TEGRA's CUDA),
    if the channel has it; told by its CUDA version, not by what it depends on."""
    tags = {"cuda" + v.replace(".", "") for v in model.TEGRA.cuda_versions}
    for r in records.get("linux-aarch64", ()):
        tag = str(r["build"]).split("_", 1)[0]
        if r["name"] == PYTORCH and tag in tags:
            return tag
    return None


def tegra_scenarios(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Scenario]:
    """A Jetson (the tegra arm-variant installed) gets the Tegra build and never an SBSA one; an
    SBSA server (conda-forge's default arm variant) never gets the Tegra build."""
    tag = _tegra_build(records)
    if tag is None:
        return []
    p = "linux-aarch64"
    sbsa = "arm-variant * sbsa"
    return [
        Scenario(
            "jetson",
            p,
            (PYTORCH, TEGRA),
            TEGRA_CUDA,
            {PYTORCH: f"{tag}_generic_py*", "arm-variant": "tegra"},
        ),
        Scenario("jetson-no-sbsa-build", p, ("pytorch * cuda126_*", TEGRA), TEGRA_CUDA, unsat=True),
        Scenario(
            "sbsa-server",
            p,
            (PYTORCH,),
            "12.9",
            {PYTORCH: "cuda126_generic_py*", "arm-variant": "sbsa"},
        ),
        Scenario("sbsa-server-no-tegra-build", p, (f"pytorch * {tag}_*", sbsa), "12.9", unsat=True),
    ]


def _builds_cuda13(records: Mapping[str, Iterable[Mapping[str, Any]]], platform: str) -> bool:
    """Whether the channel has a CUDA 13.0 pytorch for ``platform``."""
    return any(r["build"].startswith("cuda130") for r in records.get(platform, ()) if r["name"] == PYTORCH)


def scenarios(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Scenario]:
    """The standard requests, for the platforms (and their Python versions) the channel has."""
    out: list[Scenario] = []
    pys = pythons_by_platform(records)
    cuda13 = _builds_cuda13(records, "linux-64")
    if "linux-64" in pys:
        p = "linux-64"
        magma = {LINALG: "cuda126_mkl_magma_*", "libmagma": "*"}
        out += [
            Scenario("gpu", p, (PYTORCH,), CUDA, {PYTORCH: "cuda126_mkl_py*", **magma}),
            *(
                [Scenario("gpu-cuda13", p, (PYTORCH,), "13.0", {PYTORCH: "cuda130_mkl_py*"})]
                if cuda13
                else []
            ),
            Scenario("cpu", p, (PYTORCH,), None, {PYTORCH: "cpu_mkl_py*", LINALG: None}),
            Scenario("cpu-meta-on-gpu", p, (PYTORCH_CPU,), CUDA, {PYTORCH: "cpu_mkl_py*"}),
            Scenario("gpu-meta", p, (PYTORCH_GPU,), CUDA, {PYTORCH: "cuda126_mkl_py*"}),
            Scenario("gpu-meta-no-gpu", p, (PYTORCH_GPU,), None, unsat=True),
            Scenario(
                NOMAGMA,
                p,
                (PYTORCH, "libtorch-cuda-linalg * *_nomagma_*"),
                CUDA,
                {LINALG: "cuda126_mkl_nomagma_*", "libmagma": None},
            ),
            Scenario("nomkl-gpu", p, (PYTORCH, "nomkl"), CUDA, {PYTORCH: "cuda126_generic_py*"}),
            Scenario("nomkl-cpu", p, (PYTORCH, "nomkl"), None, {PYTORCH: "cpu_generic_py*"}),
            Scenario("mixed-cpu-cuda", p, ("pytorch * cpu_*", "libtorch * cuda*"), CUDA, unsat=True),
            Scenario("both-metas", p, (PYTORCH_CPU, PYTORCH_GPU), CUDA, unsat=True),
            Scenario(
                "nomagma-with-libmagma",
                p,
                ("libtorch-cuda-linalg * *_nomagma_*", "libmagma"),
                CUDA,
                unsat=True,
            ),
        ]
        for py in pys[p]:
            tag = py.replace(".", "")
            out.append(
                Scenario(
                    f"py{tag}-gpu",
                    p,
                    (PYTORCH, f"python={py}"),
                    CUDA,
                    {PYTORCH: f"cuda*_py{tag}_*"},
                )
            )
            out.append(
                Scenario(
                    f"py{tag}-cpu",
                    p,
                    (PYTORCH, f"python={py}"),
                    None,
                    {PYTORCH: f"cpu_*_py{tag}_*"},
                )
            )
    if "linux-aarch64" in pys:
        p = "linux-aarch64"
        out += [
            Scenario("aarch64-gpu", p, (PYTORCH,), CUDA, {PYTORCH: "cuda126_generic_py*"}),
            Scenario("aarch64-cpu", p, (PYTORCH,), None, {PYTORCH: "cpu_generic_py*"}),
        ]
        if _builds_cuda13(records, p):
            # Grace Hopper / Blackwell servers with a CUDA 13 driver get the sbsa CUDA 13.0 build
            linalg = {LINALG: "cuda130_generic_magma_*", "libmagma": "*"}
            out += [
                Scenario(
                    "aarch64-gpu-cuda13",
                    p,
                    (PYTORCH,),
                    "13.0",
                    {PYTORCH: "cuda130_generic_py*", **linalg},
                ),
                Scenario(
                    "aarch64-cuda13-nomagma",
                    p,
                    (PYTORCH, "libtorch-cuda-linalg * *_nomagma_*"),
                    "13.0",
                    {LINALG: "cuda130_generic_nomagma_*", "libmagma": None},
                ),
            ]
        out += tegra_scenarios(records)
    if "win-64" in pys:
        p = "win-64"  # MKL only, no libtorch-cuda-linalg (torch_cuda.dll links MAGMA)
        out += [
            Scenario("win-gpu", p, (PYTORCH,), "13.0", {PYTORCH: "cuda*_mkl_py*", LINALG: None}),
            Scenario("win-cpu", p, (PYTORCH,), None, {PYTORCH: "cpu_mkl_py*"}),
            Scenario("win-gpu-meta-no-gpu", p, (PYTORCH_GPU,), None, unsat=True),
            Scenario("win-nomkl", p, (PYTORCH, "nomkl"), None, unsat=True),
        ]
    for p, blas in (("osx-64", model.MKL_BLAS), ("osx-arm64", model.GENERIC_BLAS)):
        if p not in pys:
            continue
        short = p.replace("osx-", "")
        out.append(Scenario(f"{short}-gpu-meta", p, (PYTORCH_GPU,), None, unsat=True))
        if blas == model.MKL_BLAS:
            out.append(Scenario(f"{short}-nomkl", p, (PYTORCH, "nomkl"), None, {PYTORCH: "cpu_generic_py*"}))
        for py in pys[p]:
            tag = py.replace(".", "")
            out.append(
                Scenario(
                    f"{short}-py{tag}",
                    p,
                    (PYTORCH, f"python={py}"),
                    None,
                    {PYTORCH: f"cpu_{blas}_py{tag}_*"},
                )
            )
    return out + freethreaded_scenarios(records)


def freethreaded_pythons(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Per platform, the Pythons whose free-threaded build has a pytorch (``python_abi 3.14.* *_cp314t``)."""
    out: dict[str, set[str]] = {}
    for subdir, recs in records.items():
        for r in recs:
            for dep in r["depends"] if r["name"] == PYTORCH else ():
                parts = dep.split()
                if parts[0] == "python_abi" and len(parts) > 2 and parts[2].endswith("t"):
                    out.setdefault(subdir, set()).add(parts[1].rstrip(".*"))
    return {k: sorted(v) for k, v in out.items()}


def freethreaded_scenarios(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[Scenario]:
    """A free-threaded Python gets the cp314t pytorch, the GIL Python of the same version never
    does (the solved ``python_abi`` says which one came), and both metapackages work with both."""
    out: list[Scenario] = []
    cuda_by_platform = {"linux-64": CUDA, "linux-aarch64": CUDA, "win-64": "13.0"}
    for p, versions in freethreaded_pythons(records).items():
        gpu = cuda_by_platform.get(p)
        short = p.replace("-", "")
        for py in versions:
            tag = py.replace(".", "")
            for flag, python in (("t", f"python {py}.* *_cp{tag}t"), ("", f"python {py}.* *_cpython")):
                abi = {"python_abi": f"*_cp{tag}{flag}", PYTORCH: f"*_py{tag}_*"}
                key = f"{short}-py{tag}{flag or '-gil'}"
                out.append(Scenario(key, p, (PYTORCH, python), None, {**abi, PYTORCH: f"cpu_*_py{tag}_*"}))
                out.append(Scenario(f"{key}-cpu-meta", p, (PYTORCH_CPU, python), gpu, abi))
                if gpu is not None:
                    out.append(Scenario(f"{key}-gpu", p, (PYTORCH, python), gpu, {**abi, PYTORCH: "cuda*"}))
                    out.append(Scenario(f"{key}-gpu-meta", p, (PYTORCH_GPU, python), gpu, abi))
    return out


def pythons_by_platform(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> dict[str, list[str]]:
    """Python versions for which the channel has a pytorch, per platform."""
    out: dict[str, set[str]] = {}
    for subdir, recs in records.items():
        for r in recs:
            if r["name"] != PYTORCH:
                continue
            for dep in r["depends"]:
                parts = dep.split()
                if parts[0] == "python_abi" and len(parts) > 1:
                    out.setdefault(subdir, set()).add(parts[1].rstrip(".*"))
                elif parts[0] == "python" and len(parts) > 1 and parts[1].startswith(">="):
                    out.setdefault(subdir, set()).add(".".join(parts[1][2:].split(",")[0].split(".")[:2]))
    return {k: sorted(v, key=lambda v: tuple(int(x) for x in v.split("."))) for k, v in out.items()}


_VARIANT = re.compile(
    r"^(?P<tag>cpu|cuda\d+)_(?P<blas>[a-z]+)_(?:(?P<magma>magma|nomagma)_)?(?:py(?P<py>\d+)_)?h"
)


def preference_problems(records: Mapping[str, Iterable[Mapping[str, Any]]]) -> list[str]:
    """Build-number order that must not depend on a solver's tie-breaking, per subdir and Python.

    CUDA pytorch/libtorch builds outnumber every CPU build, MKL builds outnumber generic ones of
    the same CUDA tag, and the magma linalg outnumbers the nomagma one of the same build.
    """
    problems: list[str] = []
    for subdir, recs in records.items():
        groups: dict[tuple[str, str | None], list[tuple[dict[str, str], int, str]]] = {}
        for r in recs:
            m = _VARIANT.match(r["build"])
            if r["name"] in (PYTORCH, LIBTORCH, LINALG) and m:
                groups.setdefault((r["name"], m["py"]), []).append(
                    (m.groupdict(), r["build_number"], r["build"])
                )
        for (name, _), builds in sorted(groups.items(), key=str):
            for a, na, ba in builds:
                for b, nb, bb in builds:
                    worse = (
                        (a["tag"] != "cpu" and b["tag"] == "cpu")
                        or (
                            a["tag"] == b["tag"]
                            and a["blas"] == model.MKL_BLAS
                            and b["blas"] != model.MKL_BLAS
                        )
                        or (
                            a["tag"] == b["tag"]
                            and a["blas"] == b["blas"]
                            and (a[MAGMA], b[MAGMA]) == (MAGMA, NOMAGMA)
                        )
                    )
                    if worse and na <= nb:
                        problems.append(
                            f"{subdir} {name}: {ba} (number {na}) must outnumber {bb} (number {nb})"
                        )
    return problems


def render_feedstock(feedstock_dir: Path, configs: Sequence[str] = ()) -> list[Any]:
    """Every output of the configs in ``feedstock_dir/.ci_support`` (via the render library).

    ``configs`` (file names or aliases, see ``configs.py``) restricts rendering to those configs.
    """
    from feedstock.configs import ConfigError, list_configs, resolve_configs

    available = list_configs(feedstock_dir)
    if not available:
        raise ConfigError(f"no .ci_support/*.yaml configs in {feedstock_dir} (rerender first?)")
    if not configs:
        return _render_parallel([c.path for c in available], feedstock_dir / "recipe")

    paths = list({c.path: None for name in configs for c in resolve_configs(name, available)})
    return _render_parallel(paths, feedstock_dir / "recipe")


def _render_parallel(paths: Sequence[Path], recipe_dir: Path) -> list[Any]:
    """Render configs in worker processes (rendering is pure Python and CPU-bound)."""
    from feedstock.render import render_config

    if len(paths) < 2:
        return [o for path in paths for o in render_config(path, recipe_dir)]
    with concurrent.futures.ProcessPoolExecutor(max_workers=min(len(paths), os.cpu_count() or 1)) as pool:
        results = pool.map(render_config, paths, [recipe_dir] * len(paths))
        return [o for outputs in results for o in outputs]


def build_channel(
    feedstock_dir: Path, channel_dir: Path, configs: Sequence[str] = ()
) -> dict[str, list[dict[str, Any]]]:
    """Render (all or the given configs) and write the channel; returns its records per subdir."""
    return write_channel(render_feedstock(feedstock_dir, configs), channel_dir)


def run(channel: Channel, todo: Iterable[Scenario]) -> list[Outcome]:
    outcomes = []
    for s in todo:
        try:
            outcomes.append(Outcome(s, channel.solve(s.specs, s.platform, s.virtuals)))
        except SolveError as exc:
            outcomes.append(Outcome(s, None, " ".join(str(exc).split())))
    return outcomes


def table(outcomes: Sequence[Outcome], markdown: bool = False) -> str:
    head = ["scenario", "platform", "request", "virtual", "installed", "ok"]
    rows = []
    for o in outcomes:
        if o.installed is None:
            got = "UNSATISFIABLE"
        else:
            got = ", ".join(
                f"{n} {o.installed[n].version} {o.installed[n].build}"
                for n in INTERESTING
                if n in o.installed
            )
        rows.append(
            [
                o.scenario.key,
                o.scenario.platform,
                " ".join(f"'{s}'" if " " in s else s for s in o.scenario.specs),
                o.scenario.describe_virtuals(),
                got,
                "ok" if not o.problems else "FAIL: " + "; ".join(o.problems),
            ]
        )
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for row in rows:
            cells = [c.replace("|", "\\|") for c in row]
            cells[2] = f"`{cells[2]}`"
            cells[4] = "<br>".join(f"`{c}`" for c in cells[4].split(", "))
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines)
    # the installed column is long: it goes on its own indented line under each row
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    lines = []
    for row in [head, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:4], widths)) + "  " + row[5])
        if row is not head:
            lines.append("    -> " + row[4])
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--feedstock", type=Path, default=REPO, help="feedstock root (default: this one)")
    parser.add_argument("--records", type=Path, help="JSON list of rendered outputs instead of rendering")
    parser.add_argument("--keep", type=Path, help="write the channel here (default: a temp dir)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--config", action="append", default=[], help="render only this config/alias")
    parser.add_argument("--only", action="append", default=[], help="run only these scenario keys (glob)")
    args = parser.parse_args(argv)

    parser_configs: list[str] = args.config
    if args.records:
        outputs: list[Any] = load_outputs(args.records)
    else:
        outputs = render_feedstock(args.feedstock, parser_configs)
    with tempfile.TemporaryDirectory(prefix="solver-check-") as tmp:
        channel_dir = args.keep or Path(tmp) / "channel"
        records = write_channel(outputs, channel_dir)
        todo = scenarios(records)
        if args.only:
            todo = [s for s in todo if any(fnmatch.fnmatchcase(s.key, g) for g in args.only)]
        outcomes = run(Channel(channel_dir), todo)
    print(table(outcomes, markdown=args.markdown))
    failed = [o for o in outcomes if o.problems]
    order = preference_problems(records)
    for problem in order:
        print(f"build-number order: {problem}", file=sys.stderr)
    print(f"\n{len(outcomes) - len(failed)}/{len(outcomes)} scenarios as expected", file=sys.stderr)
    return 1 if failed or order else 0
