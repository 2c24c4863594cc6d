"""What the new wheels' METADATA and WHEEL say, against what the recipe builds with.

- ``Requires-Python`` against the Pythons of the variants (.ci_support, rerendered from
  conda-forge's pinning and recipe/conda_build_config.yaml) and the top level's Python;
- ``Generator:`` (the build backend and its version) against the backend in the pytorch
  output's host requirements and the current version's wheels;
- ``Requires-Dist`` against the pytorch output's run requirements.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from packaging.markers import UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, Specifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from ..configs import Config
from ..specs import spec_parts
from .recipe import Recipe, minor_key
from .report import Finding, Level
from .wheels import Fetched, WheelFacts

# Build backends as WHEEL's Generator names them -> the conda package a recipe builds with.
BACKENDS = {
    "scikit-build-core": "scikit-build-core",
    "setuptools": "setuptools",
    "bdist_wheel": "setuptools",  # the wheel package's bdist_wheel, run by setuptools
    "meson": "meson-python",
    "hatchling": "hatchling",
    "flit": "flit-core",
    "maturin": "maturin",
    "poetry-core": "poetry-core",
}
# Upstream's PyPI wheels depend on NVIDIA's PyPI packages for the CUDA runtime; a conda build
# links conda's CUDA packages instead (libtorch's host and run_exports), so these have no match.
PYPI_ONLY = re.compile(r"^(nvidia-.*|cuda-toolkit|cuda-bindings)$")
# platform_system of each conda platform family, for Requires-Dist markers.
SYSTEMS = {"linux": "Linux", "osx": "Darwin", "win": "Windows"}


def _platforms_of(configs: Iterable[Config]) -> str:
    """``linux-64 x6, osx-64 x2`` for the configs that build one Python."""
    count: dict[str, int] = {}
    for config in configs:
        count[config.subdir] = count.get(config.subdir, 0) + 1
    return ", ".join(f"{subdir} x{n}" for subdir, n in sorted(count.items()))


def _admits(spec: SpecifierSet, python: str) -> bool:
    # the newest patch release stands for its minor version: conda-forge builds against it
    return spec.contains(f"{python}.99")


def _requires_python(wheels: Sequence[WheelFacts]) -> dict[str, list[WheelFacts]]:
    found: dict[str, list[WheelFacts]] = {}
    for wheel in wheels:
        found.setdefault(wheel.requires_python, []).append(wheel)
    return found


def python_findings(recipe: Recipe, new: Sequence[WheelFacts], old: Sequence[WheelFacts]) -> list[Finding]:
    """The variant Pythons the new Requires-Python no longer admits, and the ones it adds."""
    olds = sorted({w.requires_python for w in old})
    versions = sorted({w.version for w in old})
    was = f" (torch {', '.join(versions)}: {', '.join(olds) or 'none'})" if olds else ""
    found: list[Finding] = []
    for text in _requires_python(new):
        found += _one_python_range(recipe, text, was, new[0].version)
    return found + _new_pythons(recipe.pythons(), new)


def _python(level: Level, text: str) -> Finding:
    return Finding("python", level, text)


def _one_python_range(recipe: Recipe, text: str, was: str, version: str) -> list[Finding]:
    if not text:
        return [_python(Level.INFO, f"torch {version}: no Requires-Python in the METADATA")]
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return [_python(Level.ACTION, f"Requires-Python {text!r} is no PEP 440 specifier")]
    pythons = recipe.pythons()
    found = [
        _python(Level.ACTION, (
            f"torch {version} requires Python {text}{was}: the {python} variants must go "
            f"({len(configs)} configs build {python}: {_platforms_of(configs)}); skip them "
            f"(`# [py=={python.replace('.', '')}]` in recipe/meta.yaml) and rerender"
        ))
        for python, configs in pythons.items()
        if not _admits(spec, python)
    ]  # fmt: skip
    if not _admits(spec, recipe.megabuild_python):
        found.append(_python(Level.ACTION, (
            f"the top level builds with Python {recipe.megabuild_python} (megabuild_python in "
            f"recipe/meta.yaml, the one place), which Requires-Python {text} excludes"
        )))  # fmt: skip
    if not found:
        kept = ", ".join(pythons)
        found.append(_python(Level.OK, f"Requires-Python {text}{was} admits every variant Python ({kept})"))
    return found


def _new_pythons(pythons: dict[str, list[Config]], new: Sequence[WheelFacts]) -> list[Finding]:
    """Pythons upstream lists (classifiers) beyond the variants: conda-forge's migration adds them."""
    newest = max(pythons, key=minor_key, default="")
    listed = {p for w in new for p in w.classifier_pythons}
    beyond = sorted((p for p in listed if minor_key(p) > minor_key(newest)), key=minor_key)
    if not beyond:
        return []
    text = f"upstream lists Python {', '.join(beyond)} (classifiers); the variants stop at {newest}"
    return [_python(Level.INFO, text + " (conda-forge's python migration adds it)")]


@dataclass(frozen=True)
class Generator:
    name: str
    version: str

    @property
    def backend(self) -> str:
        return BACKENDS.get(self.name, self.name)

    def __str__(self) -> str:
        return f"{self.name} {self.version}".strip()


def parse_generator(text: str) -> Generator:
    """``scikit-build-core 1.1.1``, ``bdist_wheel (0.45.1)``, ``setuptools (80.9.0)``."""
    found = re.fullmatch(r"(\S+)\s*\(?([^()\s]*)\)?", text.strip())
    return Generator(found.group(1), found.group(2)) if found else Generator(text.strip(), "")


@dataclass(frozen=True)
class RecipeBackend:
    """The build backend in the pytorch output's host requirements."""

    package: str
    version_spec: str | None

    def __str__(self) -> str:
        return f"{self.package} {self.version_spec or ''}".strip()

    def too_old(self, generator: Generator) -> bool:
        """The generator's version is below the recipe's ``>=X`` (other conda specs are not judged)."""
        if not self.version_spec or not self.version_spec.startswith(">="):
            return False
        try:
            return Version(generator.version) < Version(self.version_spec[2:].split(",")[0])
        except InvalidVersion:
            return False


def recipe_backend(host: Sequence[str]) -> RecipeBackend | None:
    for spec in host:
        name, version, _build = spec_parts(spec)
        if name in BACKENDS.values():
            return RecipeBackend(name, version)
    return None


def _one_generator(
    generator: Generator, before: list[str], recipe: RecipeBackend | None
) -> tuple[Level, str]:
    """(level, what to say) for one Generator seen on some platforms."""
    if recipe is None or generator.backend != recipe.package:
        return Level.ACTION, f"the build backend changed; the pytorch output's host has {recipe or 'none'}"
    if recipe.too_old(generator):
        return Level.ACTION, f"older than the recipe's {recipe}"
    if any(parse_generator(b).backend != generator.backend for b in before):
        return Level.ACTION, "the build backend changed"
    return Level.OK, f"the recipe builds with {recipe}"


def backend_findings(
    new: Sequence[Fetched], old: dict[str, WheelFacts], host: Sequence[str]
) -> list[Finding]:
    """Each distinct Generator of the new wheels, against the recipe's backend and the old wheels'."""
    recipe = recipe_backend(host)
    platforms_of: dict[str, list[str]] = {}
    for fetched in new:
        platforms_of.setdefault(fetched.wheel.generator, []).append(fetched.platform.subdir)
    found: list[Finding] = []
    for text, subdirs in platforms_of.items():
        before = sorted({old[s].generator for s in subdirs if s in old})
        was = f" (torch {old[subdirs[0]].version}: {', '.join(before)})" if before else ""
        level, verdict = _one_generator(parse_generator(text), before, recipe)
        found.append(
            Finding("build backend", level, f"{', '.join(subdirs)}: Generator {text}{was}: {verdict}")
        )
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def conda_version_spec(specifier: SpecifierSet) -> str:
    """A PEP 440 specifier in conda's words: ``~=3.9.0`` -> ``3.9.*``, ``==1.2`` -> ``1.2``."""
    return ",".join(sorted(_conda_part(s) for s in specifier))


def _conda_part(spec: Specifier) -> str:
    if spec.operator == "~=":
        release = spec.version.split(".")
        if len(release) > 2:
            return ".".join(release[:-1]) + ".*"
        return f">={spec.version},<{int(release[0]) + 1}"
    if spec.operator in ("==", "==="):
        return spec.version
    return f"{spec.operator}{spec.version}"


def _recipe_version_spec(version: str | None) -> str:
    return ",".join(sorted(part.removeprefix("==") for part in (version or "").split(",") if part))


def _applies(requirement: Requirement, wheel: WheelFacts, family: str) -> bool:
    if requirement.marker is None:
        return True
    system = SYSTEMS.get(family, family)
    environment = {"platform_system": system, "python_version": wheel.python, "extra": ""}
    try:
        return requirement.marker.evaluate(environment)
    except UndefinedEnvironmentName:
        return True  # a marker on something else: keep the requirement, a person judges it


def _one_requirement(text: str, recipe: dict[str, str | None]) -> str | None:
    """What is wrong with one upstream requirement for the pytorch run requirements, or None."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return f"unreadable Requires-Dist {text!r}"
    name = _normal(requirement.name)
    if name not in recipe:
        return f"{text.split(';')[0].strip()} is not in the pytorch run requirements"
    wanted = conda_version_spec(requirement.specifier)
    if wanted and wanted != _recipe_version_spec(recipe[name]):
        return (
            f"{requirement.name}: upstream {requirement.specifier}, pytorch run has {recipe[name] or 'any'}"
        )
    return None


def _upstream_requirements(wheel: WheelFacts, family: str) -> list[str]:
    """Requires-Dist that a conda build must match: this platform's, no extras, no PyPI CUDA wheels."""
    kept = []
    for text in wheel.requires_dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            kept.append(text)  # _one_requirement names it
            continue
        if not PYPI_ONLY.match(_normal(requirement.name)) and _applies(requirement, wheel, family):
            kept.append(text)
    return kept


def dependency_findings(wheel: WheelFacts, family: str, run: Sequence[str]) -> list[Finding]:
    """Each upstream requirement the pytorch output's run requirements lack or pin differently."""
    recipe = {_normal(spec_parts(spec)[0]): spec_parts(spec)[1] for spec in run}
    upstream = _upstream_requirements(wheel, family)
    problems = [p for p in (_one_requirement(text, recipe) for text in upstream) if p]
    if problems:
        return [Finding("dependencies", Level.ACTION, problem) for problem in problems]
    text = f"the {len(upstream)} upstream requirements match pytorch's run requirements"
    return [Finding("dependencies", Level.OK, text)]
