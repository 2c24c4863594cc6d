"""Every recipe patch dry-run against the files each new wheel holds (python -m feedstock check-patches).

Each wheel on its own (check_patches.py's ``--per-wheel``): a patched CMake template is
configured differently per platform, and CUDA-only files are only in the Linux wheels.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..patch_check import FileResult, PatchResult, check
from .report import Finding, Level

SECTION = "patches"
_FAILED_HUNK = re.compile(r"^Hunk #\d+ FAILED at \d+", re.M)


def _why(file: FileResult) -> str:
    """patch's own words for what failed: its FAILED lines, else its last line."""
    failed = _FAILED_HUNK.findall(file.message)
    if failed:
        return "; ".join(failed)
    lines = [line for line in file.message.splitlines() if line.strip()]
    return lines[-1] if lines else "does not apply"


def _failures(patch: str, outcomes: dict[str, PatchResult]) -> list[Finding]:
    """One action per file and reason, naming the wheels it fails on."""
    wheels_of: dict[str, list[str]] = {}
    for subdir, outcome in outcomes.items():
        for file in outcome.files:
            if not file.ok:
                wheels_of.setdefault(f"{file.path}: {_why(file)}", []).append(subdir)
    return [
        Finding(SECTION, Level.ACTION, f"{patch}: {what} ({', '.join(subdirs)})")
        for what, subdirs in wheels_of.items()
    ]


def _applies(patch: str, outcomes: dict[str, PatchResult]) -> Finding:
    """One line for a patch that applies everywhere: files checked per wheel, offsets."""
    counts = {subdir: f"{sum(f.reached for f in o.files)}/{len(o.files)}" for subdir, o in outcomes.items()}
    if len(set(counts.values())) == 1:
        checked = f"{next(iter(counts.values()))} files in each of the {len(counts)} wheel(s)"
    else:
        checked = ", ".join(f"{subdir} {count}" for subdir, count in counts.items())
    offsets = [subdir for subdir, o in outcomes.items() if any(f.offsets for f in o.files)]
    reached = any(f.reached for o in outcomes.values() for f in o.files)
    notes = f"; hunks at an offset on {', '.join(offsets)}" if offsets else ""
    notes += "" if reached else "; its files are in no wheel (unverified)"
    level = Level.OK if reached and not offsets else Level.INFO
    return Finding(SECTION, level, f"{patch}: applies; checked {checked}{notes}")


def patch_findings(wheels: Sequence[tuple[str, Path]], patch_dir: Path) -> list[Finding]:
    """``wheels``: (conda platform, wheel) pairs."""
    patches = sorted(patch_dir.glob("*.patch"))
    if not patches:
        return [Finding(SECTION, Level.INFO, f"no patches in {patch_dir}")]
    per_wheel = {subdir: check([wheel], patches) for subdir, wheel in wheels}
    found: list[Finding] = []
    for index, patch in enumerate(patches):
        outcomes = {subdir: results[index] for subdir, results in per_wheel.items()}
        failures = _failures(patch.name, outcomes)
        found += failures or [_applies(patch.name, outcomes)]
    return found
