"""Findings (one line each) and explanations: findings that are known and why, kept as data.

An explanations file is JSON: ``{"explanations": [{"check", "path", "detail", "reason",
"platforms"?}]}``; ``path`` and ``detail`` are globs (``fnmatch``) over the finding's path (relative
to the prefix, ``/``-separated) and its detail text; ``platforms`` lists conda platforms or
families (``linux``) it applies to (default: all). Every explanation must say why (``reason``).
"""

from __future__ import annotations

import fnmatch
import json
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

CHECKS = ("unreadable", "unresolved", "runpath", "prefix", "execstack", "glibc", "cuda-arch", "torch-config")
_KEYS = {"check", "path", "detail", "reason", "platforms"}


@dataclass(frozen=True)
class Finding:
    check: str
    path: str
    detail: str

    def line(self) -> str:
        return f"{self.check}: {self.path}: {self.detail}"


@dataclass(frozen=True)
class Explanation:
    check: str
    path: str
    detail: str
    reason: str
    platforms: tuple[str, ...] = ()

    def applies_to(self, target_platform: str) -> bool:
        family = target_platform.split("-")[0]
        return not self.platforms or target_platform in self.platforms or family in self.platforms

    def explains(self, finding: Finding) -> bool:
        return (
            finding.check == self.check
            and fnmatch.fnmatchcase(finding.path, self.path)
            and fnmatch.fnmatchcase(finding.detail, self.detail)
        )


def load_explanations(path: Path, target_platform: str) -> tuple[Explanation, ...]:
    """The explanations of ``path`` that apply to ``target_platform`` (one-line errors)."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MegabuildError(f"cannot read explanations {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MegabuildError(f"explanations {path} are not valid JSON: {exc}") from None
    items = raw.get("explanations") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise MegabuildError(f"explanations {path}: expected an object with an 'explanations' list")
    return tuple(
        e
        for i, item in enumerate(items)
        if (e := _explanation(item, f"{path.name}[{i}]")).applies_to(target_platform)
    )


def _explanation(item: object, where: str) -> Explanation:
    if not isinstance(item, dict) or set(item) - _KEYS:
        raise MegabuildError(f"explanations {where}: an object with keys {sorted(_KEYS)}")
    values = [
        item.get(key, "*" if key in ("path", "detail") else "")
        for key in ("check", "path", "detail", "reason")
    ]
    if not all(isinstance(v, str) for v in values) or values[0] not in CHECKS or not values[3]:
        raise MegabuildError(
            f"explanations {where}: 'check' is one of {', '.join(CHECKS)} and 'reason' says why"
        )
    platforms = item.get("platforms", [])
    if not isinstance(platforms, list) or not all(isinstance(p, str) for p in platforms):
        raise MegabuildError(f"explanations {where}: 'platforms' is a list of conda platforms or families")
    check, path, detail, reason = (str(v) for v in values)
    return Explanation(check, path, detail, reason, tuple(platforms))


@dataclass(frozen=True)
class Verdict:
    """The findings split into those an explanation covers and the rest."""

    unexplained: tuple[Finding, ...]
    explained: tuple[tuple[Finding, Explanation], ...]
    unused: tuple[Explanation, ...]

    def lines(self, show_explained: bool = False) -> list[str]:
        out = [f.line() for f in self.unexplained]
        if show_explained:
            out += [f"explained: {f.line()} ({e.reason})" for f, e in self.explained]
        return out


def judge(findings: list[Finding], explanations: tuple[Explanation, ...]) -> Verdict:
    unexplained, explained, used = [], [], set()
    for finding in findings:
        match = next((e for e in explanations if e.explains(finding)), None)
        if match is None:
            unexplained.append(finding)
        else:
            explained.append((finding, match))
            used.add(match)
    unused = tuple(e for e in explanations if e not in used)
    return Verdict(tuple(unexplained), tuple(explained), unused)
