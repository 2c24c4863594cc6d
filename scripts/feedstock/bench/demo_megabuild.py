#!/usr/bin/env python3
"""Run the end-to-end megabuild of the miniature PyTorch-shaped fixture and print what it produced.

    python -m feedstock demo-megabuild [--config linux_64_cuda12.6] [--pythons 3.11,3.12] [--keep DIR]

The real recipe scripts (``recipe/build.sh``, ``recipe/install_*.sh``, the ``megabuild`` helpers)
build ``tests/fixture/minitorch`` with the CMake, Ninja and compilers on PATH and the CPythons found
by ``tests/support/pythons.py``; the packages are real ``.conda`` files in a local channel, which
py-rattler solves and installs for each Python before importing ``torch`` there.
Needs: cmake, ninja, a C++ compiler, ``pip install conda-package-handling py-rattler pyyaml jinja2``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from megabuild.model import LIBTORCH, LINALG, PYTORCH, TOP_LEVEL

from feedstock.conda_build_standin import channel, ninja
from feedstock.conda_build_standin.conda_build import RunResult, run_config
from feedstock.conda_build_standin.cpythons import find_cpythons
from feedstock.conda_build_standin.packaging import fmt_size
from feedstock.errors import UsageError

PROG = "feedstock demo-megabuild"

IMPORT = (
    "import json, torch; print(json.dumps({'version': torch.__version__, 'has_magma': torch.cuda.has_magma,"
    " 'ones_sum(3)': torch.ones_sum(3), 'python': torch._C._compiled_python()}))"
)


def report(run: RunResult) -> None:
    print(f"\n== packages ({run.channel})")
    for pkg in run.packages.values():
        size = pkg.conda_file.stat().st_size if pkg.conda_file else 0
        print(f"  {pkg.dist + '.conda':<72} {len(pkg.files):>5} files {fmt_size(size):>10}")
    print(f"  (+ {len(run.stand_ins)} stand-ins: python/numpy per Python, libmagma, empty placeholders)")

    print("\n== ninja edges re-run per step")
    top = run.step(TOP_LEVEL)
    backend = re.findall(r"^\s*\*\*\* (scikit-build-core \S+)", top.log.read_text(errors="replace"), re.M)
    print(f"  (built by {backend[-1] if backend else 'NO scikit-build-core run found'}, every step)")
    for i, edges in enumerate(top.ninja_runs):
        label = "full build" if i == 0 else f"top-level run {i + 1}"
        print(f"  {label:<22} {len(edges):>4} edges  {ninja.by_target(edges)}")
    replayed = run.src_dir / "build" / "magma-linalg" / "commands.json"
    if replayed.is_file():  # CUDA: megabuild magma-linalg, outside ninja
        commands = json.loads(replayed.read_text())
        reaching = ninja.objects_including(run.src_dir / "build", "ATen/cuda/CUDAConfig.h")
        print(
            f"  {'magma variant':<22} {len(commands['compiles']):>4} compiles + 1 link (replayed), 0 edges;"
            f" a USE_MAGMA flip would recompile {len(reaching)} {ninja.by_target(sorted(reaching))}"
        )
    for step in run.steps:
        if step.name == PYTORCH:
            log = step.log.read_text(errors="replace")
            kept = re.search(r"^build state: .*: put back (\d+) outputs", log, re.M)
            note = f"; build-state put back {kept[1]} outputs" if kept else ""
            cleared = "; CACHE CLEARED" if "cleared the CMake cache" in log else "; cache kept"
            packed = re.search(r"^bytes: .*; the wheel packed (\d+ files, [\d,]+ bytes)", log, re.M)
            wheel = f"; wheel packed {packed[1]}" if packed else ""
            compiles = ninja.summary(step.ninja_ran)["compile"]
            print(
                f"  {'pytorch py' + str(step.python):<22} {len(step.ninja_ran):>4} edges  "
                f"{ninja.by_target(step.ninja_ran)}, {compiles} compiles{cleared}{note}{wheel}"
            )
    print("\n== time per step")
    for step in run.steps:
        print(f"  {step.dist or step.name:<72} {step.seconds:6.1f}s")
    print(f"  total {run.seconds:.0f}s")
    if run.anomalies or run.notes:
        print("\n== notes")
        for line in [*run.anomalies, *run.notes]:
            print(f"  - {line}")


def install_and_import(run: RunResult, cuda: bool) -> int:
    failures = 0
    # the driver a machine needs for this config's packages (cuda-version's __cuda constraint)
    versions = {str(o.variant.get("cuda_compiler_version", "None")) for o in run.outputs} - {"None"}
    virtual = {"__cuda": max(versions, default="12.6")} if cuda else {}
    requests: list[list[tuple[str, ...]]] = [[(PYTORCH, f"python {py}.*")] for py in run.pythons]
    if cuda:
        first = sorted(run.pythons)[0]
        requests.append([(PYTORCH, f"python {first}.*", "libtorch-cuda-linalg * *nomagma*")])
    print("\n== solve, install, import")
    for (specs,) in requests:
        name = "-".join(s.split()[-1].strip("*.") for s in specs[1:])
        prefix = run.work / "envs" / name
        try:
            solved = channel.create_env(
                run.channel, list(specs), prefix, run.work / "cache" / "rattler", virtual
            )
        except Exception as exc:
            print(f"  {' + '.join(specs)}: solve/install failed: {exc}")
            failures += 1
            continue
        proc = channel.run_in_env(prefix, IMPORT, run.work / "home")
        ours = {k: v for k, v in solved.items() if k.startswith((PYTORCH, LIBTORCH, "libmagma"))}
        print(f"  {' + '.join(specs)}\n    solved: {ours}")
        if proc.returncode != 0:
            print(f"    import FAILED:\n{proc.stderr}")
            failures += 1
        else:
            print(f"    import torch: {proc.stdout.strip()}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default="linux_64_cuda12.6", help="config file, .ci_support name or alias (first match)"
    )
    parser.add_argument("--pythons", help="comma-separated minor versions (default: all found)")
    parser.add_argument(
        "--python-order",
        default="megabuild-last",
        help="order of the pytorch outputs: megabuild-last (default; conda-build's order changes "
        "from run to run), ascending, or e.g. 3.13,3.12",
    )
    parser.add_argument("--keep", type=Path, help="work directory to keep (default: a temporary one)")
    parser.add_argument("--recipe-dir", type=Path, help=argparse.SUPPRESS)  # debugging a patched copy
    args = parser.parse_args(argv)

    pythons = find_cpythons()
    if args.pythons:
        wanted = args.pythons.split(",")
        pythons = [c for c in pythons if c.short in wanted]
    if not pythons:
        wanted = f" among {args.pythons}" if args.pythons else ""
        raise UsageError(f"no CPython >= 3.10 found{wanted} (pyenv root or MEGABUILD_TEST_PYTHONS)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="megabuild-demo-"))
    extra: dict[str, Any] = {"recipe_dir": args.recipe_dir} if args.recipe_dir else {}
    try:
        run = run_config(args.config, work, pythons=pythons, cpu_count=os.cpu_count() or 2,
                         python_order=args.python_order, **extra)  # fmt: skip
        report(run)
        cuda = any(p.name == LINALG for p in run.packages.values())
        failures = install_and_import(run, cuda)
    finally:
        if args.keep:
            print(f"\nwork dir kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps({"packages": len(run.packages), "seconds": round(run.seconds)}))
    return 1 if failures else 0
