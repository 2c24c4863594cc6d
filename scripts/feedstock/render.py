"""Render ``recipe/meta.yaml`` (conda-build v0 format) for one ``.ci_support`` config, offline.

This is a model of what ``conda_build.api.render`` does, small enough to read in one sitting and
strict where conda-build is lenient (an unknown name in a selector or template is an error here,
conda-build silently treats it as ``False`` / empty). The steps, each mirroring conda-build:

1. Expand the config into full variants: the product over its keys, ``zip_keys`` groups zipped.
2. For each variant: select ``# [expr]`` lines, render Jinja (conda-build's context functions),
   select lines again, parse YAML. Outputs with ``build/skip: true`` are dropped.
3. For each output, find the variant keys it *uses* the way conda-build decides it
   (``MetaData.get_used_vars``): the key names in the output's own block of ``meta.yaml``
   (selectors in the raw text; ``{{ key }}``, ``{% if/for/set ... key %}``, bare ``- key``
   requirements in the selected text; compiler/stdlib keys through ``compiler('c')`` etc.) plus
   ``$key`` / ``${key}`` in the output's ``.sh`` script, plus ``target_platform`` and
   ``channel_targets``. Outputs are de-duplicated on (name, used values): one ``pytorch`` per
   Python, one ``libtorch-cuda-linalg`` per ``with_magma``, one ``libtorch`` per config.
4. Render each kept output again with its own ``PKG_HASH``/``PKG_BUILDNUM`` and
   ``pin_subpackage`` resolved against its siblings, then *finalize*: ``depends`` / ``constrains``.

``PKG_HASH`` is ``sha1(json.dumps({used key: value}, sort_keys=True))[:7]`` over the output's used
variant values (minus python/perl/lua/r_base unless the value contains a space, plus virtual
``__*`` run requirements, those the run_exports of the build and host requirements add included),
which is how conda-build's ``hash_dependencies`` does it for the package it builds (the finalized
recipe); but our set of used keys is a model, so hashes can differ from conda-build's. Compare
build strings with the hash masked (``mask_hash``).

Finalization is a model too: no solver runs. ``pin_run_as_build`` uses the version from the host
spec instead of the resolved package, ``pin_compatible`` gives the bare name (as conda-build does
with ``bypass_env_check``), and the run_exports of external packages come from the small table
``EXTERNAL_RUN_EXPORTS`` below, not from the packages themselves.

Known differences from ``conda_build.api.render(..., finalize=False, bypass_env_check=True)``
(checked against conda-build on the toy recipe and the real one: names, versions, build numbers,
build strings *including hashes*, requirements and used variables agree except for these):

- The hash counts the ``__*`` run_exports (``sysroot_linux-64``'s ``__glibc``): the build string
  of the package conda-build builds; its unfinalized render has no run_exports yet.
- ``pin_subpackage(x, exact=True)`` is resolved to ``x <version> <build string>`` (conda-build
  does that only when finalizing; unfinalized it leaves the bare name).
- ``build_platform`` comes from ``conda-forge.yml`` (what CI does: osx-64 is cross-compiled on
  osx-arm64); conda-build with ``--platform`` assumes build == target. Pass ``build_platform``.
- Unknown selector / Jinja names are errors; ``os.environ`` is empty (conda-build exposes the
  caller's environment to selectors and ``environ``).
- Outputs are listed in recipe order, then variant order (conda-build orders topologically).
- conda-build quirks that *are* reproduced, because they decide the CI matrix: a bare
  ``- python`` anywhere in an output's block (even under ``ignore_run_exports_from``) makes it use
  the ``python`` key; in shell scripts only the first ``$`` reference of a line is seen.
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import functools
import hashlib
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import yaml

from .configs import Config, load_config
from .errors import FeedstockError
from .specs import as_list, mask_hash, spec_name

__all__ = [
    "RenderError",
    "RenderedOutput",
    "conda_glob_match",
    "expand_variants",
    "mask_hash",
    "render_all",
    "render_config",
    "select_lines",
    "selector_namespace",
    "spec_name",
]


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class RenderError(FeedstockError):
    """The recipe cannot be rendered for a config (bad selector, undefined name, bad YAML...)."""


# ---------------------------------------------------------------------------------------------
# Selectors (conda_build.metadata.get_selectors / select_lines)
# ---------------------------------------------------------------------------------------------

_OSES = ("linux", "osx", "win", "zos", "emscripten", "wasi", "freebsd")
_ARCHS = ("64", "32", "aarch64", "armv6l", "armv7l", "ppc64", "ppc64le", "riscv64", "s390x", "arm64", "z")
_ARCH_MAP = {"32": "x86", "64": "x86_64"}
_DEFAULT_PYTHON = "3.12"
_DEFAULT_NUMPY = "1.26"


def _version_int(value: str) -> int:
    major, minor, *_ = [*value.split(" ")[0].split("."), "0"]
    return int(f"{major}{minor}")


def selector_namespace(subdir: str, build_subdir: str, variant: Mapping[str, str]) -> dict[str, Any]:
    """Names usable in ``# [expr]`` selectors, like ``conda_build.metadata.get_selectors``.

    Not included (conda-build has them): the process environment (``os.environ`` entries), since
    a render must not depend on the caller's shell. conda-build has no ``osx64``/``osx_64`` names.
    """
    ns: dict[str, Any] = {
        "linux32": subdir == "linux-32",
        "linux64": subdir == "linux-64",
        "arm": subdir.startswith("linux-arm"),
        "unix": subdir.startswith(("linux-", "osx-", "emscripten-")),
        "win32": subdir == "win-32",
        "win64": subdir == "win-64",
        "nomkl": False,
    }
    for os_name in _OSES:
        ns[os_name] = subdir.startswith(f"{os_name}-")
    for arch in _ARCHS:
        ns[_ARCH_MAP.get(arch, arch)] = subdir.endswith(f"-{arch}")
    ns["x86"] = subdir.endswith(("-32", "-64"))
    ns["build_platform"] = build_subdir
    python = variant.get("python", _DEFAULT_PYTHON)
    py = _version_int(python)
    major = python.split(".")[0]
    ns.update(py=py, py3k=major == "3", py2k=major == "2")
    ns.update({f"py{v}": py == v for v in (26, 27, 33, 34, 35, 36)})
    ns["np"] = int("".join(variant.get("numpy", _DEFAULT_NUMPY).split(".")[:2]))
    ns["pl"] = variant.get("perl", "5.26.2")
    ns["lua"] = variant.get("lua", "5")
    ns["luajit"] = ns["lua"][0] == "2"
    for key, value in variant.items():
        if key in ns:
            continue
        try:
            ns[key] = int(value)
        except ValueError:
            ns[key] = value.lower() == "true" if value.lower() in ("true", "false") else value
    return ns


# conda_build.metadata.sel_pat: the selector is the last [...] on the line, after the content.
_SEL_PAT = re.compile(r"(.+?)\s*(#.*)?\[([^\[\]]+)\](?(2)[^\(\)]*)$")
_SELECTOR_BUILTINS = {"int": int, "float": float, "len": len, "str": str, "list": list, "dict": dict}


@functools.lru_cache(maxsize=65536)
def split_selector(line: str) -> tuple[str | None, str]:
    """``(selector or None, line without it)`` for one line, as conda-build splits it."""
    line = line.rstrip()
    if line.lstrip().startswith("#") or not line:
        return None, ""
    quote = line[-1] if line[-1] in ("'", '"') else ""
    if "[" in line and "]" in line:
        match = _SEL_PAT.match(line)
        if match and match.group(3):
            return match.group(3), (match.group(1) + quote).rstrip()
    return None, line


@functools.lru_cache(maxsize=4096)
def _compile_selector(selector: str) -> Any:
    return compile(selector.strip(), "<selector>", "eval")


def eval_selector(selector: str, namespace: Mapping[str, Any], where: str = "meta.yaml") -> bool:
    try:
        code = _compile_selector(selector)
    except SyntaxError as exc:
        raise RenderError(f"{where}: invalid selector [{selector}]: {exc.msg}") from None
    for name in code.co_names:
        if name not in namespace and name not in _SELECTOR_BUILTINS and not _is_attribute(name, selector):
            raise RenderError(
                f"{where}: unknown name {name!r} in selector [{selector}] "
                "(conda-build would silently treat it as False)"
            )
    try:
        return bool(eval(code, {"__builtins__": _SELECTOR_BUILTINS}, dict(namespace)))
    except Exception as exc:
        raise RenderError(f"{where}: selector [{selector}] failed: {type(exc).__name__}: {exc}") from None


def _is_attribute(name: str, selector: str) -> bool:
    # co_names also lists attribute names (``x.startswith``); those are not variables.
    return re.search(rf"\.\s*{re.escape(name)}\b", selector) is not None


def select_lines(text: str, namespace: Mapping[str, Any], source: str = "meta.yaml") -> str:
    """Keep lines whose selector is true; comment lines become blank (as in conda-build)."""
    out = []
    cache: dict[str, bool] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        selector, line = split_selector(raw)
        if selector is None:
            out.append(line)
            continue
        if selector not in cache:
            cache[selector] = eval_selector(selector, namespace, f"{source}:{lineno}")
        if cache[selector]:
            out.append(line)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# Used variables (conda_build.variants.find_used_variables_in_text & friends)
# ---------------------------------------------------------------------------------------------

_OUTPUT_RE = re.compile(r"^\ +-\ +(?:name|type):.+?(?=^\w|\Z|^\ +-\ +(?:name|type))", flags=re.M | re.S)
_OUTPUTS_SECTION_RE = re.compile(r"(^outputs:.*?)(?=^test:|^extra:|^about:|\Z)", flags=re.M | re.S)
_REQS_RE = re.compile(r"requirements:.+?(?=^\w|\Z|^\s+-\s(?=name|type))", flags=re.M | re.S)


def find_used_variables_in_text(keys: Iterable[str], text: str, selectors_only: bool = False) -> set[str]:
    """Variant keys that ``text`` refers to, with conda-build's regular expressions."""
    used = set()
    lines = text.splitlines()
    for key in keys:
        patterns = []
        target = re.match(r"(.*?)_(compiler|stdlib)(_version)?$", key)
        if target and not selectors_only:
            lang, kind = target.group(1), target.group(2)
            patterns.append(rf"\{{\s*{kind}\([\'\"]{re.escape(lang)}[\"\'][^\{{]*?\}}")
            candidates = [line for line in lines if key in line or lang in line]
        elif key.startswith("cdt_"):
            candidates = [line for line in lines if key in line or "cdt(" in line]
            patterns.append(r"\{{\s*cdt\(")
        else:
            candidates = [line for line in lines if key in line.replace("-", "_")]
        if not candidates:
            continue
        k = re.escape(key)
        req_k = "[-_]".join(map(re.escape, key.split("_")))
        if selectors_only:
            patterns.insert(0, rf"^[^#\[]*?\#?\s\[[^\]]*?(?<![_\w\d]){k}[=\s<>!\]]")
        else:
            patterns += [
                rf"\{{\s*(?:pin_[a-z]+\(\s*?['\"])?{k}(?:[^_0-9a-zA-Z].*?)?\}}\}}",
                rf"^\s+\-\s+{req_k}\s*(?:\s[\[#]|$)",
                r"(?:^|[^\{])\{%\s*(?:el)?if\s*.*" + k + r"\s*(?:[^%]*?)?%\}",
                r"(?:^|[^\{])\{%\s*for\s*.*\s*in\s*" + k + r"(?![a-zA-Z_0-9])(?:[^%]*?)?%\}",
                r"(?:^|[^\{])\{%\s*set\s*.*\s*=\s*.*(?<![a-zA-Z_0-9])"
                + k
                + r"(?![a-zA-Z_0-9])(?:[^%]*?)?%\}",
            ]
        combined = re.compile("|".join(patterns))
        if any(combined.search(line) for line in candidates):
            used.add(key)
    return used


def find_used_variables_in_shell_script(keys: Iterable[str], path: Path) -> set[str]:
    """Keys referenced as ``$key`` / ``${key}`` in a shell script (``source`` is not followed)."""
    text = path.read_text(encoding="utf-8")
    return {
        key
        for key in keys
        if key in text
        and re.search(rf"(^[^$]*?\$\{{?\s*{re.escape(key)}\s*[\s|\}}])", text, flags=re.M | re.S)
    }


def find_used_variables_in_batch_script(keys: Iterable[str], path: Path) -> set[str]:
    """Keys referenced as ``%key%`` in a batch script (conda-build: only this form, not ``!key!``
    or ``%key:~0,2%``)."""
    text = path.read_text(encoding="utf-8")
    return {key for key in keys if key in text and re.search(rf"%{re.escape(key)}%", text)}


def output_blocks(meta_text: str) -> list[str]:
    """The raw text of each ``- name:`` block under ``outputs:`` (conda-build's ``output_re``)."""
    match = _OUTPUTS_SECTION_RE.search(meta_text)
    return _OUTPUT_RE.findall(match.group(1)) if match else []


# ---------------------------------------------------------------------------------------------
# Versions, pins, match specs
# ---------------------------------------------------------------------------------------------


def _increment(part: str, alpha: bool) -> str:
    try:
        return str(int(part) + 1) + ("a" if alpha else ".0a0")
    except ValueError:
        return chr(ord(part) + 1)


def apply_pin_expressions(
    version: str, min_pin: str | None = "x.x.x.x.x.x.x", max_pin: str | None = "x"
) -> str:
    """``>=lower,<upper`` from a version and pin expressions (conda_build.utils, dotted versions only)."""
    version = version.strip()
    base = version[:-2] if version.endswith(".*") else version.rstrip("*")
    parts = [p for p in re.split(r"[._-]", base) if p]
    pins = [len(p.split(".")) if p else None for p in (min_pin, max_pin)]
    if max_pin and pins[1] is not None and pins[1] > len(parts):
        pins[1] = len(parts)
    lower = ".".join(parts[: pins[0]]) if pins[0] else ""
    upper = ""
    if pins[1]:
        head = parts[: pins[1]]
        alpha = pins[1] < len(parts) and parts[pins[1]].isalpha()
        upper = ".".join([*head[:-1], _increment(head[-1], alpha)])
    specs = []
    if lower:
        specs.append(">=" + lower)
    if upper:
        specs.append("<" + upper)
    return ",".join(specs)


_SPEC_NEEDING_STAR = re.compile(r"([\w\d\.\-\_]+)\s+((?<![><=])[\w\d\.\-\_]+?(?!\*))(\s+[\w\d\.\_]+)?$")


def ensure_valid_spec(spec: str) -> str:
    """Add ``.*`` to ``name 1.2`` (not to exact ``name 1.2 build`` pins), as conda-build does."""
    match = _SPEC_NEEDING_STAR.match(spec)
    if match and not match.group(3):
        if match.group(1) in ("python", "numpy") and match.group(2) == "x.x":
            return _SPEC_NEEDING_STAR.sub(r"\1 \2", spec)
        if "*" not in spec:
            return _SPEC_NEEDING_STAR.sub(r"\1 \2.*", spec)
    return spec


def conda_glob_match(pattern: str, value: str) -> bool:
    """conda's ``*`` glob on a build string or version (``fnmatch`` without ``?``/``[]`` classes)."""
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]").replace("?", "[?]"))


# ---------------------------------------------------------------------------------------------
# run_exports of external packages: a documented model, not the packages' real metadata
# ---------------------------------------------------------------------------------------------


def _python_abi(spec: str) -> list[str]:
    version = spec.split()[1] if len(spec.split()) > 1 else _DEFAULT_PYTHON
    major_minor = ".".join(version.rstrip(".*").split(".")[:2])
    # the free-threaded python (``3.14.* *_cp314t``) exports its own ABI: ``python_abi 3.14.* *_cp314t``
    flag = "t" if spec.split()[-1].endswith("t") and len(spec.split()) > 2 else ""
    return [f"python_abi {major_minor}.* *_cp{major_minor.replace('.', '')}{flag}"]


def _lower_bound(prefix: str) -> Callable[[str], list[str]]:
    def export(spec: str) -> list[str]:
        parts = spec.split()
        if len(parts) < 2:
            return [prefix]
        return [f"{prefix} >={parts[1].rstrip('.*')}"]

    return export


def _cuda_version(spec: str) -> list[str]:
    parts = spec.split()
    if len(parts) < 2:
        return ["cuda-version"]
    version = parts[1].rstrip(".*")
    return [f"cuda-version >={version},<{int(version.split('.')[0]) + 1}"]


def _glibc(spec: str) -> list[str]:
    parts = spec.split()
    return [f"__glibc >={parts[1].rstrip('.*')},<3.0.a0"] if len(parts) > 1 else ["__glibc"]


# name pattern (fnmatch) -> (weak exports, strong exports); each a function of the requirement spec.
EXTERNAL_RUN_EXPORTS: dict[
    str, tuple[Callable[[str], list[str]] | None, Callable[[str], list[str]] | None]
] = {
    "python": (_python_abi, None),
    "numpy": (lambda spec: ["numpy >=1.23,<3"], None),
    "libmagma-devel": (lambda spec: ["libmagma"], None),
    # blas-feedstock / lapack-feedstock: pin_subpackage(<name>, max_pin="x") on every build
    "libblas": (lambda spec: ["libblas >=3.9.0,<4.0a0"], None),
    "libcblas": (lambda spec: ["libcblas >=3.9.0,<4.0a0"], None),
    "liblapack": (lambda spec: ["liblapack >=3.9.0,<4.0a0"], None),
    "mkl-devel": (lambda spec: ["mkl"], None),
    "cuda-cudart-dev": (lambda spec: ["cuda-cudart"], None),
    "gcc_linux-*": (None, lambda spec: _lower_bound("libgcc")(spec)),
    "gxx_linux-*": (None, lambda spec: _lower_bound("libstdcxx")(spec) + _lower_bound("libgcc")(spec)),
    "clangxx_osx-*": (None, lambda spec: _lower_bound("libcxx")(spec)),
    "sysroot_linux-*": (None, _glibc),
    "macosx_deployment_target_osx-*": (None, lambda spec: _lower_bound("__osx")(spec)),
    "cuda-nvcc_linux-*": (None, _cuda_version),
    # linux-aarch64: `arm-variant * tegra` picks the Tegra CUDA packages and ties the package to them
    "arm-variant": (None, lambda spec: [spec]),
}
"""Model of the run_exports of the external packages this recipe uses (conda-forge, late 2026).
Versions are taken from the rendered requirement where it has one; the real packages pin more
precisely (e.g. ``libmagma >=2.9.0,<2.10.0a0``)."""


def _external_exports(spec: str) -> tuple[list[str], list[str]]:
    name = spec_name(spec)
    for pattern, (weak, strong) in EXTERNAL_RUN_EXPORTS.items():
        if fnmatch.fnmatchcase(name, pattern):
            return (weak(spec) if weak else []), (strong(spec) if strong else [])
    return [], []


# ---------------------------------------------------------------------------------------------
# Variants
# ---------------------------------------------------------------------------------------------


def _virtual_exports(reqs: Mapping[str, list[str]], build: Mapping[str, Any]) -> dict[str, str]:
    """The ``__*`` run requirements the run_exports of ``reqs`` add (build: strong, host: weak and
    strong), name -> spec: conda-build hashes the finalized recipe, whose run requirements have
    them (``sysroot_linux-64`` exports ``__glibc >=2.17,<3.0.a0``)."""
    ignore = {spec_name(str(s)) for s in as_list(build.get("ignore_run_exports"))}
    ignore_from = {spec_name(str(s)) for s in as_list(build.get("ignore_run_exports_from"))}
    found: dict[str, str] = {}
    for env in ("build", "host"):
        for spec in reqs.get(env, []):
            if spec_name(spec) in ignore_from:
                continue
            weak, strong = _external_exports(spec)
            for export in strong + (weak if env == "host" else []):
                name = spec_name(export)
                if name.startswith("__") and name not in ignore:
                    found.setdefault(name, export)
    return found


def expand_variants(config: Config) -> list[dict[str, str]]:
    """Every full variant of a config: the product of its keys, ``zip_keys`` groups zipped."""
    groups: list[list[str]] = []
    grouped: set[str] = set()
    for group in config.zip_keys:
        present = [k for k in group if k in config.values]
        if present:
            groups.append(present)
            grouped.update(present)
    groups += [[k] for k in sorted(config.values) if k not in grouped]
    axes = []
    for group in groups:
        length = len(config.values[group[0]])
        axes.append([{k: config.values[k][i] for k in group} for i in range(length)])
    variants = []
    for combo in itertools.product(*axes):
        variant: dict[str, str] = {}
        for part in combo:
            variant.update(part)
        variants.append(variant)
    return variants


# ---------------------------------------------------------------------------------------------
# The rendered output
# ---------------------------------------------------------------------------------------------


@dataclass
class RenderedOutput:
    """One package a config produces. ``to_json()`` is the stable JSON form other tools read."""

    config: str
    name: str
    version: str
    build_string: str
    build_number: int
    subdir: str
    depends: list[str]
    constrains: list[str]
    track_features: list[str]
    requirements: dict[str, list[str]]
    script: str | None
    variant: dict[str, str]
    run_exports: dict[str, list[str]]
    test: dict[str, Any]
    noarch: str | None
    # build/detect_binary_files_with_prefix: whether conda-build records binary files holding the
    # host prefix (its default: everywhere but Windows)
    detect_binary_files_with_prefix: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "name": self.name,
            "version": self.version,
            "build_string": self.build_string,
            "build_number": self.build_number,
            "subdir": self.subdir,
            "depends": list(self.depends),
            "constrains": list(self.constrains),
            "track_features": list(self.track_features),
            "requirements": {k: list(v) for k, v in self.requirements.items()},
            "script": self.script,
            "variant": dict(self.variant),
            "run_exports": {k: list(v) for k, v in self.run_exports.items()},
            "test": self.test,
            "noarch": self.noarch,
            "detect_binary_files_with_prefix": self.detect_binary_files_with_prefix,
        }

    @property
    def dist(self) -> str:
        return f"{self.name}-{self.version}-{self.build_string}"


# ---------------------------------------------------------------------------------------------
# The renderer
# ---------------------------------------------------------------------------------------------

_REQ_SECTIONS = ("build", "host", "run", "run_constrained")
_PIN_PLACEHOLDER = "<pin-in-progress>"
_DEFAULT_COMPILERS = {
    "linux": {"c": "gcc", "cxx": "gxx", "fortran": "gfortran"},
    "osx": {"c": "clang", "cxx": "clangxx", "fortran": "gfortran"},
    "win": {"c": "vs2017", "cxx": "vs2017", "fortran": "gfortran"},
}


def _expand_reqs(reqs: Any) -> dict[str, list[str]]:
    if reqs is None:
        return {}
    if not isinstance(reqs, dict):
        items = [str(r) for r in as_list(reqs)]
        return {"host": list(items), "run": list(items)} if items else {}
    return {k: [str(r) for r in as_list(v) if r is not None] for k, v in reqs.items()}


def _insert_variant_versions(reqs: dict[str, list[str]], variant: Mapping[str, str], env: str) -> None:
    """``- python`` in build/host becomes ``python 3.12.* *_cpython`` (conda_build.utils)."""
    build_deps = reqs.get("build", []) + reqs.get("host", [])
    items = reqs.get(env)
    if not items:
        return
    for key, value in variant.items():
        regex = re.compile(r"^({})(?:\s*$)".format(key.replace("_", "[-_]")))
        for i, req in enumerate(items):
            match = regex.match(req)
            if match and (env in ("build", "host") or match.group(1) in build_deps):
                items[i] = ensure_valid_spec(f"{match.group(1)} {value}")


@dataclass
class _Candidate:
    """An output seen while rendering one full variant, before finalization."""

    index: int
    name: str
    variant: dict[str, str]  # the full variant it was rendered with
    used: dict[str, str]  # used key -> value
    data: dict[str, Any]  # the first-pass rendered output dict
    number: int
    final: dict[str, Any] | None = None  # the second-pass rendered output dict
    hash: str = ""
    build_string: str = ""
    pins_in_progress: bool = False


class _Renderer:
    def __init__(self, config: Config, recipe_dir: Path, build_subdir: str | None) -> None:
        self.config = config
        self.recipe_dir = Path(recipe_dir)
        self.subdir = config.subdir
        self.build_subdir = build_subdir or self.subdir
        meta_path = self.recipe_dir / "meta.yaml"
        try:
            self.meta_text = meta_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise RenderError(f"cannot read {meta_path}: {exc}") from None
        self.candidates: list[_Candidate] = []
        self._env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
        self._templates: dict[str, jinja2.Template] = {}
        self._parsed: dict[str, dict[str, Any]] = {}
        self._top_cache: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._raw_blocks = output_blocks(self.meta_text)
        self._used_cache: dict[tuple[Any, ...], set[str]] = {}

    # -- jinja ----------------------------------------------------------------------------------

    def _context(
        self,
        variant: Mapping[str, str],
        *,
        pkg_name: str,
        version: str,
        number: int,
        pkg_hash: str,
        pin_subpackage: Callable[..., str],
    ) -> dict[str, Any]:
        ns = selector_namespace(self.subdir, self.build_subdir, variant)
        python = variant.get("python", _DEFAULT_PYTHON).split(" ")[0]
        py_ver = ".".join(python.split(".")[:2])
        numpy = variant.get("numpy", _DEFAULT_NUMPY)
        ctx: dict[str, Any] = dict(ns)
        ctx.update(
            PKG_NAME=pkg_name,
            PKG_VERSION=version,
            PKG_BUILDNUM=str(number),
            PKG_BUILD_STRING="placeholder",
            PKG_HASH=pkg_hash,
            CONDA_PY=py_ver.replace(".", ""),
            PY_VER=py_ver,
            PY3K="1" if py_ver.startswith("3") else "0",
            NPY_VER=".".join(numpy.split(".")[:2]),
            CONDA_NPY="".join(numpy.split(".")[:2]),
            SHLIB_EXT={"osx": ".dylib", "win": ".dll"}.get(self.subdir.split("-")[0], ".so"),
            CONDA_BUILD_STATE="RENDER",
            target_platform=self.subdir,
            build_platform=self.build_subdir,
        )
        # variant values reach Jinja as the raw strings (selectors get converted ones)
        ctx.update(variant)
        ctx.update(
            compiler=lambda lang: self._target(lang, variant, "compiler"),
            stdlib=lambda lang: self._target(lang, variant, "stdlib"),
            pin_subpackage=pin_subpackage,
            pin_compatible=lambda name, *args, **kwargs: name,
            cdt=lambda name: self._cdt(name, variant),
            load_file_regex=lambda *args, **kwargs: None,
            environ={},
            os=_OsSubset(),
        )
        return ctx

    def _target(self, lang: str, variant: Mapping[str, str], kind: str) -> str:
        platform = self.subdir.split("-")[0]
        prefix = _DEFAULT_COMPILERS.get(platform, {}).get(lang, lang) if kind == "compiler" else lang
        prefix = variant.get(f"{lang}_{kind}", prefix)
        version = variant.get(f"{lang}_{kind}_version")
        package = f"{prefix}_{variant.get('target_platform', self.subdir)}"
        return ensure_valid_spec(f"{package} {version}") if version else package

    def _cdt(self, name: str, variant: Mapping[str, str]) -> str:
        arch = self.subdir.split("-", 1)[1]
        cdt_arch, cdt_name = {"64": ("x86_64", "cos6"), "32": ("i686", "cos6")}.get(arch, (arch, "cos7"))
        cdt_name = variant.get("cdt_name", cdt_name)
        cdt_arch = variant.get("cdt_arch", cdt_arch)
        head, _, rest = name.partition(" ")
        return f"{head}-{cdt_name}-{cdt_arch}" + (f" {rest}" if rest else "")

    def _render_text(self, variant: Mapping[str, str], ctx: Mapping[str, Any]) -> dict[str, Any]:
        ns = selector_namespace(self.subdir, self.build_subdir, variant)
        text = select_lines(self.meta_text, ns)
        try:
            if text not in self._templates:
                self._templates[text] = self._env.from_string(text)
            rendered = self._templates[text].render(**ctx)
        except jinja2.TemplateError as exc:
            raise RenderError(f"meta.yaml: Jinja error for {self.config.name}: {exc}") from None
        text = select_lines(rendered, ns, "meta.yaml (rendered)")
        if text in self._parsed:
            return copy.deepcopy(self._parsed[text])
        try:
            data = yaml.load(text, Loader=_YAML_LOADER) or {}
        except yaml.YAMLError as exc:
            raise RenderError(
                f"meta.yaml: YAML error after rendering for {self.config.name}: {exc}"
            ) from None
        if not isinstance(data, dict):
            raise RenderError("meta.yaml: does not render to a mapping")
        self._parsed[text] = data
        return copy.deepcopy(data)

    # -- first pass: which outputs exist, with which used variables ------------------------------

    def discover(self) -> None:
        keys = sorted(self.config.values)
        for variant in expand_variants(self.config):

            def placeholder_pin(name: str, *args: Any, **kwargs: Any) -> str:
                return name

            top = self._top_level(variant, placeholder_pin)
            if _truthy(top.get("build", {}).get("skip")):
                continue
            outputs = top.get("outputs") or []
            version = str(top.get("package", {}).get("version", ""))
            top_number = int(top.get("build", {}).get("number", 0) or 0)
            for index, out in enumerate(outputs):
                if not isinstance(out, dict) or "name" not in out:
                    raise RenderError(f"meta.yaml: output #{index + 1} has no name")
                build = out.get("build") or {}
                if _truthy(build.get("skip")):
                    continue
                used = self._used_vars(index, outputs, out, variant, keys)
                used_values = {k: variant[k] for k in sorted(used)}
                name = str(out["name"])
                if any(c.name == name and c.used == used_values for c in self.candidates):
                    continue
                number = int(build.get("number", top_number) or 0)
                out.setdefault("version", version)
                self.candidates.append(_Candidate(index, name, dict(variant), used_values, out, number))

    def _top_level(self, variant: Mapping[str, str], pin: Callable[..., str]) -> dict[str, Any]:
        """The whole recipe rendered for ``variant`` (``pin`` must not depend on state: cached)."""
        key = tuple(sorted(variant.items()))
        if key not in self._top_cache:
            self._top_cache[key] = self._render_top_level(variant, pin)
        return copy.deepcopy(self._top_cache[key])

    def _render_top_level(self, variant: Mapping[str, str], pin: Callable[..., str]) -> dict[str, Any]:
        name, version, number = "", "", 0
        for _ in range(3):  # PKG_VERSION / PKG_BUILDNUM come from the recipe itself
            ctx = self._context(
                variant, pkg_name=name, version=version, number=number, pkg_hash="1234567", pin_subpackage=pin
            )
            data = self._render_text(variant, ctx)
            package = data.get("package") or {}
            new = (
                str(package.get("name", "")),
                str(package.get("version", "")),
                int((data.get("build") or {}).get("number", 0) or 0),
            )
            if new == (name, version, number):
                break
            name, version, number = new
        return data

    def _used_vars(
        self,
        index: int,
        outputs: list[dict[str, Any]],
        out: dict[str, Any],
        variant: Mapping[str, str],
        keys: list[str],
    ) -> set[str]:
        ns = selector_namespace(self.subdir, self.build_subdir, variant)
        raw_blocks = self._raw_blocks
        selected_blocks = output_blocks(select_lines(self.meta_text, ns))
        raw = raw_blocks[index] if index < len(raw_blocks) else ""
        selected = selected_blocks[index] if index < len(selected_blocks) else ""
        cache_key = (index, selected, json.dumps(out, sort_keys=True, default=str), tuple(sorted(variant)))
        if cache_key not in self._used_cache:
            self._used_cache[cache_key] = self._compute_used_vars(raw, selected, out, variant, keys)
        return set(self._used_cache[cache_key])

    def _compute_used_vars(
        self, raw: str, selected: str, out: dict[str, Any], variant: Mapping[str, str], keys: list[str]
    ) -> set[str]:
        used = find_used_variables_in_text(keys, raw, selectors_only=True)
        all_used = used | find_used_variables_in_text(keys, selected)
        reqs_match = _REQS_RE.search(selected)
        in_reqs = find_used_variables_in_text(keys, reqs_match.group()) if reqs_match else set()
        used = (all_used - in_reqs) | self._trim_run_only(in_reqs, out)
        script = out.get("script")
        if isinstance(script, str) and script.endswith((".sh", ".bat")):
            path = self.recipe_dir / script
            scan = (
                find_used_variables_in_shell_script
                if script.endswith(".sh")
                else find_used_variables_in_batch_script
            )
            if path.is_file():
                used |= scan(keys, path)
        if "target_platform" in variant and not (out.get("build") or {}).get("noarch"):
            used.add("target_platform")
        if "channel_targets" in variant:
            used.add("channel_targets")
        build = out.get("build") or {}
        used = (used - set(as_list(build.get("force_ignore_keys")))) | set(
            as_list(build.get("force_use_keys"))
        )
        return used & set(variant)

    def _trim_run_only(self, used: set[str], out: Mapping[str, Any]) -> set[str]:
        """conda-build's trim_build_only_deps: drop keys used only as run requirements."""
        reqs = _expand_reqs(out.get("requirements"))
        build = {r.split()[0].replace("-", "_") for r in reqs.get("build", []) if r}
        host = {r.split()[0].replace("-", "_") for r in reqs.get("host", []) if r}
        run = reqs.get("run", [])
        ignore_build_only = set(self.config.get("ignore_build_only_deps"))
        drop = set()
        for dep in used:
            if dep in run:
                if dep not in build and dep not in host:
                    drop.add(dep)
            elif dep in build and dep not in host and dep in ignore_build_only:
                drop.add(dep)
        return used - drop

    # -- second pass: per-output rendering with hash, build number and sibling pins --------------

    def _hash(self, cand: _Candidate) -> str:
        excludes = ("python", "r_base", "perl", "lua")
        keys = [k for k in cand.used if not (k in excludes and " " not in cand.used[k])]
        contents = {} if keys == ["target_platform"] else {k: cand.used[k] for k in keys}
        reqs = _expand_reqs(cand.data.get("requirements"))
        contents.update(_virtual_exports(reqs, cand.data.get("build") or {}))
        contents.update({r.split(" ")[0]: r for r in reqs.get("run", []) if r.startswith("__")})
        if not contents:
            return ""
        return hashlib.sha1(json.dumps(contents, sort_keys=True).encode()).hexdigest()[:7]

    def finalize_candidate(self, cand: _Candidate) -> _Candidate:
        if cand.final is not None:
            return cand
        if cand.pins_in_progress:
            raise RenderError(f"meta.yaml: circular pin_subpackage(exact=True) involving {cand.name}")
        cand.pins_in_progress = True
        cand.hash = self._hash(cand)

        def pin(
            name: str, min_pin: str = "x.x.x.x.x.x", max_pin: str = "x", exact: bool = False, **_: Any
        ) -> str:
            sibling = self._sibling(name, cand)
            if sibling is None:
                raise RenderError(
                    f"meta.yaml: pin_subpackage({name!r}) in {cand.name}: no such output "
                    f"in {self.config.name}"
                )
            version = str(sibling.data.get("version", ""))
            if exact:
                if sibling.pins_in_progress:
                    # Rendering the whole file also renders the other outputs' blocks; a pin in
                    # them may point back at us. Only a pin inside our own block is a cycle.
                    return f"{sibling.name} {version} {_PIN_PLACEHOLDER}"
                self.finalize_candidate(sibling)
                return f"{sibling.name} {version} {sibling.build_string}"
            return f"{sibling.name} {apply_pin_expressions(version, min_pin, max_pin)}"

        top = self._top_level(cand.variant, lambda name, *a, **k: name)
        ctx = self._context(
            cand.variant,
            pkg_name=cand.name,
            version=str(cand.data.get("version", "")),
            number=cand.number,
            pkg_hash=cand.hash,
            pin_subpackage=pin,
        )
        data = self._render_text(cand.variant, ctx)
        outputs = data.get("outputs") or []
        if cand.index >= len(outputs) or str(outputs[cand.index].get("name")) != cand.name:
            raise RenderError(f"meta.yaml: output {cand.name} moved between render passes")
        final = outputs[cand.index]
        if _PIN_PLACEHOLDER in json.dumps(final, default=str):
            raise RenderError(f"meta.yaml: circular pin_subpackage(exact=True) involving {cand.name}")
        final.setdefault("version", str((top.get("package") or {}).get("version", "")))
        reqs = _expand_reqs(final.get("requirements"))
        for env in ("build", "host", "run"):
            _insert_variant_versions(reqs, cand.variant, env)
        final["requirements"] = reqs
        cand.final = final
        build = final.get("build") or {}
        string = build.get("string")
        cand.build_string = str(string) if string is not None else self._default_string(cand, reqs)
        cand.pins_in_progress = False
        return cand

    def _default_string(self, cand: _Candidate, reqs: Mapping[str, list[str]]) -> str:
        names = {spec_name(r) for r in reqs.get("host", reqs.get("build", []))}
        prefix = ""
        if "python" in names and not (cand.final or {}).get("build", {}).get("noarch"):
            prefix = "py" + str(_version_int(cand.variant.get("python", _DEFAULT_PYTHON)))
        parts = [p for p in (prefix, f"h{cand.hash}" if cand.hash else "") if p]
        return "_".join([*parts, str(cand.number)])

    def _sibling(self, name: str, cand: _Candidate) -> _Candidate | None:
        matches = [c for c in self.candidates if c.name == name]
        if len(matches) == 1:
            return matches[0]
        for other in matches:
            shared = set(other.used) & set(cand.variant)
            if all(other.used[k] == cand.variant[k] for k in shared):
                return other
        return None

    # -- finalize: depends / constrains ----------------------------------------------------------

    def to_output(self, cand: _Candidate) -> RenderedOutput:
        self.finalize_candidate(cand)
        final = cand.final or {}
        build = final.get("build") or {}
        reqs = final["requirements"]
        run_exports = _run_exports_of(build.get("run_exports"))
        ignore = {spec_name(str(s)) for s in as_list(build.get("ignore_run_exports"))}
        ignore_from = {spec_name(str(s)) for s in as_list(build.get("ignore_run_exports_from"))}

        depends = [self._pin_run_as_build(spec, reqs.get("host", [])) for spec in reqs.get("run", [])]
        for env in ("host", "build"):
            for spec in reqs.get(env, []):
                name = spec_name(spec)
                if name in ignore_from:
                    continue
                sibling = self._sibling(name, cand) if any(c.name == name for c in self.candidates) else None
                if sibling is not None:
                    self.finalize_candidate(sibling)
                    exports = _run_exports_of((sibling.final or {}).get("build", {}).get("run_exports"))
                    weak, strong = exports["weak"], exports["strong"]
                else:
                    weak, strong = _external_exports(spec)
                for exported in (weak + strong) if env == "host" else strong:
                    if spec_name(exported) not in ignore:
                        depends.append(exported)
        track_features = [str(t) for t in as_list(build.get("track_features"))]
        noarch = build.get("noarch")
        script = final.get("script")
        return RenderedOutput(
            config=self.config.name,
            name=cand.name,
            version=str(final.get("version", "")),
            build_string=cand.build_string,
            build_number=int(build.get("number", cand.number) or 0),
            subdir="noarch" if noarch else self.subdir,
            depends=_exact_only(_simplify(depends)),
            constrains=_simplify(reqs.get("run_constrained", [])),
            track_features=track_features,
            requirements={k: list(reqs.get(k, [])) for k in _REQ_SECTIONS},
            script=str(script) if script else None,
            variant=dict(cand.used),
            run_exports=run_exports,
            test=final.get("test") or {},
            noarch=str(noarch) if noarch else None,
            detect_binary_files_with_prefix=bool(
                build.get("detect_binary_files_with_prefix", not self.subdir.startswith("win"))
            ),
        )

    def _pin_run_as_build(self, spec: str, host: list[str]) -> str:
        if " " in spec.strip():
            return spec
        pins = {
            "python": {"min_pin": "x.x", "max_pin": "x.x"},
            "r-base": {"min_pin": "x.x", "max_pin": "x.x"},
        }
        pins.update(self.config.pin_run_as_build)
        if spec not in pins:
            return spec
        for host_spec in host:
            parts = host_spec.split()
            if parts[0] == spec and len(parts) > 1 and re.match(r"^[0-9]", parts[1]):
                pin = pins[spec]
                return f"{spec} {apply_pin_expressions(parts[1], pin.get('min_pin'), pin.get('max_pin'))}"
        return spec


class _OsSubset:
    """``os`` in templates: only ``environ`` and ``sep``, with an empty environment."""

    environ: dict[str, str] = {}  # noqa: RUF012 - read-only by convention
    sep = "/"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "yes", "1")
    return bool(value)


def _run_exports_of(value: Any) -> dict[str, list[str]]:
    if value is None:
        return {"weak": [], "strong": []}
    if isinstance(value, dict):
        return {
            "weak": [str(s) for s in as_list(value.get("weak"))],
            "strong": [str(s) for s in as_list(value.get("strong"))],
        }
    return {"weak": [str(s) for s in as_list(value)], "strong": []}


def _simplify(specs: Iterable[str]) -> list[str]:
    """Drop exact duplicates, and bare names where a constrained spec of that name exists."""
    specs = [str(s).strip() for s in specs if str(s).strip()]
    constrained = {spec_name(s) for s in specs if " " in s}
    out: list[str] = []
    for spec in specs:
        if spec in out or (" " not in spec and spec in constrained):
            continue
        out.append(spec)
    return out


def _exact_only(specs: list[str]) -> list[str]:
    """Where a name has an exact pin (version and build, no range or glob), that pin alone:
    conda-build's ``_simplify_to_exact_constraints`` when finalizing (pytorch's
    ``libtorch 2.14.1 <build>`` drops libtorch's own ``libtorch >=2.14.1,<2.15.0a0`` export)."""
    exact = {
        spec_name(s)
        for s in specs
        if len(parts := s.split()) > 2 and not any(c in parts[1] for c in "<>*") and "*" not in parts[2]
    }
    return [s for s in specs if spec_name(s) not in exact or (len(p := s.split()) > 2 and "*" not in p[2])]


def _feedstock_build_platform(feedstock_dir: Path, config: Config) -> str | None:
    """The build subdir conda-smithy uses for this config (``build_platform`` in conda-forge.yml)."""
    path = Path(feedstock_dir) / "conda-forge.yml"
    if not path.is_file():
        return None
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise RenderError(f"{path.name}: {exc}") from None
    mapping = data.get("build_platform") or {}
    build = mapping.get(config.platform)
    return str(build).replace("_", "-", 1) if build else None


def _yaml_scalar_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def recipe_variant_overlay(config: Config, recipe_dir: Path, build_subdir: str) -> Config:
    """``config`` plus the keys of ``recipe/conda_build_config.yaml`` that it lacks.

    conda-build reads the recipe's conda_build_config.yaml before the ``-m`` files, so a key that
    conda-smithy left out of a ``.ci_support`` file (because no output of that platform uses it,
    e.g. ``with_magma`` on osx) still has the recipe's values. Keys in the config file win.
    """
    path = Path(recipe_dir) / "conda_build_config.yaml"
    if not path.is_file():
        return config
    ns = selector_namespace(config.subdir, build_subdir, {})
    text = select_lines(path.read_text(encoding="utf-8"), ns, path.name)
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise RenderError(f"{path.name}: {exc}") from None
    values = {k: list(v) for k, v in config.values.items()}
    for key, items in data.items():
        if key in ("zip_keys", "pin_run_as_build") or key in values or items is None:
            continue
        values[key] = [_yaml_scalar_str(v) for v in as_list(items)]
    return dataclasses.replace(config, values=values)


def _renderer_for(config_path: Path | str, recipe_dir: Path | str, build_platform: str | None) -> _Renderer:
    config = load_config(Path(config_path))
    recipe_dir = Path(recipe_dir)
    if build_platform is None:
        build_platform = _feedstock_build_platform(recipe_dir.parent, config)
    config = recipe_variant_overlay(config, recipe_dir, build_platform or config.subdir)
    return _Renderer(config, recipe_dir, build_platform)


def render_config(
    config_path: Path | str, recipe_dir: Path | str, build_platform: str | None = None
) -> list[RenderedOutput]:
    """Render ``recipe_dir/meta.yaml`` for one ``.ci_support`` config file.

    ``build_platform`` (a subdir like ``linux-64``) defaults to the ``build_platform`` mapping in
    ``conda-forge.yml`` next to ``recipe_dir``, else to the config's own platform.
    """
    renderer = _renderer_for(config_path, recipe_dir, build_platform)
    renderer.discover()
    ordered = sorted(renderer.candidates, key=lambda c: c.index)
    return [renderer.to_output(c) for c in ordered]


def render_top_level_requirements(
    config_path: Path | str, recipe_dir: Path | str, build_platform: str | None = None
) -> list[dict[str, list[str]]]:
    """The top-level ``requirements`` (build/host/run, selectors and Jinja applied; variant pins
    not inserted) of ``recipe_dir/meta.yaml``, once per variant of the config that is not skipped.

    The top level of a megabuild recipe is never a package itself, so :func:`render_config` does
    not report it; its requirements are what the one expensive build compiles against.
    """
    renderer = _renderer_for(config_path, recipe_dir, build_platform)
    found: list[dict[str, list[str]]] = []
    for variant in expand_variants(renderer.config):
        top = renderer._top_level(variant, lambda name, *args, **kwargs: name)
        if _truthy((top.get("build") or {}).get("skip")):
            continue
        reqs = _expand_reqs(top.get("requirements"))
        if reqs not in found:
            found.append(reqs)
    return found


def render_all(feedstock_dir: Path | str) -> dict[str, list[RenderedOutput]]:
    """Render every ``.ci_support`` config of a feedstock: ``{config name: outputs}``."""
    from .configs import list_configs

    feedstock_dir = Path(feedstock_dir)
    return {
        config.name: render_config(config.path, feedstock_dir / "recipe")
        for config in list_configs(feedstock_dir)
    }
