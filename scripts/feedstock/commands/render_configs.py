#!/usr/bin/env python
"""Render recipe/meta.yaml for one or more .ci_support configs, like conda-build would (offline).

    python -m feedstock render linux_64_cuda12.6          # all linux-64 configs with CUDA 12.6
    python -m feedstock render osx_arm64 --json           # JSON list of output objects
    python -m feedstock render <.ci_support file stem>

<config> is a .ci_support file name (without .yaml) or an alias ``<platform>[_token...]`` with
tokens cudaX.Y, cpu, mkl, generic, pyX.Y, key=value. See scripts/feedstock/render.py for what is
modelled (and what is not).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from feedstock.configs import list_configs, resolve_configs, short_alias
from feedstock.paths import REPO
from feedstock.render import RenderedOutput, render_config

PROG = "feedstock render"


def _format_text(alias: str, config_name: str, outputs: list[RenderedOutput]) -> str:
    lines = [f"== {config_name}  ({alias}, {len(outputs)} outputs)"]
    for out in outputs:
        lines.append(f"{out.name} {out.version} {out.build_string}  (build number {out.build_number})")
        used = ", ".join(f"{k}={v}" for k, v in out.variant.items())
        lines.append(f"    variant: {used}")
        if out.script:
            lines.append(f"    script: {out.script}")
        for section in ("build", "host", "run", "run_constrained"):
            specs = out.requirements.get(section) or []
            if specs:
                lines.append(f"    {section}:")
                lines.extend(f"      - {spec}" for spec in specs)
        if out.track_features:
            lines.append(f"    track_features: {', '.join(out.track_features)}")
        lines.append("    depends (finalized model):")
        lines.extend(f"      - {spec}" for spec in out.depends)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "config", help=".ci_support file name (without .yaml) or an alias such as linux_64_cuda12.6"
    )
    parser.add_argument("--json", action="store_true", help="print a JSON list of output objects")
    parser.add_argument(
        "--feedstock",
        type=Path,
        default=REPO,
        help="feedstock root (default: this checkout)",
    )
    args = parser.parse_args(argv)

    configs = list_configs(args.feedstock)
    selected = resolve_configs(args.config, configs)
    rendered = [
        (short_alias(config, configs), config.name, render_config(config.path, args.feedstock / "recipe"))
        for config in selected
    ]

    if args.json:
        print(json.dumps([o.to_json() for _, _, outs in rendered for o in outs], indent=2))
    else:
        print("\n\n".join(_format_text(alias, name, outs) for alias, name, outs in rendered))
    return 0
