"""The recipe's split spec (``recipe/split_spec.json``, read by ``megabuild.split.spec``) as the
version-bump check asks it: where a path goes, what the pytorch wheel's ``wheel.exclude`` leaves
out. megabuild lives in ``recipe/`` (conda-build sees only that) and is
installed beside this package by the feedstock's ``pyproject.toml``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.pipeline.wheel_settings import libtorch_excludes
from megabuild.split.spec import Spec, compile_patterns, load_spec

from ..errors import FeedstockError


class SpecUnavailable(FeedstockError):
    """The split spec cannot be read, or has no rules for a platform."""


@dataclass(frozen=True)
class Placement:
    """Where the split puts one path of the torch/ tree."""

    output: str | None  # None: no output can take it
    problem: str = ""  # why not: a conflict of rules, or no rule in a strict area


class SplitSpec:
    """``recipe/split_spec.json`` bound to one target platform (megabuild.split.spec.Spec)."""

    def __init__(self, path: Path, target_platform: str) -> None:
        try:
            self.spec: Spec = load_spec(path, target_platform)
        except MegabuildError as exc:
            raise SpecUnavailable(str(exc)) from None

    def place(self, relpath: str) -> Placement:
        """``relpath`` is relative to ``torch/``."""
        found = self.spec.classify(relpath)
        if found.conflict:
            outputs = sorted({rule.output for rule in found.rules})
            return Placement(None, f"rules of {' and '.join(outputs)} match")
        if found.unmatched:
            return Placement(None, "no rule matches in a strict area")
        return Placement(str(found.output))

    def install_path(self, relpath: str) -> str | None:
        """Where ``split install`` puts the staged ``relpath`` in the prefix (Windows: under
        ``Library/``); ``None`` when no install root takes it."""
        placed = self.spec.install_path(relpath)
        return None if placed is None else str(placed)

    def wheel_excluded(self, paths: Iterable[str]) -> set[str]:
        """The wheel paths the pytorch step's per-Python ``wheel.exclude`` leaves out
        (megabuild.pipeline.wheel_settings: everything the spec moves out of pytorch)."""
        pattern = compile_patterns(libtorch_excludes(self.spec))
        return {path for path in paths if pattern.match(path)}

    def unmet_required(self, relpaths: list[str], cuda: bool) -> list[str]:
        """Patterns of required rules that match none of ``relpaths`` (the split would stop)."""
        return [
            str(rule.shown or rule.pattern)
            for rule in self.spec.rules
            if rule.required_for(cuda) and not any(rule.matches(rel) for rel in relpaths)
        ]
