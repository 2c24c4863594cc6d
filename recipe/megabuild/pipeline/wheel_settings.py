"""The ``-C`` settings of each ``pip install .`` (scikit-build-core config settings).

Every pass: ``cmake.define.PYTHON_SIX_SOURCE_DIR`` is this Python's site-packages (NNPACK's
PeachPy codegen uses the host env's six instead of downloading it). It used to sit in
``$CMAKE_ARGS``, but EnvVarForwarding copies ``CMAKE_ARGS`` itself into the cache, and it must be
the same in every step.

pytorch outputs: by default scikit-build-core installs every target into a new temporary wheel
dir, packs all of it and pip unpacks it, so each Python would re-pack libtorch (gigabytes in a
CUDA build) only for link-back to replace it by symlinks. ``wheel.exclude`` keeps out of the
wheel what the split spec gives to libtorch, libtorch-cuda-linalg or drops: only torch_python,
``_C`` and the Python files are packed. A config setting replaces the project's list, so the
project's own ``wheel.exclude`` (pyproject.toml) comes first.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.split.spec import DROPPED, Spec, expand_pattern

INSTALL_DIR = "torch"  # [tool.scikit-build] wheel.install-dir of PyTorch 2.14


def _toml_reader() -> Any:
    """``tomllib`` (3.11+). Python 3.10's stdlib has no TOML reader; there the host env has the
    ``tomli`` that scikit-build-core itself requires on 3.10 to read the same file."""
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    try:
        return importlib.import_module(name)
    except ImportError:
        version = sys.version.split()[0]
        raise MegabuildError(f"cannot read pyproject.toml: no {name} on Python {version}") from None


def project_excludes(source_dir: Path) -> list[str]:
    """``[tool.scikit-build] wheel.exclude`` of the project."""
    path = source_dir / "pyproject.toml"
    reader = _toml_reader()
    try:
        data = reader.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MegabuildError(f"{path} is missing: PyTorch 2.14 builds from it (never delete it)") from None
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise MegabuildError(f"cannot read {path}: {exc}") from None
    wheel = data.get("tool", {}).get("scikit-build", {}).get("wheel", {})
    excludes = wheel.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(x, str) for x in excludes):
        raise MegabuildError(f"{path}: tool.scikit-build.wheel.exclude is not a list of strings")
    return list(excludes)


def libtorch_excludes(spec: Spec) -> list[str]:
    """Wheel paths of everything the spec moves out of pytorch (gitignore-style, like the spec's
    globs: ``*`` within a path segment, ``**`` across)."""
    patterns: list[str] = []
    for rule in spec.rules:
        if rule.output == spec.default_output:
            continue
        if rule.output != DROPPED and rule.output not in spec.outputs:
            raise MegabuildError(f"split spec rule {rule.shown}: unknown output {rule.output}")
        patterns += [f"{INSTALL_DIR}/{p}" for p in expand_pattern(rule.pattern, spec.placeholders)]
    return list(dict.fromkeys(patterns))


def exclude_setting(excludes: list[str]) -> str:
    """``excludes`` as pip's ``-C wheel.exclude=`` option (a ``;``-separated list)."""
    if any(";" in pattern for pattern in excludes):
        raise MegabuildError("a wheel.exclude pattern contains ';', the config-settings list separator")
    return "-Cwheel.exclude=" + ";".join(excludes)


def config_settings(sp_dir: Path, excludes: list[str] | None) -> list[str]:
    """pip's ``-C`` options: always the six dir; ``excludes`` (when given) as ``wheel.exclude``."""
    settings = [f"-Ccmake.define.PYTHON_SIX_SOURCE_DIR={sp_dir}"]
    if excludes is not None:
        settings.append(exclude_setting(excludes))
    return settings
