"""The ``-C`` settings of each ``pip install .`` (scikit-build-core config settings).

Every pass: ``cmake.define.PYTHON_SIX_SOURCE_DIR`` is one directory for the whole build,
``$SRC_DIR/_megabuild/python-six``, where the top level copies its host env's ``six.py`` (NNPACK's
PeachPy codegen then uses it instead of downloading six). NNPACK puts the value into the command
line of every codegen edge (``PYTHONPATH=<six dir>:<peachpy dir> $PYTHON_EXECUTABLE -m
peachpy.x86_64 ...``): a value that changed with each Python's site-packages would re-run the
codegen, rebuild libnnpack and relink libtorch_cpu (and all linked to it) once per Python on
x86_64. The interpreter in that command line is ``$PREFIX/bin/python`` (``%PREFIX%\\python.exe``),
one path for every Python: conda-build recreates each host env at the same prefix. The setting
is not in ``$CMAKE_ARGS``: EnvVarForwarding copies ``CMAKE_ARGS`` itself into the cache.

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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError
from megabuild.split.spec import DROPPED, Spec, expand_pattern

INSTALL_DIR = "torch"  # [tool.scikit-build] wheel.install-dir of PyTorch 2.14
SIX_DIR = "python-six"  # under the work dir; the name of PyTorch's former submodule
SIX_MODULE = "six.py"


def _toml_reader() -> Any:
    """``tomllib`` (3.11+). Python 3.10's stdlib has no TOML reader; there the host env has the
    ``tomli`` that scikit-build-core itself requires on 3.10 to read the same file."""
    name = "tomllib" if sys.version_info >= (3, 11) else "tomli"
    try:
        return importlib.import_module(name)
    except ImportError:
        version = sys.version.split()[0]
        raise MegabuildError(f"cannot read pyproject.toml: no {name} on Python {version}") from None


def _scikit_build(source_dir: Path) -> dict[str, Any]:
    """``[tool.scikit-build]`` of the project's pyproject.toml."""
    path = source_dir / "pyproject.toml"
    reader = _toml_reader()
    try:
        data = reader.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MegabuildError(f"{path} is missing: PyTorch 2.14 builds from it (never delete it)") from None
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        raise MegabuildError(f"cannot read {path}: {exc}") from None
    section = data.get("tool", {}).get("scikit-build", {})
    return section if isinstance(section, dict) else {}


def project_excludes(source_dir: Path) -> list[str]:
    """``[tool.scikit-build] wheel.exclude`` of the project."""
    excludes = _scikit_build(source_dir).get("wheel", {}).get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(x, str) for x in excludes):
        path = source_dir / "pyproject.toml"
        raise MegabuildError(f"{path}: tool.scikit-build.wheel.exclude is not a list of strings")
    return list(excludes)


def backend_env(source_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """The environment the backend's CMake runs get: pip's (``env`` without ``PYTHONPATH``, as
    frontend.run_pip hands it) with ``[tool.scikit-build.env]`` applied (``NAME = "value"``, or
    ``NAME = {env = "OTHER"}`` when OTHER is set: MAX_JOBS as CMAKE_BUILD_PARALLEL_LEVEL)."""
    out = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    table = _scikit_build(source_dir).get("env", {})
    for name, value in table.items() if isinstance(table, dict) else ():
        if isinstance(value, str):
            out[name] = value
        elif isinstance(value, dict) and isinstance(value.get("env"), str) and value["env"] in out:
            out[name] = out[value["env"]]
        elif isinstance(value, dict) and isinstance(value.get("default"), str):
            out[name] = value["default"]
    return out


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


def share_six(sp_dir: Path, six_dir: Path) -> Path:
    """The top level: copy the host env's ``six.py`` into ``six_dir`` (atomically), for every pass."""
    source = sp_dir / SIX_MODULE
    if not source.is_file():
        raise MegabuildError(f"{source} is missing: six is a host requirement (NNPACK's PeachPy codegen)")
    six_dir.mkdir(parents=True, exist_ok=True)
    tmp = six_dir / f".{SIX_MODULE}.tmp"
    tmp.write_bytes(source.read_bytes())
    tmp.replace(six_dir / SIX_MODULE)
    return six_dir


def shared_six(six_dir: Path) -> Path:
    """A per-Python pass: the six dir the top level filled (the same path in every pass)."""
    if not (six_dir / SIX_MODULE).is_file():
        raise MegabuildError(f"{six_dir / SIX_MODULE} is missing: the top level copies six there")
    return six_dir


def cmake_defines(settings: list[str]) -> dict[str, str]:
    """The ``-Ccmake.define.NAME=VALUE`` settings of a pass, as CMake's ``-D`` would get them."""
    prefix = "-Ccmake.define."
    return dict(s.removeprefix(prefix).split("=", 1) for s in settings if s.startswith(prefix) and "=" in s)


def config_settings(six_dir: Path, excludes: list[str] | None) -> list[str]:
    """pip's ``-C`` options: always the six dir; ``excludes`` (when given) as ``wheel.exclude``."""
    settings = [f"-Ccmake.define.PYTHON_SIX_SOURCE_DIR={six_dir}"]
    if excludes is not None:
        settings.append(exclude_setting(excludes))
    return settings
