"""Load and apply the declarative split spec (``recipe/split_spec.json``).

A spec lists rules ``{pattern, output, required, note}``; patterns are globs
relative to the ``torch/`` tree (``*`` and ``?`` stay inside one path segment,
a whole ``**`` segment spans any number of directories). A path matching no
rule belongs to the default output (``pytorch``) unless it lies in a strict
area (``lib/``, ``bin/``, ``share/``), where every file needs an explicit rule.

The spec is bound to one conda target platform (``linux-64``, ``osx-arm64``,
...) when loaded: ``{name}`` placeholders in patterns expand to the values the
spec's ``platforms`` table gives the platform's family, or without one
:mod:`megabuild.model`'s (``{shlib}``: ``.so`` and ``.so.*`` on linux, ``.dylib``
and ``.*.dylib`` on osx), and rules with a ``platforms`` list apply only there.
"""

from __future__ import annotations

import itertools
import json
import platform
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.model import DROPPED, LINALG, families

__all__ = ["DROPPED", "LINALG"]  # re-exported for the split's modules

DEFAULT_SPEC = Path(__file__).resolve().parents[2] / "split_spec.json"
REQUIRED_VALUES = ("always", "cuda", "cpu", "never")
RULE_KEYS = {"pattern", "output", "required", "note", "prefix_link", "platforms"}
INSTALL_ROOT_KEYS = {"pattern", "dest", "note"}
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TARGET_PLATFORM = re.compile(r"([a-z]+)-([a-z0-9_]+)")
_FAMILY = re.compile(r"[a-z]+")


def host_target_platform() -> str:
    """conda's name for the running machine's platform (the default target)."""
    machine = platform.machine().lower()
    if sys.platform.startswith("linux"):
        arch = {"x86_64": "64", "amd64": "64", "arm64": "aarch64"}.get(machine, machine)
        return f"linux-{arch}"
    if sys.platform == "darwin":
        return "osx-arm64" if machine == "arm64" else "osx-64"
    if sys.platform == "win32":
        return "win-arm64" if machine == "arm64" else "win-64"
    return f"{sys.platform}-{machine or 'unknown'}"


def platform_family(target_platform: str) -> str:
    """``linux`` for ``linux-aarch64``; a one-line error for names that are not conda platforms."""
    match = _TARGET_PLATFORM.fullmatch(target_platform)
    if match is None:
        raise MegabuildError(
            f"target platform {target_platform!r} is not a conda platform such as linux-64 or osx-arm64"
        )
    return match.group(1)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """Translate a ``/``-separated glob into an anchored regular expression."""
    return re.compile(_glob_regex(pattern) + r"\Z")


def compile_patterns(patterns: list[str]) -> re.Pattern[str]:
    """One anchored regular expression matching any of *patterns*."""
    return re.compile("|".join(rf"(?:{_glob_regex(p)}\Z)" for p in patterns))


def _glob_regex(pattern: str) -> str:
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
    return "".join(out)


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
    pattern: str  # as written in the spec (may hold placeholders)
    output: str
    required: str
    note: str
    prefix_link: bool
    regex: re.Pattern[str] = field(compare=False, repr=False)
    shown: str = ""  # the pattern with placeholders expanded for the target platform
    platforms: tuple[str, ...] = ()  # empty: every platform

    def matches(self, relpath: str) -> bool:
        return self.regex.match(relpath) is not None

    def required_for(self, cuda: bool) -> bool:
        return self.required == "always" or self.required == ("cuda" if cuda else "cpu")


@dataclass(frozen=True)
class Classification:
    """Where one path goes and why.

    ``output`` is ``None`` when no single output can take the path: either
    rules of different outputs match it (a conflict: ``rules`` holds them) or
    it lies in a strict area and no rule matches (``rules`` is empty)."""

    output: str | None
    rules: tuple[Rule, ...]  # the rules that matched (empty: default output or unmatched)

    @property
    def conflict(self) -> bool:
        return self.output is None and bool(self.rules)

    @property
    def unmatched(self) -> bool:
        return self.output is None and not self.rules


@dataclass(frozen=True)
class OutputSpec:
    """One entry of the spec's ``outputs`` table."""

    name: str
    variants: tuple[str, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class InstallRoot:
    """Where ``split install`` puts a staged file matching *pattern*: the pattern's literal
    leading directories (``base``) replaced by ``dest`` (``lib/*.dll`` -> ``Library/bin``)."""

    pattern: str
    dest: str
    base: str  # "lib" for "lib/*.dll", "" for "**"
    regex: re.Pattern[str] = field(compare=False, repr=False)

    def place(self, relpath: str) -> str | None:
        """*relpath*'s path in the prefix, or ``None`` if the pattern does not match it."""
        if self.regex.match(relpath) is None:
            return None
        rest = relpath[len(self.base) + 1 :] if self.base else relpath
        return f"{self.dest}/{rest}"


@dataclass
class Spec:
    path: Path
    default_output: str
    strict_areas: tuple[str, ...]
    outputs: dict[str, OutputSpec]
    rules: tuple[Rule, ...]  # only the rules that apply to target_platform, expanded for it
    target_platform: str = field(default_factory=host_target_platform)
    placeholders: dict[str, tuple[str, ...]] = field(default_factory=dict)  # for target_platform
    # the target family's install destinations; empty: every file keeps its tree path
    install_roots: tuple[InstallRoot, ...] = ()
    _strict: tuple[re.Pattern[str], ...] = field(default=(), repr=False)
    _by_head: dict[str, tuple[Rule, ...]] = field(default_factory=dict, repr=False)
    _wild: tuple[Rule, ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        self._strict = tuple(
            compile_patterns(expand_pattern(p, self.placeholders)) for p in self.strict_areas
        )
        # Index the rules by a literal first path segment: a tree has ~12k files and
        # most of them (Python sources, headers) can skip most rules' regexes.
        by_head: dict[str, list[Rule]] = {}
        wild: list[Rule] = []
        for rule in self.rules:
            head = rule.pattern.split("/", 1)[0]
            if re.search(r"[*?\[{]", head):
                wild.append(rule)
            else:
                by_head.setdefault(head, []).append(rule)
        self._by_head = {head: tuple(rules) for head, rules in by_head.items()}
        self._wild = tuple(wild)

    @property
    def staged_outputs(self) -> tuple[str, ...]:
        """Outputs whose files are moved out of the tree (all but the default)."""
        return tuple(name for name in self.outputs if name != self.default_output)

    def variants(self, output: str) -> tuple[str, ...]:
        info = self.outputs.get(output)
        return info.variants if info is not None else ()

    def in_strict_area(self, relpath: str) -> bool:
        return any(regex.match(relpath) for regex in self._strict)

    def classify(self, relpath: str) -> Classification:
        """Classify *relpath* (see :class:`Classification` for conflicts and unmatched paths)."""
        candidates = self._by_head.get(relpath.split("/", 1)[0], ())
        if self._wild:
            candidates = tuple(sorted(candidates + self._wild, key=lambda rule: rule.index))
        matched = tuple(rule for rule in candidates if rule.matches(relpath))
        outputs = {rule.output for rule in matched}
        if len(outputs) > 1:
            return Classification(None, matched)
        if matched:
            return Classification(matched[0].output, matched)
        if self.in_strict_area(relpath):
            return Classification(None, ())
        return Classification(self.default_output, ())

    def install_path(self, relpath: str) -> str | None:
        """Where ``split install`` puts the staged *relpath* in the prefix: the first matching
        install root's destination; the path itself without install roots; ``None`` if the
        target family has install roots and none matches."""
        if not self.install_roots:
            return relpath
        for root in self.install_roots:
            placed = root.place(relpath)
            if placed is not None:
                return placed
        return None

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


def expand_pattern(pattern: str, placeholders: dict[str, tuple[str, ...]]) -> list[str]:
    """Every glob *pattern* stands for: each ``{name}`` replaced by each of its values."""
    names = _PLACEHOLDER.findall(pattern)
    if not names:
        return [pattern]
    pieces = _PLACEHOLDER.split(pattern)  # literal, name, literal, name, ..., literal
    out = []
    for values in itertools.product(*(placeholders[name] for name in names)):
        text = pieces[0]
        for value, literal in zip(values, pieces[2::2]):
            text += value + literal
        out.append(text)
    return out


def show_pattern(pattern: str, placeholders: dict[str, tuple[str, ...]]) -> str:
    """``lib/libc10{.dylib,.*.dylib}`` for ``lib/libc10{shlib}`` on osx (for messages)."""

    def one(match: re.Match[str]) -> str:
        values = placeholders[match.group(1)]
        return values[0] if len(values) == 1 else "{" + ",".join(values) + "}"

    return _PLACEHOLDER.sub(one, pattern)


def _load_platforms(raw: object, where: str) -> dict[str, dict[str, tuple[str, ...]]]:
    """The ``platforms`` table: family -> placeholder -> values (every family defines the same names).
    Without one (the recipe's spec): ``{shlib}`` per family from :mod:`megabuild.model`."""
    if raw is None:
        return {family: {"shlib": globs} for family, globs in families().items()}
    if not isinstance(raw, dict) or not raw:
        raise MegabuildError(f"{where}: 'platforms' must be a non-empty object (family -> placeholders)")
    table: dict[str, dict[str, tuple[str, ...]]] = {}
    for family, info in raw.items():
        if not _FAMILY.fullmatch(family) or not isinstance(info, dict):
            raise MegabuildError(f"{where}: platforms: {family!r} must be a platform family (linux, osx)")
        values: dict[str, tuple[str, ...]] = {}
        for name, alternatives in info.items():
            if name == "note":
                continue
            good = (
                re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name)
                and isinstance(alternatives, list)
                and alternatives
                and all(isinstance(v, str) and v and "/" not in v and "{" not in v for v in alternatives)
            )
            if not good:
                raise MegabuildError(
                    f"{where}: platforms.{family}.{name} must be a non-empty list of strings without '/'"
                )
            values[name] = tuple(alternatives)
        table[family] = values
    names = {frozenset(v) for v in table.values()}
    if len(names) > 1:
        raise MegabuildError(f"{where}: every family in 'platforms' must define the same placeholders")
    return table


def _check_expanded(pattern: object, where: str, table: dict[str, dict[str, tuple[str, ...]]]) -> str:
    """Check *pattern* as written and as expanded for every family in *table*."""
    pattern = check_pattern(pattern, where)
    names = set(_PLACEHOLDER.findall(pattern))
    known = set(next(iter(table.values()))) if table else set()
    if names - known:
        raise MegabuildError(
            f"{where}: pattern {pattern!r} uses unknown placeholder(s) "
            f"{', '.join('{' + n + '}' for n in sorted(names - known))} (the spec's 'platforms' table has "
            f"{', '.join('{' + n + '}' for n in sorted(known)) or 'none'})"
        )
    for placeholders in table.values():
        for expanded in expand_pattern(pattern, placeholders):
            check_pattern(expanded, where)
    return pattern


def _check_rule_platforms(value: object, label: str, families: set[str]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise MegabuildError(f"{label}: 'platforms' must be a non-empty list such as [\"osx\"]")
    for item in value:
        family = item if _FAMILY.fullmatch(item) else platform_family(item)
        if families and family not in families:
            raise MegabuildError(
                f"{label}: platform {item!r} is not in the spec's 'platforms' table "
                f"({', '.join(sorted(families))})"
            )
    return tuple(value)


def applies_to(platforms: tuple[str, ...], target_platform: str) -> bool:
    """A rule's ``platforms`` lists families (``osx``) or platforms (``linux-aarch64``)."""
    return not platforms or target_platform in platforms or platform_family(target_platform) in platforms


def load_spec(path: str | Path | None = None, target_platform: str | None = None) -> Spec:
    """Read and validate a spec and bind it to *target_platform* (default: the running
    machine's); every problem is a one-line :class:`MegabuildError`."""
    spec_path = Path(path) if path is not None else DEFAULT_SPEC
    target = target_platform or host_target_platform()
    family = platform_family(target)
    raw = _read_spec(spec_path)
    where = f"split spec {spec_path.name}"
    if raw.get("version") != 1:
        raise MegabuildError(f"{where}: unsupported version {raw.get('version')!r} (expected 1)")
    outputs = _load_outputs(raw.get("outputs"), where)
    default_output = raw.get("default_output")
    if not isinstance(default_output, str) or default_output not in outputs:
        raise MegabuildError(f"{where}: 'default_output' {default_output!r} is not a declared output")
    if outputs[default_output].variants:
        raise MegabuildError(f"{where}: the default output cannot have variants")

    table = _load_platforms(raw.get("platforms"), where)
    if table and family not in table:
        raise MegabuildError(
            f"{where} has no rules for target platform {target} (its platforms: {', '.join(table)})"
        )
    placeholders = table.get(family, {})
    strict = raw.get("strict_areas", [])
    if not isinstance(strict, list):
        raise MegabuildError(f"{where}: 'strict_areas' must be a list")
    strict_patterns = []
    for i, item in enumerate(strict):
        pattern = item.get("pattern") if isinstance(item, dict) else item
        strict_patterns.append(_check_expanded(pattern, f"{where}: strict area {i}", table))

    raw_rules = raw.get("rules")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise MegabuildError(f"{where}: 'rules' must be a non-empty list")
    context = _RuleContext(where, outputs, default_output, table, target)
    rules = [rule for i, item in enumerate(raw_rules) if (rule := _load_rule(i, item, context)) is not None]
    roots = _load_install_roots(raw.get("install_roots"), where, table).get(family, ())
    return Spec(
        spec_path, default_output, tuple(strict_patterns), outputs, tuple(rules), target, placeholders, roots
    )


def _load_install_roots(
    raw: object, where: str, table: dict[str, dict[str, tuple[str, ...]]]
) -> dict[str, tuple[InstallRoot, ...]]:
    """The ``install_roots`` table: family -> ordered destinations (first match wins)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not raw:
        raise MegabuildError(f"{where}: 'install_roots' must be a non-empty object (family -> list)")
    loaded: dict[str, tuple[InstallRoot, ...]] = {}
    for family, items in raw.items():
        label = f"{where}: install_roots.{family}"
        if not isinstance(family, str) or not _FAMILY.fullmatch(family) or (table and family not in table):
            raise MegabuildError(f"{label}: not a platform family of the spec's 'platforms' table")
        if not isinstance(items, list) or not items:
            raise MegabuildError(f"{label}: must be a non-empty list of {{pattern, dest}}")
        placeholders = table.get(family, {})
        loaded[family] = tuple(
            _load_install_root(item, f"{label}[{i}]", table, placeholders) for i, item in enumerate(items)
        )
    return loaded


def _load_install_root(
    item: object,
    label: str,
    table: dict[str, dict[str, tuple[str, ...]]],
    placeholders: dict[str, tuple[str, ...]],
) -> InstallRoot:
    if not isinstance(item, dict):
        raise MegabuildError(f"{label}: must be an object {{pattern, dest}}")
    unknown = set(item) - INSTALL_ROOT_KEYS
    if unknown:
        raise MegabuildError(f"{label}: unknown keys {sorted(unknown)}")
    pattern = _check_expanded(item.get("pattern"), label, table)
    dest = item.get("dest")
    if not isinstance(dest, str) or re.search(r"[*?\[\]{}\\]", dest) or dest != dest.strip("/"):
        raise MegabuildError(
            f"{label}: 'dest' must be a relative path without wildcards, such as Library/bin"
        )
    if any(seg in ("", ".", "..") for seg in dest.split("/")) or re.match(r"^[A-Za-z]:", dest):
        raise MegabuildError(
            f"{label}: 'dest' {dest!r} must stay inside the prefix (no '', '.', '..', drive)"
        )
    if not isinstance(item.get("note", ""), str):
        raise MegabuildError(f"{label}: 'note' must be a string")
    segments = pattern.split("/")[:-1]
    literal = list(itertools.takewhile(lambda seg: not re.search(r"[*?\[{]", seg), segments))
    regex = compile_patterns(expand_pattern(pattern, placeholders))
    return InstallRoot(pattern, dest, "/".join(literal), regex)


def _read_spec(spec_path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(spec_path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise MegabuildError(f"cannot read split spec {spec_path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise MegabuildError(f"split spec {spec_path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise MegabuildError(f"split spec {spec_path}: top level must be an object")
    return raw


def _load_outputs(outputs: object, where: str) -> dict[str, OutputSpec]:
    if not isinstance(outputs, dict) or not outputs:
        raise MegabuildError(f"{where}: 'outputs' must be a non-empty object")
    loaded: dict[str, OutputSpec] = {}
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
        note = info.get("note", "")
        loaded[name] = OutputSpec(name, tuple(variants), note if isinstance(note, str) else "")
    return loaded


@dataclass(frozen=True)
class _RuleContext:
    """What validating one rule needs from the rest of the spec."""

    where: str
    outputs: dict[str, OutputSpec]
    default_output: str
    table: dict[str, dict[str, tuple[str, ...]]]
    target: str


def _load_rule(index: int, item: object, ctx: _RuleContext) -> Rule | None:
    """The rule at *index* bound to the target platform; ``None`` if it applies elsewhere only."""
    label = f"{ctx.where}: rule {index}"
    if not isinstance(item, dict):
        raise MegabuildError(f"{label}: must be an object")
    unknown = set(item) - RULE_KEYS
    if unknown:
        raise MegabuildError(f"{label}: unknown keys {sorted(unknown)}")
    pattern = _check_expanded(item.get("pattern"), label, ctx.table)
    label = f"{label} ({pattern!r})"
    output = item.get("output")
    if not isinstance(output, str) or output not in ctx.outputs:
        raise MegabuildError(f"{label}: unknown output {output!r}")
    required = item.get("required", "never")
    if required not in REQUIRED_VALUES:
        raise MegabuildError(f"{label}: 'required' must be one of {', '.join(REQUIRED_VALUES)}")
    note = item.get("note", "")
    if not isinstance(note, str):
        raise MegabuildError(f"{label}: 'note' must be a string")
    if output == DROPPED and not note:
        raise MegabuildError(f"{label}: a rule that drops files must say why ('note')")
    prefix_link = item.get("prefix_link", False)
    if not isinstance(prefix_link, bool) or (prefix_link and output != ctx.default_output):
        raise MegabuildError(f"{label}: 'prefix_link' is a boolean for {ctx.default_output}")
    platforms = _check_rule_platforms(item.get("platforms"), label, set(ctx.table))
    if not applies_to(platforms, ctx.target):
        return None  # validated above, but not part of this platform's split
    placeholders = ctx.table.get(platform_family(ctx.target), {})
    regex = compile_patterns(expand_pattern(pattern, placeholders))
    shown = show_pattern(pattern, placeholders)
    return Rule(index, pattern, output, str(required), note, prefix_link, regex, shown, platforms)


def format_paths(paths: list[str], limit: int = 8) -> str:
    """``a, b, c (and N more)`` for error messages that must stay on one line."""
    shown = ", ".join(paths[:limit])
    return shown + (f" (and {len(paths) - limit} more)" if len(paths) > limit else "")
