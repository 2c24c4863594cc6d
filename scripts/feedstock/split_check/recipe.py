"""What the feedstock builds today: the recipe's version, its Pythons and the configs to render."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from megabuild.model import GENERIC_BLAS, LinalgVariant

from ..configs import Config, list_configs
from ..errors import UsageError
from ..render import RenderedOutput, render_config
from .python_builds import PythonBuild

_SET = r"^\{%-?\s*set\s+%s\s*=\s*\"([^\"]+)\"\s*-?%\}"


@dataclass(frozen=True)
class Recipe:
    feedstock: Path
    version: str
    megabuild_python: str  # the top level's Python (meta.yaml, build.sh)
    source_url: str  # as written, with ``{{ version }}``
    configs: tuple[Config, ...]

    @property
    def recipe_dir(self) -> Path:
        return self.feedstock / "recipe"

    @property
    def spec_path(self) -> Path:
        return self.recipe_dir / "split_spec.json"

    @property
    def listings_dir(self) -> Path:
        return self.feedstock / "tests" / "data"

    def url_for(self, version: str) -> str:
        return re.sub(r"\{\{\s*version\s*\}\}", version, self.source_url)

    def pythons(self) -> dict[str, list[Config]]:
        """Each Python (``3.10``) the configs build -> the configs that build it, oldest first."""
        found: dict[str, list[Config]] = {}
        for config in self.configs:
            for value in config.get("python"):
                found.setdefault(python_minor(value), []).append(config)
        return dict(sorted(found.items(), key=lambda item: minor_key(item[0])))


def python_minor(value: str) -> str:
    """``3.10`` for the variant value ``3.10.* *_cpython``."""
    return ".".join(value.split(" ")[0].split(".")[:2])


def minor_key(python: str) -> tuple[int, ...]:
    return tuple(int(part) for part in python.split(".") if part.isdigit())


def _set_value(meta: str, name: str, path: Path) -> str:
    found = re.search(_SET.replace("%s", re.escape(name)), meta, re.M)
    if found is None:
        raise UsageError(f"{path}: no '{{% set {name} = \"...\" %}}'")
    return found.group(1)


def _source_url(meta: str, path: Path) -> str:
    source = re.search(r"^source:\s*\n((?:[ \t#].*\n|\n)*)", meta, re.M)
    url = re.search(r"^\s+url:\s*(.+?)\s*(?:#.*)?$", source.group(1), re.M) if source else None
    if url is None:
        raise UsageError(f"{path}: no source url")
    return url.group(1)


def read_recipe(feedstock: Path) -> Recipe:
    """The feedstock's recipe; a directory that is no feedstock is bad input."""
    meta_path = feedstock / "recipe" / "meta.yaml"
    try:
        meta = meta_path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"not a feedstock: cannot read {meta_path}: {exc.strerror or exc}") from None
    configs = tuple(list_configs(feedstock))
    if not configs:
        raise UsageError(f"not a feedstock: no {feedstock / '.ci_support'}/*.yaml configs")
    return Recipe(
        feedstock,
        _set_value(meta, "version", meta_path),
        _set_value(meta, "megabuild_python", meta_path),
        _source_url(meta, meta_path),
        configs,
    )


def cuda_of(local_version: str) -> str | None:
    """``13.0`` for a wheel's ``cu130``; ``None`` for a CPU wheel."""
    found = re.fullmatch(r"cu(\d+)(\d)", local_version)
    return f"{found.group(1)}.{found.group(2)}" if found else None


def _cuda_distance(config: Config, cuda: str | None) -> float:
    """How far the config's CUDA is from the wheel's (0 for the same; none: a CPU wheel)."""
    if cuda is None:
        return 0.0
    versions = [float(v) for v in config.get("cuda_compiler_version") if v != "None"]
    return min((abs(v - float(cuda)) for v in versions), default=float("inf"))


def _preference(config: Config, cuda: str | None, python: str) -> tuple[float, bool, bool]:
    """Lower is better: the CUDA version nearest the wheel's, generic BLAS, the wheel's Python."""
    return (
        _cuda_distance(config, cuda),
        GENERIC_BLAS not in (config.get("blas_impl") or [GENERIC_BLAS]),
        python not in {python_minor(v) for v in config.get("python")},
    )


def config_for(configs: Iterable[Config], subdir: str, cuda: str | None, python: str) -> Config | None:
    """The config whose rendered tests a wheel's layout answers: same platform, CUDA or not."""
    fitting = [
        config
        for config in configs
        if config.subdir == subdir
        and (cuda is None) == ((config.get("cuda_compiler_version") or ["None"]) == ["None"])
    ]
    return min(fitting, key=lambda c: (_preference(c, cuda, python), c.name), default=None)


def rendered(recipe: Recipe, config: Config) -> list[RenderedOutput]:
    return render_config(config.path, recipe.recipe_dir)


def matching(
    outputs: Iterable[RenderedOutput],
    name: str,
    *,
    python: PythonBuild | None = None,
    linalg: LinalgVariant | None = None,
) -> list[RenderedOutput]:
    """The rendered outputs ``name`` of that Python build (version AND ABI: 3.14 is not 3.14t) and
    linalg variant (``None``: any)."""
    return [
        o
        for o in outputs
        if o.name == name
        and (python is None or python.selects(o.variant.get("python", "")))
        and (linalg is None or o.variant.get("with_magma") == linalg.with_magma)
    ]


def pick(
    outputs: Iterable[RenderedOutput],
    name: str,
    *,
    python: PythonBuild | None = None,
    linalg: LinalgVariant | None = None,
) -> RenderedOutput | None:
    """The one rendered output :func:`matching` selects; ``None`` when there is none or several."""
    found = matching(outputs, name, python=python, linalg=linalg)
    return found[0] if len(found) == 1 else None
