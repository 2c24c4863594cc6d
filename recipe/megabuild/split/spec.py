"""Load and apply the declarative split spec (``recipe/split_spec.json``).

A spec lists rules ``{pattern, output, required, note}``; patterns are globs
relative to the ``torch/`` tree (``*`` and ``?`` stay inside one path segment,
a whole ``**`` segment spans any number of directories). A path matching no
rule belongs to the default output (``pytorch``) unless it lies in a strict
area (``lib/``, ``bin/``, ``share/``), where every file needs an explicit rule.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError

DEFAULT_SPEC = Path(__file__).resolve().parents[2] / "split_spec.json"
REQUIRED_VALUES = ("always", "cuda", "cpu", "never")
LINALG = "libtorch-cuda-linalg"
DROPPED = "_dropped"


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Translate a ``/``-separated glob into an anchored regular expression."""
    segments = pattern.split("/")
    out: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".+" if last else "(?:[^/]+/)*")
            continue
        out.append(_translate_segment(segment))
        if not last:
            out.append("/")
    return re.compile("".join(out) + r"\Z")


def _translate_segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[":
            end = segment.find("]", i + 2)
            if end == -1:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                body = body.replace("\\", "\\\\")
                out.append(f"[{'^' if negate else ''}{body}]")
                i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def check_pattern(pattern: object, where: str) -> str:
    """Return *pattern* if it is a glob confined to the tree, else raise."""
    if not isinstance(pattern, str) or not pattern:
        raise MegabuildError(f"{where}: pattern must be a non-empty string")
    if pattern.startswith("/") or "\\" in pattern or re.match(r"^[A-Za-z]:", pattern):
        raise MegabuildError(f"{where}: pattern {pattern!r} is absolute; patterns are relative to torch/")
    segments = pattern.split("/")
    if any(seg in ("..", ".") for seg in segments):
        raise MegabuildError(f"{where}: pattern {pattern!r} escapes the torch/ tree ('..' or '.')")
    if any(seg == "" for seg in segments):
        raise MegabuildError(f"{where}: pattern {pattern!r} has an empty path segment")
    return pattern


@dataclass(frozen=True)
class Rule:
    index: int
    pattern: str
    output: str
    required: str
    note: str
    prefix_link: bool
    regex: re.Pattern[str] = field(compare=False, repr=False)

    def matches(self, relpath: str) -> bool:
        return self.regex.match(relpath) is not None

    def required_for(self, cuda: bool) -> bool:
        return self.required == "always" or self.required == ("cuda" if cuda else "cpu")

    def describe(self) -> str:
        return f"rule {self.index} ({self.pattern!r} -> {self.output})"


@dataclass(frozen=True)
class Classification:
    """Where one path goes and why."""

    output: str
    rules: tuple[Rule, ...]  # the rules that matched (empty: default output)


@dataclass
class Spec:
    path: Path
    default_output: str
    strict_areas: tuple[str, ...]
    outputs: dict[str, dict[str, Any]]
    rules: tuple[Rule, ...]
    _strict: tuple[re.Pattern[str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self._strict = tuple(compile_pattern(p) for p in self.strict_areas)

    @property
    def staged_outputs(self) -> tuple[str, ...]:
        """Outputs whose files are moved out of the tree (all but the default)."""
        return tuple(name for name in self.outputs if name != self.default_output)

    def variants(self, output: str) -> tuple[str, ...]:
        return tuple(self.outputs.get(output, {}).get("variants", ()))

    def in_strict_area(self, relpath: str) -> bool:
        return any(regex.match(relpath) for regex in self._strict)

    def classify(self, relpath: str) -> Classification | list[Rule] | None:
        """Classify *relpath*: a :class:`Classification`, the conflicting rules
        (matches of different outputs), or ``None`` (unmatched in a strict area)."""
        matched = tuple(rule for rule in self.rules if rule.matches(relpath))
        outputs = {rule.output for rule in matched}
        if len(outputs) > 1:
            return list(matched)
        if matched:
            return Classification(matched[0].output, matched)
        if self.in_strict_area(relpath):
            return None
        return Classification(self.default_output, ())

    def staging_name(self, output: str, variant: str | None) -> str:
        """Directory name of *output* under the staging root."""
        if self.variants(output):
            if variant is None:
                raise MegabuildError(f"output {output} needs a variant ({'/'.join(self.variants(output))})")
            return f"{output}-{variant}"
        return output

    def parse_staging_name(self, name: str) -> tuple[str, str | None] | None:
        """Inverse of :meth:`staging_name`; ``None`` for unknown names."""
        for output in self.outputs:
            for variant in self.variants(output):
                if name == f"{output}-{variant}":
                    return output, variant
            if name == output and not self.variants(output):
                return output, None
        return None


def load_spec(path: str | Path | None = None) -> Spec:
    """Read and validate a spec; every problem is a one-line :class:`MegabuildError`."""
    spec_path = Path(path) if path is not None else DEFAULT_SPEC
    try:
        raw = json.loads(spec_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MegabuildError(f"cannot read split spec {spec_path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MegabuildError(f"split spec {spec_path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise MegabuildError(f"split spec {spec_path}: top level must be an object")
    where = f"split spec {spec_path.name}"
    if raw.get("version") != 1:
        raise MegabuildError(f"{where}: unsupported version {raw.get('version')!r} (expected 1)")

    outputs = raw.get("outputs")
    if not isinstance(outputs, dict) or not outputs:
        raise MegabuildError(f"{where}: 'outputs' must be a non-empty object")
    for name, info in outputs.items():
        if not isinstance(info, dict):
            raise MegabuildError(f"{where}: output {name!r} must be an object")
        if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*", name):
            raise MegabuildError(f"{where}: bad output name {name!r}")
        variants = info.get("variants", [])
        if not isinstance(variants, list) or not all(
            isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.]+", v) for v in variants
        ):
            raise MegabuildError(f"{where}: output {name!r}: 'variants' must be a list of simple names")

    default_output = raw.get("default_output")
    if default_output not in outputs:
        raise MegabuildError(f"{where}: 'default_output' {default_output!r} is not a declared output")
    if outputs[default_output].get("variants"):
        raise MegabuildError(f"{where}: the default output cannot have variants")

    strict = raw.get("strict_areas", [])
    if not isinstance(strict, list):
        raise MegabuildError(f"{where}: 'strict_areas' must be a list")
    strict_patterns = []
    for i, item in enumerate(strict):
        pattern = item.get("pattern") if isinstance(item, dict) else item
        strict_patterns.append(check_pattern(pattern, f"{where}: strict area {i}"))

    raw_rules = raw.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise MegabuildError(f"{where}: 'rules' must be a non-empty list")
    rules = []
    for i, item in enumerate(raw_rules):
        label = f"{where}: rule {i}"
        if not isinstance(item, dict):
            raise MegabuildError(f"{label}: must be an object")
        unknown = set(item) - {"pattern", "output", "required", "note", "prefix_link"}
        if unknown:
            raise MegabuildError(f"{label}: unknown keys {sorted(unknown)}")
        pattern = check_pattern(item.get("pattern"), label)
        output = item.get("output")
        if output not in outputs:
            raise MegabuildError(f"{label} ({pattern!r}): unknown output {output!r}")
        required = item.get("required", "never")
        if required not in REQUIRED_VALUES:
            raise MegabuildError(
                f"{label} ({pattern!r}): 'required' must be one of {', '.join(REQUIRED_VALUES)}"
            )
        note = item.get("note", "")
        if not isinstance(note, str):
            raise MegabuildError(f"{label} ({pattern!r}): 'note' must be a string")
        if output == DROPPED and not note:
            raise MegabuildError(f"{label} ({pattern!r}): a rule that drops files must say why ('note')")
        prefix_link = item.get("prefix_link", False)
        if not isinstance(prefix_link, bool) or (prefix_link and output != default_output):
            raise MegabuildError(f"{label} ({pattern!r}): 'prefix_link' is a boolean for {default_output}")
        rules.append(Rule(i, pattern, output, required, note, prefix_link, compile_pattern(pattern)))
    return Spec(spec_path, default_output, tuple(strict_patterns), dict(outputs), tuple(rules))


def format_paths(paths: list[str], limit: int = 8) -> str:
    """``a, b, c (and N more)`` for error messages that must stay on one line."""
    shown = ", ".join(paths[:limit])
    return shown + (f" (and {len(paths) - limit} more)" if len(paths) > limit else "")
