#!/usr/bin/env python3
"""Print the upstream-versions table of docs/version-bumps.md: what PyTorch vendors and pins, next to ours.

    python -m feedstock upstream-versions ~/src/pytorch            # a git checkout (submodules inited)
    python -m feedstock upstream-versions ~/src/pytorch-v2.13.0     # an extracted release tarball
    python -m feedstock upstream-versions ~/src/pytorch --json

Upstream columns come from:

* vendored code: ``git submodule status --recursive`` (commit and ``git describe``), or, for a
  tarball without ``.git``, the paths in ``.gitmodules`` and a version found in the directory
  (``version.txt`` / ``VERSION`` files, ``project(... VERSION x.y.z)`` in CMakeLists.txt);
* CI pins: ``.ci/docker/ci_commit_pins/*.txt`` and ``*_VERSION=`` assignments in
  ``.ci/docker/common/install_*.sh`` (MKL, cuDNN, NCCL, MAGMA, cuSPARSELt, ...);
* wheel metadata: ``requirements.txt`` and ``pyproject.toml`` (build requires, dependencies).

The "recipe" column lists the requirement specs of ``recipe/meta.yaml`` for the same package
(comments and selectors stripped), the "configs" column the values the ``.ci_support``
configs pin (every config, de-duplicated). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from megabuild.model import LinalgVariant

from feedstock.configs import list_configs
from feedstock.errors import UsageError
from feedstock.paths import REPO

PROG = "feedstock upstream-versions"

# upstream name (lower case, last path component / variable stem) -> conda package names
CONDA_NAMES: dict[str, tuple[str, ...]] = {
    "protobuf": ("libprotobuf", "protobuf"),
    LinalgVariant.MAGMA.value: ("libmagma", "libmagma-devel", "libmagma_devel"),  # named after MAGMA
    "cudnn": ("cudnn", "libcudnn", "libcudnn-dev", "libcudnn_dev"),
    "mkl": ("mkl", "mkl-devel", "mkl_devel"),
    "nccl": ("nccl",),
    "cusparselt": ("cusparselt", "libcusparselt", "libcusparselt-dev"),
    "cudss": ("libcudss", "libcudss-dev"),
    "cuda": ("cuda-version", "cuda_compiler_version"),
    "onnx": ("onnx",),
    "fmt": ("fmt",),
    "pybind11": ("pybind11",),
    "sleef": ("sleef",),
    "eigen": ("eigen",),
    "cpuinfo": ("cpuinfo",),
    "pthreadpool": ("pthreadpool",),
    "fp16": ("fp16",),
    "fxdiv": ("fxdiv",),
    "xnnpack": ("xnnpack",),
    "kineto": ("kineto",),
    "cutlass": ("cutlass",),
    "flatbuffers": ("flatbuffers",),
    "opentelemetry-cpp": ("opentelemetry-cpp",),
    "triton": ("triton",),
    "numpy": ("numpy",),
    "typing-extensions": ("typing-extensions", "typing_extensions"),
}


@dataclass
class Row:
    package: str
    upstream: str
    source: str
    recipe: str = ""
    configs: str = ""


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


# -- upstream ------------------------------------------------------------------------------------


def submodule_rows(src: Path) -> list[Row]:
    rows = []
    if (src / ".git").exists():
        proc = subprocess.run(
            ["git", "-C", str(src), "submodule", "status", "--recursive"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 0:
            for line in proc.stdout.splitlines():
                m = re.match(r"^[ +\-U]?([0-9a-f]{7,40}) (\S+)(?: \((.*)\))?$", line)
                if not m:
                    continue
                sha, path, described = m.groups()
                state = {"-": " (not initialised)", "+": " (checked out != recorded)"}.get(line[:1], "")
                version = described or sha[:7]
                rows.append(Row(Path(path).name, f"{version}{state}", path))
            return rows
    for path in gitmodules_paths(src):
        rows.append(Row(Path(path).name, directory_version(src / path) or "(vendored)", path))
    return rows


def gitmodules_paths(src: Path) -> list[str]:
    gitmodules = src / ".gitmodules"
    if not gitmodules.is_file():
        return []
    return re.findall(r"^\s*path\s*=\s*(\S+)\s*$", gitmodules.read_text(), flags=re.M)


def directory_version(path: Path) -> str | None:
    for name in ("version.txt", "VERSION", "VERSION.txt"):
        f = path / name
        if f.is_file():
            text = f.read_text(errors="replace").strip().splitlines()
            if text and re.match(r"^v?\d", text[0].strip()):
                return text[0].strip()
    cmake = path / "CMakeLists.txt"
    if cmake.is_file():
        m = re.search(r"project\s*\([^)]*?VERSION\s+([0-9][0-9.]*)", cmake.read_text(errors="replace"), re.I)
        if m:
            return m.group(1)
    return None


def ci_pin_rows(src: Path) -> list[Row]:
    rows = []
    pins = src / ".ci" / "docker" / "ci_commit_pins"
    for f in sorted(pins.glob("*.txt")) if pins.is_dir() else []:
        lines = f.read_text().strip().splitlines()
        rows.append(Row(f.stem, lines[0].strip() if lines else "", f.relative_to(src).as_posix()))
    return rows


_VERSION_ASSIGN = re.compile(
    r"""^\s*(?:export\s+|local\s+|readonly\s+|declare\s+\S+\s+)?
        ([A-Z][A-Z0-9_]*?)_VERSION\s*=\s*["']?([0-9][A-Za-z0-9.+\-]*)["']?""",
    re.X | re.M,
)


def install_script_rows(src: Path) -> list[Row]:
    rows = []
    common = src / ".ci" / "docker" / "common"
    for f in sorted(common.glob("install_*.sh")) if common.is_dir() else []:
        seen: dict[tuple[str, str], None] = {}
        for var, value in _VERSION_ASSIGN.findall(f.read_text(errors="replace")):
            seen.setdefault((var.lower(), value), None)
        by_var: dict[str, list[str]] = {}
        for var, value in seen:
            by_var.setdefault(var, []).append(value)
        for var, values in by_var.items():
            rows.append(Row(var, ", ".join(values), f.relative_to(src).as_posix()))
    return rows


_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._\-]*)\s*(\[[^\]]*\])?\s*([^;#]*)")


def requirement_rows(src: Path) -> list[Row]:
    rows = []
    req = src / "requirements.txt"
    if req.is_file():
        for line in req.read_text().splitlines():
            if not line.strip() or line.lstrip().startswith(("#", "-")):
                continue
            m = _REQ.match(line)
            if m:
                rows.append(Row(m.group(1), m.group(3).strip() or "(any)", "requirements.txt"))
    pyproject = src / "pyproject.toml"
    if pyproject.is_file():
        for section, specs in pyproject_requirements(pyproject.read_text()).items():
            for spec in specs:
                m = _REQ.match(spec)
                if m:
                    rows.append(Row(m.group(1), m.group(3).strip() or "(any)", f"pyproject.toml {section}"))
    return rows


def pyproject_requirements(text: str) -> dict[str, list[str]]:
    """The build requirements and dependencies a pyproject.toml declares."""
    result: dict[str, list[str]] = {}
    if sys.version_info >= (3, 11):
        import tomllib

        data = tomllib.loads(text)
        for section, key in (("build-system", "requires"), ("project", "dependencies")):
            values = data.get(section, {}).get(key)
            if values:
                result[f"[{section}] {key}"] = list(values)
        return result
    for section, key in (("build-system", "requires"), ("project", "dependencies")):  # by regex
        m = re.search(rf"^\[{re.escape(section)}\][^\[]*?^{key}\s*=\s*\[(.*?)\]", text, re.M | re.S)
        if m:
            result[f"[{section}] {key}"] = re.findall(r"[\"']([^\"']+)[\"']", m.group(1))
    return result


def upstream_rows(src: Path) -> list[Row]:
    return submodule_rows(src) + ci_pin_rows(src) + install_script_rows(src) + requirement_rows(src)


# -- this feedstock ------------------------------------------------------------------------------

_META_REQ = re.compile(r"^\s*-\s+([A-Za-z0-9][A-Za-z0-9._\-]*)(?:\s+([^#\s][^#]*?))?\s*(?:#.*)?$")
_JINJA_SET = re.compile(r"""\{%-?\s*set\s+(\w+)\s*=\s*["']([^"']*)["']\s*-?%\}""")


def requirement_lines(meta_text: str) -> list[str]:
    """The lines inside ``requirements:`` blocks (top level and per output)."""
    lines, block_indent = [], None
    for line in meta_text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "{%")):
            continue
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and indent <= block_indent:
            block_indent = None
        if re.match(r"^(- )?requirements:\s*$", stripped):
            block_indent = indent
            continue
        if block_indent is not None:
            lines.append(line)
    return lines


def recipe_specs(feedstock: Path) -> dict[str, list[str]]:
    """name -> version specs in recipe/meta.yaml requirement lists (``{% set %}`` values filled in)."""
    meta = feedstock / "recipe" / "meta.yaml"
    specs: dict[str, list[str]] = {}
    if not meta.is_file():
        return specs
    text = meta.read_text()
    variables = dict(_JINJA_SET.findall(text))
    for line in requirement_lines(text):
        m = _META_REQ.match(line)
        if not m:
            continue
        spec = re.sub(
            r"\{\{\s*(\w+)\s*\}\}",
            lambda v: variables.get(v.group(1), v.group(0)),
            (m.group(2) or "").strip(),
        )
        if spec and spec not in specs.setdefault(norm(m.group(1)), []):
            specs[norm(m.group(1))].append(spec)
    return specs


def config_values(feedstock: Path) -> dict[str, list[str]]:
    values: dict[str, list[str]] = {}
    for config in list_configs(feedstock):
        for key, items in config.values.items():
            bucket = values.setdefault(norm(key), [])
            bucket.extend(v for v in items if v not in bucket)
    return values


def conda_names(upstream_name: str) -> tuple[str, ...]:
    """Conda package names to look up for an upstream name (``nccl-cu12`` -> ``nccl``)."""
    key = norm(upstream_name)
    for candidate in (key, key[3:] if key.startswith("lib") else key):
        for stem, names in CONDA_NAMES.items():
            if candidate == stem or candidate.startswith(stem + "-"):
                return names
    return (key,)


def fill_ours(rows: list[Row], feedstock: Path) -> list[Row]:
    specs = recipe_specs(feedstock)
    values = config_values(feedstock)
    for row in rows:
        names = list(dict.fromkeys(norm(n) for n in conda_names(row.package)))
        row.recipe = "; ".join(s for n in names for s in specs.get(n, []))
        row.configs = ", ".join(v for n in names for v in values.get(n, []))
    return rows


def markdown(rows: list[Row]) -> str:
    header = ("Package", "Upstream", "Recipe", "Configs", "Source")
    table = [header] + [(r.package, r.upstream, r.recipe, r.configs, f"`{r.source}`") for r in rows]
    widths = [max(len(str(line[i])) for line in table) for i in range(len(header))]

    def fmt(cells: tuple[str, ...]) -> str:
        return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"

    out = [fmt(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(fmt(line) for line in table[1:])
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("source", type=Path, help="PyTorch source checkout or extracted release tarball")
    p.add_argument("--feedstock", type=Path, default=REPO, help="default: this feedstock")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a Markdown table")
    ns = p.parse_args(argv)
    if not ns.source.is_dir():
        raise UsageError(f"{ns.source} is not a directory")
    if not (ns.feedstock / "recipe" / "meta.yaml").is_file():
        raise UsageError(f"{ns.feedstock} is not a feedstock (no recipe/meta.yaml)")
    rows = fill_ours(upstream_rows(ns.source), ns.feedstock)
    if not rows:
        raise UsageError(f"nothing found in {ns.source} (not a PyTorch source tree?)")
    print(json.dumps([asdict(r) for r in rows], indent=2) if ns.json else markdown(rows))
    return 0
