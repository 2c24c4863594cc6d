"""The version-bump check: every step in order, one report."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml
from megabuild.model import PYTORCH
from packaging.version import Version

from ..configs import short_alias
from ..errors import UsageError
from ..render import RenderedOutput
from ..wheel_files import Row, list_wheel, read_listing, sha256_of
from . import listings as lst
from .layout import Layout, Placeholders, conda_rows
from .metadata import backend_findings, dependency_findings, python_findings
from .patches import patch_findings
from .platforms import Platform
from .recipe import Recipe, config_for, cuda_of, minor_key, pick, read_recipe, rendered
from .report import Finding, Level, Report
from .split_run import split_findings
from .split_spec import SpecUnavailable, SplitSpec
from .wheels import Fetched, Missing, WheelFacts, baseline_wheel, fetch, no_wheel_at_all, read_wheel

VERSION = re.compile(r"\d+\.\d+\.\d+(?:(?:a|b|rc)\d+)?")
RC_WHEELS = "https://download.pytorch.org/whl/test"
"""Where upstream publishes a release candidate's wheels (never on PyPI)."""
RC_SOURCE = "https://download.pytorch.org/source_code/test/pytorch-v{tag}.tar.gz"
"""An rc's source tarball with submodules (GitHub has no release asset for an rc tag)."""
RC_LABEL = "conda-forge pytorch_rc"


def is_candidate(version: str) -> bool:
    """``2.16.0rc1``: a release candidate (its tag is ``v2.16.0-rc1``)."""
    pre = Version(version).pre
    return pre is not None and pre[0] == "rc"


@dataclass(frozen=True)
class Options:
    version: str
    feedstock: Path
    cache: Path
    offline: bool
    platforms: tuple[Platform, ...]
    write_listings: bool


@dataclass(frozen=True)
class Checked:
    """One platform's new wheel with what the later steps need of it."""

    fetched: Fetched
    rows: list[Row]
    config: str | None  # alias of the .ci_support config whose rendered tests its layout answers
    outputs: list[RenderedOutput]
    spec: SplitSpec | None
    spec_problem: str  # why the spec cannot be had for this platform, "" when it can

    @property
    def platform(self) -> Platform:
        return self.fetched.platform

    @property
    def cuda(self) -> bool:
        return cuda_of(self.fetched.wheel.local_version) is not None


def check_version(new: str, current: str) -> None:
    if not VERSION.fullmatch(new):
        raise UsageError(f"malformed version {new!r}: expected X.Y.Z such as 2.15.0")
    if Version(new) < Version(current):
        raise UsageError(f"version {new} is older than the recipe's {current}")


def python_order(recipe: Recipe) -> list[str]:
    """Pythons to ask pip for: the top level's first (its wheel is the one the split models),
    then the variants' newest first, then the two after the newest (a new version may drop
    every Python the variants have)."""
    variants = sorted(recipe.pythons(), key=minor_key, reverse=True)
    major, minor = (variants[0] if variants else recipe.megabuild_python).split(".")
    later = [f"{major}.{int(minor) + n}" for n in (1, 2)]
    return list(dict.fromkeys([recipe.megabuild_python, *variants, *later]))


def fetch_all(options: Options, pythons: Sequence[str]) -> tuple[list[Fetched], list[Missing]]:
    """Every platform's wheel; no wheel at all is bad input (raised as soon as that is clear),
    except for a release candidate: PyPI never has its wheels, the cache may."""
    candidate = is_candidate(options.version)
    fetched: list[Fetched] = []
    missing: list[Missing] = []
    for platform in options.platforms:
        result = fetch(options.cache, platform, options.version, pythons, options.offline)
        if isinstance(result, Fetched):
            fetched.append(result)
            continue
        missing.append(result)
        # the index answered for a platform every release has, and has no such version: asking
        # every other platform and Python the same takes a minute and says nothing new
        unknown = result.versions_seen and options.version not in result.versions_seen
        # pip refused the version (a constraint, a conflict): the same for every platform
        if not candidate and not fetched and not platform.stood_in_by and (unknown or result.refused):
            raise no_wheel_at_all(options.version, [result], options.offline)
    if not fetched and not candidate:
        raise no_wheel_at_all(options.version, missing, options.offline)
    return fetched, missing


def wheel_findings(fetched: Sequence[Fetched], missing: Sequence[Missing]) -> list[Finding]:
    found = [
        Finding(
            "wheels",
            Level.OK,
            (
                f"{f.platform.subdir}: {f.wheel.path.name} ({f.how}; Python {f.wheel.python}"
                f"{', ' + f.wheel.local_version if f.wheel.local_version else ''})"
            ),
        )
        for f in fetched
    ]
    for m in missing:
        if m.platform.stood_in_by:
            text = f"{m.platform.subdir}: no wheel ({m.reason}); {m.platform.stood_in_by}'s stands in"
            found.append(Finding("wheels", Level.INFO, text))
        else:
            found.append(Finding("wheels", Level.ACTION, f"{m.platform.subdir}: not checked: {m.reason}"))
    return found


def baseline_wheels(options: Options, recipe: Recipe, pythons: Sequence[str]) -> dict[str, WheelFacts]:
    """The cached wheels of the version before (their METADATA and WHEEL), per platform."""
    found: dict[str, WheelFacts] = {}
    for platform in options.platforms:
        path = baseline_wheel(options.cache, platform, recipe.version, options.version, pythons)
        if path is not None:
            found[platform.subdir] = read_wheel(path)
    return found


def prepare(recipe: Recipe, fetched: Fetched) -> Checked:
    """List the wheel, pick and render its config, load the spec for its platform."""
    platform, wheel = fetched.platform, fetched.wheel
    config = config_for(recipe.configs, platform.subdir, cuda_of(wheel.local_version), wheel.python)
    outputs = rendered(recipe, config) if config is not None else []
    alias = short_alias(config, list(recipe.configs)) if config is not None else None
    spec, problem = None, ""
    try:
        spec = SplitSpec(recipe.spec_path, platform.subdir)
    except SpecUnavailable as exc:
        problem = str(exc)
    return Checked(fetched, list_wheel(wheel.path), alias, outputs, spec, problem)


def _compared(recipe: Recipe, current: Path, checked: Checked, count: int) -> Finding:
    """Which listing the wheel is compared with (tests/data may be ahead of the recipe)."""
    wheel = checked.fetched.wheel
    ahead = lst.listing_version(current) != recipe.version
    note = f"; tests/data is ahead of the recipe's {recipe.version}" if ahead else ""
    text = f"{current.name} ({count:,} files) -> {wheel.path.name} ({len(checked.rows):,} files){note}"
    return Finding("listings", Level.INFO, f"{checked.platform.subdir}: {text}")


def listing_findings(recipe: Recipe, checked: Checked) -> list[Finding]:
    """The new listing against tests/data's listing of the current version, same platform."""
    platform = checked.platform
    current = lst.current_listing(recipe.listings_dir, recipe.version, platform)
    if current is None:
        text = f"{platform.subdir}: no torch {recipe.version} listing in tests/data to compare with"
        found = [Finding("listings", Level.INFO, text)]
    else:
        diff = lst.ListingDiff(platform, read_listing(current), checked.rows)
        found = [
            _compared(recipe, current, checked, len(diff.old)),
            *lst.library_findings(diff, checked.spec),
            *lst.header_findings(diff, checked.spec),
            *lst.top_dir_findings(diff),
            *lst.package_findings(diff, checked.spec),
        ]
    if checked.spec is not None:
        rows = list(conda_rows(platform, checked.rows))
        found += lst.required_findings(platform, rows, checked.spec, checked.cuda)
    if checked.spec_problem:
        found.append(Finding("listings", Level.ACTION, f"{platform.subdir}: {checked.spec_problem}"))
    return found


def merged_dependency_findings(checked: Sequence[Checked]) -> list[Finding]:
    """Requires-Dist against each platform's pytorch run requirements; one line for the same words."""
    platforms_of: dict[tuple[Level, str], list[str]] = {}
    for one in checked:
        wheel = one.fetched.wheel
        pytorch = pick(one.outputs, PYTORCH, python=wheel.python_build)
        if pytorch is None:
            continue
        family = one.platform.subdir.split("-")[0]
        for finding in dependency_findings(wheel, family, pytorch.requirements.get("run", [])):
            platforms_of.setdefault((finding.level, finding.text), []).append(one.platform.subdir)
    return [
        Finding("dependencies", level, f"{', '.join(subdirs)}: {text}")
        for (level, text), subdirs in platforms_of.items()
    ]


def pytorch_host(checked: Sequence[Checked]) -> list[str]:
    for one in checked:
        pytorch = pick(one.outputs, PYTORCH, python=one.fetched.wheel.python_build)
        if pytorch is not None:
            return pytorch.requirements.get("host", [])
    return []


def layout_of(checked: Checked) -> Layout | None:
    if checked.spec is None or checked.config is None:
        return None
    platform, spec = checked.platform, checked.spec
    source = Placeholders(tuple(checked.rows))
    rows = conda_rows(platform, checked.rows)
    python = checked.fetched.wheel.python_build
    return Layout(platform, source, rows, python, checked.cuda, checked.config, tuple(checked.outputs), spec)


def split_section(recipe: Recipe, checked: Sequence[Checked]) -> list[Finding]:
    found: list[Finding] = []
    for one in checked:
        layout = layout_of(one)
        if layout is not None:
            found += split_findings(layout)
        else:
            text = f"{one.platform.subdir}: no config or split spec for this wheel: split not run"
            found.append(Finding("split", Level.ACTION, text))
    return found


def candidate_findings(recipe: Recipe, version: str, fetched: Sequence[Fetched]) -> list[Finding]:
    """What an rc changes: where its wheels and source are, and the upload label it gets."""
    section = "release candidate"
    found = []
    if not fetched:
        text = (
            f"not checked: its wheels are on {RC_WHEELS}, not PyPI (put them in the wheel cache to check"
            " them): Requires-Python, build backend, Requires-Dist, listings, patches, split"
        )
        found.append(Finding(section, Level.ACTION, text))
    tag = version.replace("rc", "-rc")
    text = f"source: {RC_SOURCE.format(tag=tag)} (sha256 left to a person), not {recipe.url_for(version)}"
    found.append(Finding(section, Level.ACTION, text))
    cbc = yaml.safe_load((recipe.recipe_dir / "conda_build_config.yaml").read_text()) or {}
    zipped = ["channel_targets", "is_rc"] in cbc.get("zip_keys", [])
    pairs = dict(zip(map(str, cbc.get("is_rc", [])), cbc.get("channel_targets", [])))
    if zipped and pairs.get("True") == RC_LABEL:
        found.append(Finding(section, Level.OK, f"an rc version builds only for {RC_LABEL} (is_rc)"))
    else:
        text = f"conda_build_config.yaml does not zip channel_targets with is_rc ({RC_LABEL}): rc to main"
        found.append(Finding(section, Level.ACTION, text))
    return found


def source_finding(recipe: Recipe, version: str) -> Finding:
    return Finding(
        "source",
        Level.INFO,
        (
            f"left to the bot or a person: version {version} and the sha256 of {recipe.url_for(version)} "
            f"in recipe/meta.yaml (source.url: {recipe.source_url})"
        ),
    )


def write_listings(recipe: Recipe, checked: Sequence[Checked]) -> list[Finding]:
    named = {lst.listing_name(c.fetched.wheel, c.platform): c.rows for c in checked}
    written = lst.write_listings(recipe.listings_dir, named)
    found = []
    for path, one in zip(written, checked):
        wheel = one.fetched.wheel.path
        where = path.relative_to(recipe.feedstock)
        text = f"wrote {where} ({len(one.rows):,} files; {wheel.name} sha256 {sha256_of(wheel)})"
        found.append(Finding("listings", Level.INFO, text))
    return found


def check_bump(options: Options) -> Report:
    recipe = read_recipe(options.feedstock)
    check_version(options.version, recipe.version)
    pythons = python_order(recipe)
    fetched, missing = fetch_all(options, pythons)
    report = Report(f"torch {recipe.version} -> {options.version}: version-bump check of {options.feedstock}")
    report.extend(wheel_findings(fetched, missing))
    if is_candidate(options.version):
        report.extend(candidate_findings(recipe, options.version, fetched))
    if not fetched:  # an rc without cached wheels: what needs no wheel is checked above
        return report
    old = baseline_wheels(options, recipe, pythons)
    report.extend(python_findings(recipe, [f.wheel for f in fetched], list(old.values())))
    checked = [prepare(recipe, f) for f in fetched]
    report.extend(backend_findings(fetched, old, pytorch_host(checked)))
    report.extend(merged_dependency_findings(checked))
    for one in checked:
        report.extend(listing_findings(recipe, one))
    if options.write_listings:
        report.extend(write_listings(recipe, checked))
    wheels = [(f.platform.subdir, f.wheel.path) for f in fetched]
    report.extend(patch_findings(wheels, recipe.recipe_dir / "patches"))
    report.extend(split_section(recipe, checked))
    report.extend([source_finding(recipe, options.version)])
    return report
