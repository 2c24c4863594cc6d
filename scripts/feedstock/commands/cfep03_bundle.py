#!/usr/bin/env python3
"""Check that build_artifacts/ holds every package the configs produce, and bundle them for CFEP-03.

    python -m feedstock cfep03-bundle                          # every linux config
    python -m feedstock cfep03-bundle linux_64_cuda12.6 --channel my-anaconda-user
    python -m feedstock render linux_64 --json > expected.json
    python -m feedstock cfep03-bundle --expected expected.json  # skip the (slow) rendering
    python -m feedstock cfep03-bundle --artifacts /mnt/m1/build_artifacts --artifacts /mnt/m2/build_artifacts

Several ``--artifacts`` dirs (one per machine of a ``build_all.py --shard I/N`` run) merge into one
bundle, written in the first. Each config must have been built (its build-locally done marker)
in exactly one of them: a config built nowhere or on two machines, or a package file in two
dirs, is refused before anything is written.

The expected packages come from the render library (``scripts/feedstock/render.py``):
``<subdir>/<name>-<version>-<build_string>.conda`` per output. Build-string hashes are not
reproducible exactly (the renderer models conda-build's hash inputs), so packages are matched on
subdir, name, version and the build string with its ``h<hash>`` part masked; the build number is
compared too when ``build_artifacts/<subdir>/repodata.json`` (written by conda-build's indexing)
lists the file, and reported as unchecked otherwise. Matching counts duplicates: two outputs with
the same masked key need two files.

Writes ``build_artifacts/cfep03/SHA256SUMS`` (sha256sum format), ``manifest.json``,
``build_logs.zip`` (``build_artifacts/logs/*.log*`` and ``build_times.*`` from build_all.py,
plus ``*-log.txt``) and
``admin-request.yml`` (conda-forge/admin-requests ``cfep3_copy`` format), then prints, but never
runs, the upload commands. Exit status: 0 complete, 1 packages missing (or a build number
differs), 2 usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from feedstock.configs import ConfigError, list_configs, resolve_configs
from feedstock.errors import FeedstockError, UsageError
from feedstock.outputs import load_outputs
from feedstock.paths import DONE_MARKER_DIR, REPO
from feedstock.specs import mask_hash
from feedstock.wheel_files import sha256_of

PROG = "feedstock cfep03-bundle"

PACKAGE_SUFFIXES = (".conda", ".tar.bz2")
CFEP03_URL = "https://github.com/conda-forge/cfep/blob/main/cfep-03.md"
ADMIN_REQUESTS_URL = "https://github.com/conda-forge/admin-requests"


@dataclass(frozen=True)
class Key:
    subdir: str
    name: str
    version: str
    masked_build: str

    def __str__(self) -> str:
        return f"{self.subdir}/{self.name}-{self.version}-{self.masked_build}"


@dataclass
class Expected:
    key: Key
    build_number: int
    config: str
    filename: str  # the rendered name, hash included


@dataclass
class Found:
    key: Key
    path: Path  # relative to its build_artifacts/
    build_number: int | None  # from repodata.json, when listed there
    base: Path = Path()  # the build_artifacts dir it lies in

    @property
    def file(self) -> Path:
        return self.base / self.path


def split_dist(filename: str) -> tuple[str, str, str] | None:
    """``pytorch-2.13.0-cpu_mkl_py312_h1234567_100.conda`` -> (name, version, build string)."""
    for suffix in PACKAGE_SUFFIXES:
        if filename.endswith(suffix):
            stem = filename[: -len(suffix)]
            parts = stem.rsplit("-", 2)
            return (parts[0], parts[1], parts[2]) if len(parts) == 3 else None
    return None


def expected_from_outputs(outputs: Iterable[dict[str, Any]]) -> list[Expected]:
    result = []
    for out in outputs:
        key = Key(out["subdir"], out["name"], out["version"], mask_hash(out["build_string"]))
        fn = f"{out['subdir']}/{out['name']}-{out['version']}-{out['build_string']}.conda"
        result.append(Expected(key, int(out["build_number"]), out.get("config", "?"), fn))
    return result


def render_expected(root: Path, names: list[str]) -> list[Expected]:
    try:
        from feedstock.render import render_config
    except ImportError as exc:
        raise FeedstockError(
            f"the render library needs jinja2 and pyyaml ({exc}); "
            "install them (python3 -m pip install jinja2 pyyaml) or pass --expected"
        ) from None
    outputs: list[dict[str, Any]] = []
    for i, name in enumerate(names, 1):
        print(f"rendering [{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
        for out in render_config(root / ".ci_support" / f"{name}.yaml", root / "recipe"):
            outputs.append(out.to_json())
    return expected_from_outputs(outputs)


def scan_artifacts(artifacts: Path) -> list[Found]:
    found = []
    for subdir in sorted(p for p in artifacts.iterdir() if p.is_dir()) if artifacts.is_dir() else []:
        numbers: dict[str, int] = {}
        repodata = subdir / "repodata.json"
        if repodata.is_file():
            try:
                data = json.loads(repodata.read_text())
            except (OSError, ValueError) as exc:
                raise FeedstockError(f"cannot read {repodata}: {exc}") from None
            for section in ("packages", "packages.conda"):
                for fn, rec in (data.get(section) or {}).items():
                    numbers[fn] = int(rec.get("build_number", -1))
        for path in sorted(subdir.iterdir()):
            parts = split_dist(path.name) if path.is_file() else None
            if parts is None:
                continue
            name, version, build = parts
            key = Key(subdir.name, name, version, mask_hash(build))
            found.append(Found(key, path.relative_to(artifacts), numbers.get(path.name), artifacts))
    return found


def built_configs(artifacts: Path) -> set[str]:
    """The configs build-locally.py finished in this build_artifacts dir (its done markers)."""
    markers = artifacts / DONE_MARKER_DIR.relative_to(DONE_MARKER_DIR.parts[0])
    return {p.stem for p in markers.glob("*.json")} if markers.is_dir() else set()


def check_machines(dirs: Sequence[Path], names: Sequence[str]) -> None:
    """Every config built in exactly one of ``dirs``, no package file in two: else a one-line error."""
    where: dict[str, list[int]] = {}
    for i, artifacts in enumerate(dirs, 1):
        for name in built_configs(artifacts):
            where.setdefault(name, []).append(i)
    twice = sorted(n for n in names if len(where.get(n, [])) > 1)
    if twice:
        raise UsageError(
            f"config {twice[0]} was built in several dirs (#{', #'.join(map(str, where[twice[0]]))}); "
            "keep one (a shard split gives each config to one machine)"
        )
    nowhere = sorted(n for n in names if n not in where)
    if nowhere:
        more = f" (and {len(nowhere) - 1} more)" if len(nowhere) > 1 else ""
        raise UsageError(f"config {nowhere[0]}{more} was built in none of the {len(dirs)} dirs")
    seen: dict[Path, Path] = {}
    for artifacts in dirs:
        for found in scan_artifacts(artifacts):
            if found.path in seen:
                raise UsageError(f"{found.path} is in {seen[found.path]} and in {artifacts}: keep one")
            seen[found.path] = artifacts


@dataclass
class Report:
    matched: list[tuple[Expected, Found]]
    missing: list[Expected]
    unexpected: list[Found]
    wrong_number: list[tuple[Expected, Found]]

    @property
    def complete(self) -> bool:
        return not self.missing and not self.wrong_number


def compare(expected: list[Expected], found: list[Found]) -> Report:
    pool: dict[Key, list[Found]] = {}
    for f in found:
        pool.setdefault(f.key, []).append(f)
    matched, missing, wrong = [], [], []
    for exp in expected:
        candidates = pool.get(exp.key) or []
        # prefer a file whose recorded build number agrees
        candidates.sort(key=lambda f: f.build_number != exp.build_number)
        if not candidates:
            missing.append(exp)
            continue
        f = candidates.pop(0)
        matched.append((exp, f))
        if f.build_number is not None and f.build_number != exp.build_number:
            wrong.append((exp, f))
    unexpected = [f for fs in pool.values() for f in fs]
    return Report(matched, missing, sorted(unexpected, key=lambda f: str(f.path)), wrong)


def write_bundle(
    artifacts: Path, report: Report, channel: str, label: str, more: Sequence[Path] = ()
) -> dict[str, Path]:
    """The bundle in ``artifacts/cfep03``; logs of the ``more`` dirs go in as ``machine<N>/...``."""
    out_dir = artifacts / "cfep03"
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = []
    for exp, f in sorted(report.matched, key=lambda m: str(m[1].path)):
        path = f.file
        entries.append(
            {
                "file": f.path.as_posix(),
                "sha256": sha256_of(path),
                "size": path.stat().st_size,
                "config": exp.config,
                "build_number": exp.build_number,
            }
        )
    sums = out_dir / "SHA256SUMS"
    sums.write_text("".join(f"{e['sha256']}  {e['file']}\n" for e in entries))
    manifest = out_dir / "manifest.json"
    manifest.write_text(json.dumps({"label": label, "packages": entries}, indent=2) + "\n")
    request = out_dir / "admin-request.yml"
    lines = [
        "action: cfep3_copy",
        "anaconda_org_packages:",
        *(f"  - package: {channel}/label/{label}/{e['file']}\n    sha256: {e['sha256']}" for e in entries),
        "to_anaconda_org_label: main",
    ]
    request.write_text("\n".join(lines) + "\n")
    logs = out_dir / "build_logs.zip"
    with zipfile.ZipFile(logs, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for i, base in enumerate([artifacts, *more], 1):
            for path in log_files(base):
                zf.write(path, path.name if not more else f"machine{i}/{path.name}")
    return {"SHA256SUMS": sums, "manifest": manifest, "admin-request": request, "logs": logs}


def log_files(artifacts: Path) -> list[Path]:
    log_dir = artifacts / "logs"
    candidates = sorted(log_dir.glob("*.log*")) if log_dir.is_dir() else []
    # build_all.py's per-config build times travel with the logs they summarise
    candidates += sorted(log_dir.glob("build_times.*")) if log_dir.is_dir() else []
    candidates += sorted(artifacts.glob("*-log.txt"))
    return [p for p in candidates if p.is_file() and p.suffix != ".zip"]


def upload_commands(report: Report, channel: str, label: str, root: Path | None = None) -> list[str]:
    if root is None:
        files = sorted(f"build_artifacts/{f.path.as_posix()}" for _, f in report.matched)
    else:
        files = sorted(shown(f.file, root) for _, f in report.matched)
    names = sorted({(e.key.name, e.key.version) for e, _ in report.matched})
    lines = [
        f"# CFEP-03 ({CFEP03_URL}): the delegate who built the packages uploads them to their own",
        f"# anaconda.org channel under the label '{label}', posts the logs archive and the",
        "# SHA256SUMS in the feedstock PR, and a core member reviews and copies them. Not run:",
        "anaconda login",
        f"anaconda upload --user {channel} --label {label} \\",
        *(f"    {fn} \\" for fn in files[:-1]),
        *(f"    {fn}" for fn in files[-1:]),
        "",
        "# core member, option 1 (CFEP-03): copy from the delegate's label to conda-forge/main",
        *(
            f"anaconda copy --from-label {label} --to-label main --to-owner conda-forge "
            f"{channel}/{name}/{version}"
            for name, version in names
        ),
        "",
        "# core member, option 2 (CFEP-03): upload the reviewed files directly",
        "# anaconda upload --user conda-forge <the files above>",
        "",
        f"# or request the copy through {ADMIN_REQUESTS_URL}: add",
        "# build_artifacts/cfep03/admin-request.yml as requests/<feedstock>-cfep3.yml (action",
        "# cfep3_copy) with links to the PR and the logs.",
    ]
    return lines


def shown(path: Path, root: Path) -> str:
    """``path`` relative to the feedstock when it is inside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("configs", nargs="*", help="config names or aliases (default: every linux config)")
    p.add_argument("--expected", type=Path, help="JSON list of outputs (python -m feedstock render --json)")
    p.add_argument(
        "--artifacts",
        type=Path,
        action="append",
        help="a build_artifacts dir (default: <feedstock>/build_artifacts); repeat to merge machines",
    )
    p.add_argument("--channel", default="<your-anaconda-user>", help="anaconda.org user for the upload")
    p.add_argument("--label", default="cfep03", help="anaconda.org label (default: cfep03)")
    p.add_argument("--feedstock", type=Path, default=REPO, help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    root = ns.feedstock.resolve()
    dirs = [d.resolve() for d in ns.artifacts or [root / "build_artifacts"]]
    artifacts = dirs[0]
    if len(set(dirs)) != len(dirs):
        raise UsageError("an --artifacts dir is given twice")
    if any(not d.is_dir() for d in dirs):
        raise UsageError(f"--artifacts {next(d for d in dirs if not d.is_dir())}: no such directory")
    configs = list_configs(root)
    if ns.configs:
        chosen = {c.name: None for name in ns.configs for c in resolve_configs(name, configs)}
        names = list(chosen)
    else:
        names = [c.name for c in configs if c.name.startswith("linux_")]
    if ns.expected:
        outputs = load_outputs(ns.expected)
        if ns.configs:
            outputs = [o for o in outputs if o.get("config") in set(names)]
        expected = expected_from_outputs(outputs)
    else:
        if not names:
            raise ConfigError(f"no linux configs in {shown(root / '.ci_support', root)}/ (rerender first?)")
        expected = render_expected(root, names)

    if len(dirs) > 1:
        check_machines(dirs, sorted({e.config for e in expected}))
    report = compare(expected, [f for d in dirs for f in scan_artifacts(d)])
    where = shown(artifacts, root) if len(dirs) == 1 else f"{len(dirs)} build_artifacts dirs"
    print(f"expected {len(expected)} package(s) from {len(names)} config(s) in {where}")
    print(f"  present:    {len(report.matched)}")
    print(f"  missing:    {len(report.missing)}")
    for exp in report.missing:
        print(f"    MISSING {exp.key}.conda  (build number {exp.build_number}; config {exp.config})")
    for exp, f in report.wrong_number:
        print(f"    BUILD NUMBER {f.path}: {f.build_number}, expected {exp.build_number}")
    unchecked = sum(f.build_number is None for _, f in report.matched)
    if unchecked:
        print(f"  build numbers not checked for {unchecked} file(s) (no repodata.json entry)")
    print(f"  unexpected: {len(report.unexpected)}")
    for f in report.unexpected:
        print(f"    UNEXPECTED {f.path}")

    written = write_bundle(artifacts, report, ns.channel, ns.label, dirs[1:])
    for what, path in written.items():
        print(f"wrote {what}: {shown(path, root)}")
    if not report.complete:
        print("INCOMPLETE: build the missing configs (python -m feedstock build-all) before uploading")
        return 1
    print("\ncomplete. Upload commands (printed, not run):\n")
    print("\n".join(upload_commands(report, ns.channel, ns.label, root if len(dirs) > 1 else None)))
    return 0
