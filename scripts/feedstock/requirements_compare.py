"""This recipe's requirements compared with conda-forge's pytorch-cpu feedstock, both rendered by
conda-build.

Both recipes are rendered by ``conda_build.api.render`` (``finalize=False``: nothing is solved, so
no channel is needed), each with its own ``.ci_support/<config>.yaml`` as the variant file. Configs
are paired by platform, CUDA major version, BLAS and arm variant (:class:`Pair`), outputs by name
and variant (the Python of a per-Python output, ``magma``/``nomagma`` of the linalg library). What
is compared (:data:`FIELDS`): ``run``, ``run_constrained``, ``run_exports``,
``ignore_run_exports``, ``ignore_run_exports_from``, ``test.requires``, which packages and
variants exist, and the build string's shape.

Specs are normalized before they are compared (:func:`normalize_spec`): each recipe's version,
base build number, CUDA version, BLAS and arm variant become placeholders, a compiler package keeps
only its name, and a pin to a subpackage is its bare name (conda-build leaves ``pin_subpackage`` and
``pin_compatible`` unresolved when it does not finalize). An output whose test phase tests another
output (:data:`TESTED_BY`: conda-forge's ``pytorch-tests``) adds its ``test.requires`` to that
output's.

The result is committed as data (:data:`DATA`): every difference with where it occurs and why.
:func:`check` finds what the data does not explain (a new difference, one without a reason, a
recorded one that no longer occurs, a changed "where"); the cross-check
(``tests/test_requirements_compare.py``, run by ``python -m feedstock cross-check``)
fails on any. ``python -m feedstock requirements-compare --write`` renders again and
rewrites the data, keeping the recorded reasons. docs/packages.md's table is :func:`table_rows`
(``scripts/feedstock/doc_tables.py``).
"""

from __future__ import annotations

import importlib
import json
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from megabuild.model import ARM_VARIANT_KEY, GENERIC_BLAS, PLATFORMS, PYTORCH, SBSA

from feedstock.configs import list_configs
from feedstock.errors import FeedstockError
from feedstock.paths import REPO, TESTS
from feedstock.specs import spec_name

DATA = TESTS / "data" / "requirements-vs-conda-forge.json"
CONDA_FORGE_REPO = "conda-forge/pytorch-cpu-feedstock"
CONDA_FORGE_ENV = "FEEDSTOCK_CONDA_FORGE_FEEDSTOCK"
"""The cross-check's checkout of :data:`CONDA_FORGE_REPO` (``recipe/`` and ``.ci_support/``); the
cross-check runner sets it to its source of that name."""

FIELDS = (
    "run",
    "run_constrained",
    "run_exports",
    "ignore_run_exports",
    "ignore_run_exports_from",
    "test.requires",
)
"""The requirement lists compared, as conda-build's metadata keys below."""
_KEYS = {
    "run": "requirements/run",
    "run_constrained": "requirements/run_constrained",
    "run_exports": "build/run_exports",
    "ignore_run_exports": "build/ignore_run_exports",
    "ignore_run_exports_from": "build/ignore_run_exports_from",
    "test.requires": "test/requires",
}
PACKAGE = "package"
"""The field of a difference in which packages exist (value ``built``)."""
VARIANT = "variant"
"""The field of a difference in an output's variants (value: the variant, e.g. ``py3.14t``)."""
BUILD_STRING = "build string"
ORDER = (PACKAGE, VARIANT, BUILD_STRING, *FIELDS)

TESTED_BY = {"pytorch-tests": PYTORCH}
"""Outputs whose test phase tests another output (of the same variant): their test requirements
count as that output's."""

DEFAULT_ARM_VARIANT = SBSA.name


class CompareError(FeedstockError):
    """The data cannot be read, or a recipe cannot be rendered."""


@dataclass(frozen=True, order=True)
class Pair:
    """The configs of the two feedstocks that build the same thing."""

    subdir: str
    cuda: str
    """``cpu`` or ``cuda<major>``: the minor CUDA versions differ between the feedstocks."""
    arm: str
    """The arm variant where it is not the default (``tegra``), else empty."""
    blas: str

    @property
    def label(self) -> str:
        return " ".join(p for p in (self.subdir, self.cuda, self.arm, self.blas) if p)

    @property
    def short(self) -> str:
        """The label without the platform."""
        return " ".join(p for p in (self.cuda, self.arm, self.blas) if p)


@dataclass(frozen=True)
class RawOutput:
    """One output as conda-build renders it, before normalization."""

    name: str
    version: str
    build_string: str
    build_number: int
    variant: Mapping[str, str]
    """The variant keys this comparison reads: target_platform, cuda_compiler_version, blas_impl,
    arm_variant_type, python."""
    sections: Mapping[str, Sequence[str]]
    """The lists of :data:`FIELDS`."""


@dataclass(frozen=True)
class Output:
    """A normalized output: comparable across the feedstocks."""

    name: str
    variant: str
    build_string: str
    sections: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Rendered:
    """One config's normalized outputs."""

    config: str
    pair: Pair
    outputs: tuple[Output, ...]


@dataclass(frozen=True)
class Difference:
    """What differs for one package, field and requirement name, and where."""

    output: str
    field: str
    name: str
    ours: str | None
    conda_forge: str | None
    where: tuple[str, ...] = ()
    reason: str = ""

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return (self.output, self.field, self.name, self.ours or "", self.conda_forge or "")

    def describe(self) -> str:
        what = f"{self.output} {self.field}" + (f" {self.name}" if self.name else "")
        return f"{what}: ours {self.ours or '-'}, conda-forge's {self.conda_forge or '-'}"


@dataclass(frozen=True)
class Comparison:
    """What the comparison found: the paired configs, where each output exists, the differences."""

    pairs: tuple[tuple[str, str | None, str | None], ...]
    """(pair label, our config, conda-forge's config)."""
    outputs: Mapping[str, tuple[str, ...]]
    """Every output name: the pair labels where either feedstock builds it."""
    differences: tuple[Difference, ...]


@dataclass(frozen=True)
class Recorded:
    """The committed data."""

    commit: str
    comparison: Comparison
    about: tuple[str, ...] = field(default=())


# -- normalization -------------------------------------------------------------------------------


def arm_of(variant: Mapping[str, str]) -> str:
    """A CUDA build's arm variant where its platform has them (the CPU build has none), else ""."""
    cuda_build = variant.get("cuda_compiler_version", "None") != "None"
    has_arms = any(p.subdir == variant["target_platform"] and p.arm_variants for p in PLATFORMS)
    return variant.get(ARM_VARIANT_KEY, "") if cuda_build and has_arms else ""


def pair_of(variant: Mapping[str, str]) -> Pair:
    subdir = variant["target_platform"]
    cuda = variant.get("cuda_compiler_version", "None")
    cuda_kind = "cpu" if cuda == "None" else "cuda" + cuda.split(".")[0]
    arm = arm_of(variant)
    return Pair(
        subdir, cuda_kind, "" if arm == DEFAULT_ARM_VARIANT else arm, variant.get("blas_impl", GENERIC_BLAS)
    )


def python_label(python: str) -> str:
    """``3.12.* *_cpython`` -> ``3.12``; ``3.14.* *_cp314t`` -> ``3.14t``."""
    version = python.split()[0].rstrip(".*") if python else ""
    return version + ("t" if re.search(r"_cp\d+t$", python) else "")


@dataclass(frozen=True)
class SpecContext:
    """One config's values that the normalization turns into placeholders."""

    subdir: str
    version: str
    build: int
    cuda: str
    blas: str
    arm: str = ""

    @property
    def tag(self) -> str:
        return "cpu" if self.cuda == "None" else "cuda" + self.cuda.replace(".", "")


def _build_token(token: str, ctx: SpecContext) -> str:
    if ctx.cuda != "None":
        token = token.replace(ctx.tag, "cuda{XY}")
    token = token.replace(f"_{ctx.blas}_", "_{blas}_").replace(f"_{ctx.blas}*", "_{blas}*")
    if ctx.arm and token == ctx.arm:
        return "{arm}"
    return re.sub(rf"(?<=[_*]){ctx.build}$", "{build}", token)


def normalize_spec(spec: str, ctx: SpecContext) -> str:
    """``name version build`` with the config's values as placeholders (see the module's doc)."""
    parts = spec.split()
    if not parts:
        return spec
    name, rest = parts[0], parts[1:]
    if name.endswith(f"_{ctx.subdir}"):  # a compiler: its version is the pinning's
        return name
    if rest:
        version = rest[0]
        if ctx.version:
            version = version.replace(ctx.version, "{version}")
        if ctx.cuda != "None":
            version = version.replace(ctx.cuda, "{cuda}")
        rest[0] = version
    if len(rest) > 1:
        rest[1] = _build_token(rest[1], ctx)
    return " ".join([name, *rest])


def normalize_build_string(build: str, ctx: SpecContext) -> str:
    tokens = []
    for token in build.split("_"):
        if token == ctx.tag:
            token = "cpu" if ctx.cuda == "None" else "cuda{XY}"
        elif token == ctx.blas:
            token = "{blas}"
        elif re.fullmatch(r"py\d+", token):
            token = "py{py}"
        elif re.fullmatch(r"h[0-9a-f]{7,}", token):
            token = "h{hash}"
        elif token == str(ctx.build):
            token = "{build}"
        tokens.append(token)
    return "_".join(tokens)


def _variant_of(raw: RawOutput, ctx: SpecContext) -> str:
    """``py3.12`` for a per-Python output; else what the build string adds (``magma``)."""
    if re.search(r"(^|_)py\d+(_|$)", raw.build_string):
        return "py" + python_label(raw.variant.get("python", ""))
    plain = {ctx.tag, ctx.blas, str(ctx.build)}
    extra = [t for t in raw.build_string.split("_") if t not in plain and not re.fullmatch(r"h[0-9a-f]+", t)]
    return "_".join(extra)


def normalize(config: str, raws: Sequence[RawOutput]) -> Rendered:
    """One config's rendered outputs, normalized (:class:`Output`), with the pair they belong to."""
    if not raws:
        raise CompareError(f"{config}: conda-build rendered no output")
    first = raws[0].variant
    pair = pair_of(first)
    ctx = SpecContext(
        subdir=first["target_platform"],
        version=raws[0].version,
        build=min(r.build_number for r in raws),
        cuda=first.get("cuda_compiler_version", "None"),
        blas=first.get("blas_impl", GENERIC_BLAS),
        arm=arm_of(first),
    )
    outputs = {}
    for raw in raws:
        sections = {
            f: tuple(sorted({normalize_spec(s, ctx) for s in raw.sections.get(f, ())})) for f in FIELDS
        }
        out = Output(raw.name, _variant_of(raw, ctx), normalize_build_string(raw.build_string, ctx), sections)
        outputs[out.name, out.variant] = out
    for (name, variant), out in list(outputs.items()):
        target = outputs.get((TESTED_BY.get(name, ""), variant))
        if target is not None:
            merged = dict(target.sections)
            merged["test.requires"] = tuple(
                sorted({*target.sections["test.requires"], *out.sections["test.requires"]})
            )
            outputs[target.name, variant] = Output(target.name, variant, target.build_string, merged)
    return Rendered(config, pair, tuple(sorted(outputs.values(), key=lambda o: (o.name, o.variant))))


# -- comparison ----------------------------------------------------------------------------------


def _by_name(specs: Iterable[str]) -> dict[str, str]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for spec in specs:
        grouped[spec_name(spec)].append(spec)
    return {name: ", ".join(sorted(group)) for name, group in grouped.items()}


_Found = tuple[str, str, str, Optional[str], Optional[str]]


def _output_differences(ours: Output, theirs: Output) -> list[_Found]:
    found: list[_Found] = []
    if ours.build_string != theirs.build_string:
        found.append((ours.name, BUILD_STRING, "", ours.build_string, theirs.build_string))
    for f in FIELDS:
        mine, cf = _by_name(ours.sections.get(f, ())), _by_name(theirs.sections.get(f, ()))
        for name in sorted(set(mine) | set(cf)):
            if mine.get(name) != cf.get(name):
                found.append((ours.name, f, name, mine.get(name), cf.get(name)))
    return found


def _pair_differences(pair: Pair, ours: Rendered | None, theirs: Rendered | None) -> dict[_Found, set[str]]:
    """Every difference in one pair of configs, with where (the pair, or the pair and a variant)."""
    mine = {(o.name, o.variant): o for o in (ours.outputs if ours else ())}
    cf = {(o.name, o.variant): o for o in (theirs.outputs if theirs else ())}
    where: dict[_Found, set[str]] = defaultdict(set)
    for name in sorted({n for n, _ in mine} | {n for n, _ in cf}):
        my_variants = {v for n, v in mine if n == name}
        cf_variants = {v for n, v in cf if n == name}
        if not my_variants or not cf_variants:
            ours_built, cf_built = ("built", None) if my_variants else (None, "built")
            where[name, PACKAGE, "", ours_built, cf_built].add(pair.label)
            continue
        for v in sorted(my_variants - cf_variants):
            where[name, VARIANT, "", v, None].add(pair.label)
        for v in sorted(cf_variants - my_variants):
            where[name, VARIANT, "", None, v].add(pair.label)
        common = sorted(my_variants & cf_variants)
        per_variant: dict[_Found, list[str]] = defaultdict(list)
        for v in common:
            for found in _output_differences(mine[name, v], cf[name, v]):
                per_variant[found].append(v)
        for found, variants in per_variant.items():
            if len(variants) == len(common):
                where[found].add(pair.label)
            else:
                where[found] |= {f"{pair.label} {v}".rstrip() for v in variants}
    return where


def compare(ours: Sequence[Rendered], theirs: Sequence[Rendered]) -> Comparison:
    """Every difference between the two feedstocks' rendered configs, aggregated over the pairs."""
    mine = _one_per_pair(ours, "this feedstock")
    cf = _one_per_pair(theirs, CONDA_FORGE_REPO)
    where: dict[_Found, set[str]] = defaultdict(set)
    outputs: dict[str, set[str]] = defaultdict(set)
    for pair in sorted(set(mine) | set(cf)):
        for found, places in _pair_differences(pair, mine.get(pair), cf.get(pair)).items():
            where[found] |= places
        for rendered in (mine.get(pair), cf.get(pair)):
            for out in rendered.outputs if rendered else ():
                outputs[out.name].add(pair.label)
    differences = [Difference(*found, where=tuple(sorted(places))) for found, places in where.items()]
    pairs = tuple(
        (p.label, mine[p].config if p in mine else None, cf[p].config if p in cf else None)
        for p in sorted(set(mine) | set(cf))
    )
    return Comparison(pairs, {n: tuple(sorted(w)) for n, w in sorted(outputs.items())}, _sorted(differences))


def _one_per_pair(rendered: Sequence[Rendered], who: str) -> dict[Pair, Rendered]:
    by_pair: dict[Pair, Rendered] = {}
    for r in rendered:
        if r.pair in by_pair:
            raise CompareError(
                f"{who}: configs {by_pair[r.pair].config} and {r.config} are both {r.pair.label}"
            )
        by_pair[r.pair] = r
    return by_pair


def _sorted(differences: Iterable[Difference]) -> tuple[Difference, ...]:
    return tuple(sorted(differences, key=lambda d: (d.output, ORDER.index(d.field), d.name, d.key)))


def check(found: Comparison, recorded: Comparison) -> list[str]:
    """What the recorded data does not explain: empty when every difference found is recorded,
    with its reason and where it occurs, and every recorded one still occurs."""
    problems = []
    for pair in sorted(set(found.pairs) - set(recorded.pairs), key=str):
        problems.append(f"paired configs not recorded: {pair}")
    for pair in sorted(set(recorded.pairs) - set(found.pairs), key=str):
        problems.append(f"paired configs recorded, no longer found: {pair}")
    known = {d.key: d for d in recorded.differences}
    seen = {d.key for d in found.differences}
    for d in found.differences:
        entry = known.get(d.key)
        if entry is None:
            problems.append(f"new difference, no reason recorded: {d.describe()} (in {', '.join(d.where)})")
        elif not entry.reason.strip():
            problems.append(f"no reason recorded: {d.describe()}")
        elif entry.where != d.where:
            problems.append(f"{d.describe()}: recorded in {list(entry.where)}, found in {list(d.where)}")
    for d in recorded.differences:
        if d.key not in seen:
            problems.append(f"recorded, no longer found: {d.describe()}")
    return problems


def with_reasons(found: Comparison, recorded: Comparison) -> Comparison:
    """``found`` with the recorded reasons (empty for a new difference)."""
    reasons = {d.key: d.reason for d in recorded.differences}
    differences = tuple(
        Difference(d.output, d.field, d.name, d.ours, d.conda_forge, d.where, reasons.get(d.key, ""))
        for d in found.differences
    )
    return Comparison(found.pairs, found.outputs, differences)


# -- the data ------------------------------------------------------------------------------------


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CompareError(f"{DATA.name}: {what} is not a list of strings")
    return tuple(value)


def _optional(value: Any, what: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CompareError(f"{DATA.name}: {what} is neither a string nor null")
    return value


def load(path: Path = DATA) -> Recorded:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        commit = data["conda_forge"]["commit"]
        pairs = tuple(
            (
                p["pair"],
                _optional(p["ours"], "a pair's config"),
                _optional(p["conda_forge"], "a pair's config"),
            )
            for p in data["pairs"]
        )
        outputs = {name: _strings(where, f"outputs[{name}]") for name, where in data["outputs"].items()}
        differences = tuple(
            Difference(
                d["output"],
                d["field"],
                d["name"],
                _optional(d["ours"], "ours"),
                _optional(d["conda_forge"], "conda_forge"),
                _strings(d["where"], "where"),
                d["reason"],
            )
            for d in data["differences"]
        )
        about = _strings(data.get("about", []), "about")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CompareError(f"cannot read {path}: {exc!r}") from exc
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise CompareError(f"{path}: conda_forge.commit is not a 40-digit commit")
    return Recorded(commit, Comparison(pairs, outputs, differences), about)


ABOUT = (
    "This feedstock's requirements compared with conda-forge/pytorch-cpu-feedstock's at the commit named, "
    "both rendered by conda-build (finalize=False) with each feedstock's own .ci_support configs; written by "
    "python -m feedstock requirements-compare --write (scripts/feedstock/requirements_compare.py "
    "says what is compared and how specs are normalized).",
    "The cross-check fails on a difference without a reason, on a recorded one no longer found and on a "
    "changed 'where'; docs/packages.md's table is generated from this file.",
    "Placeholders: {version}, {build} (base build number), {cuda} and cuda{XY} (CUDA version), {blas}, "
    "{arm} (arm variant), {py} and {hash} (build strings). 'where' lists pair labels (platform, cpu or "
    "CUDA major, non-default arm variant, BLAS), with a variant where only some of a pair's variants differ.",
)


def dump(recorded: Recorded, path: Path = DATA) -> None:
    c = recorded.comparison
    data = {
        "about": list(recorded.about or ABOUT),
        "conda_forge": {"repository": CONDA_FORGE_REPO, "commit": recorded.commit},
        "pairs": [{"pair": p, "ours": o, "conda_forge": t} for p, o, t in c.pairs],
        "outputs": {name: list(where) for name, where in c.outputs.items()},
        "differences": [
            {
                "output": d.output,
                "field": d.field,
                "name": d.name,
                "ours": d.ours,
                "conda_forge": d.conda_forge,
                "where": list(d.where),
                "reason": d.reason,
            }
            for d in c.differences
        ],
    }
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


# -- the docs table ------------------------------------------------------------------------------


def _subsets(labels: Sequence[str]) -> dict[str, set[str]]:
    """Names for groups of one platform's pair labels: CUDA, CPU, a BLAS, CUDA or CPU with a BLAS."""
    kinds: dict[str, Callable[[str], bool]] = {"CUDA": lambda k: k != "cpu", "CPU": lambda k: k == "cpu"}
    named: dict[str, set[str]] = {}
    blases = sorted({label.split()[-1] for label in labels})
    for name, is_kind in kinds.items():
        named[name] = {label for label in labels if is_kind(label.split()[1])}
    for blas in blases:
        named[blas] = {label for label in labels if label.split()[-1] == blas}
        for name, is_kind in kinds.items():
            named[f"{name} {blas}"] = {label for label in named[blas] if is_kind(label.split()[1])}
    return named


def where_cell(where: Sequence[str], built: Sequence[str]) -> str:
    """``where`` said short, against the pairs that build the package: "all", a platform for all
    its pairs, a group of them (``CUDA``, a BLAS), or the pairs."""
    if set(where) == set(built):
        return "all"
    parts = []
    for subdir in sorted({w.split()[0] for w in where}):
        here = {w for w in where if w.split()[0] == subdir}
        all_here = [b for b in built if b.split()[0] == subdir]
        if here == set(all_here):
            parts.append(subdir)
            continue
        group = next((name for name, labels in _subsets(all_here).items() if labels == here), None)
        listed = ", ".join(w.split(" ", 1)[1] for w in sorted(here))
        parts.append(f"{subdir} {group}" if group else f"{subdir} ({listed})")
    return "; ".join(parts)


def specs(value: str | None) -> tuple[str, ...]:
    """A difference's side as its specs (none where the package does not require the name)."""
    return () if value is None else tuple(value.split(", "))


def table_rows(recorded: Recorded) -> list[tuple[str, str, tuple[str, ...], tuple[str, ...], str, str]]:
    """(package, fields, this feedstock's specs, conda-forge's, where, why): one row per package,
    reason and where, in the data's order."""
    c = recorded.comparison
    groups: dict[tuple[str, str, tuple[str, ...]], list[Difference]] = {}
    for d in c.differences:
        groups.setdefault((d.output, d.reason, d.where), []).append(d)
    rows = []
    for (output, reason, where), diffs in groups.items():
        fields = ", ".join(dict.fromkeys(d.field for d in diffs))
        ours = tuple(dict.fromkeys(s for d in diffs for s in specs(d.ours)))
        theirs = tuple(dict.fromkeys(s for d in diffs for s in specs(d.conda_forge)))
        rows.append((output, fields, ours, theirs, where_cell(where, c.outputs.get(output, ())), reason))
    return rows


# -- rendering with conda-build ------------------------------------------------------------------


def raw_outputs(metas: Iterable[Any]) -> list[RawOutput]:
    """conda-build's ``MetaData`` objects (``api.render``'s first items) as :class:`RawOutput`."""
    raws = []
    for m in metas:
        if m.skip():
            continue
        sections: dict[str, list[str]] = {}
        for f, key in _KEYS.items():
            value = m.get_value(key, []) or []
            if isinstance(value, dict):  # run_exports: {weak: [...], strong: [...]}
                value = [s for group in value.values() for s in group or []]
            sections[f] = [str(s) for s in value]
        variant = {k: str(v) for k, v in m.config.variant.items() if isinstance(v, (str, int, float))}
        raws.append(RawOutput(m.name(), m.version(), m.build_id(), int(m.build_number()), variant, sections))
    return raws


def render_config(recipe: Path, config: Path, subdir: str) -> list[RawOutput]:
    """``conda_build.api.render`` of ``recipe`` with the variant file ``config``, not finalized."""
    api = importlib.import_module("conda_build.api")
    plat, arch = subdir.split("-", 1)
    metas = api.render(
        str(recipe),
        variant_config_files=[str(config)],
        finalize=False,
        bypass_env_check=True,
        platform=plat,
        arch=arch,
    )
    return raw_outputs(m for m, _, _ in metas)


def render_feedstock(root: Path) -> list[Rendered]:
    """Every config of a feedstock checkout (``recipe/``, ``.ci_support/``), rendered and normalized."""
    configs = list_configs(root)
    if not configs:
        raise CompareError(f"{root}: no .ci_support/*.yaml configs")
    return [normalize(c.name, render_config(root / "recipe", c.path, c.subdir)) for c in configs]


def compare_feedstocks(conda_forge: Path, ours: Path = REPO) -> Comparison:
    return compare(render_feedstock(ours), render_feedstock(conda_forge))
