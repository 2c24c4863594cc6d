"""The variant config files in ``.ci_support/``: listing, parsing and short aliases.

conda-smithy writes these files in a tiny YAML subset, and that subset is all we accept::

    key:            # top-level key ...
    - value         # ... mapping to a list of scalars (plain, 'single' or "double" quoted)
    zip_keys:       # a list of lists of scalars
    - - a
      - b
    pin_run_as_build:   # a mapping of mappings of scalars
      python:
        min_pin: x.x

Anything else is rejected with a ``ConfigError`` naming the file and line, rather than being
guessed at. All scalar values stay strings, as conda-build sees them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

# an alias token selects linux-aarch64 configs by an arm variant: ``linux_aarch64_tegra``
from megabuild.model import ARM_VARIANT_NAMES as ARM_VARIANTS
from megabuild.model import BLAS_IMPLS, GENERIC_BLAS

from .errors import UsageError, capped

PLATFORMS = ("linux_64", "linux_aarch64", "osx_64", "osx_arm64", "win_64")
"""Platforms an alias may start with (longest names first where one is a prefix of another)."""

_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_.\-]*):\s*$")
_SUBKEY_RE = re.compile(r"^( +)([A-Za-z_][A-Za-z0-9_.\-]*):\s*(.*?)\s*$")
_ITEM_RE = re.compile(r"^( *)- (.*)$")
_ZIP_FIRST_RE = re.compile(r"^( *)- - (.*)$")
_PLAIN_OK = re.compile(r"^[^\s'\"\[\]{}&*!|>%@`#,][^#]*?$")


class ConfigError(UsageError):
    """A config file could not be parsed, or a config name/alias could not be resolved."""


@dataclass(frozen=True)
class Config:
    """One ``.ci_support/<name>.yaml`` file."""

    name: str
    """File name without ``.yaml``."""
    path: Path
    values: dict[str, list[str]]
    """Every list-valued key (not ``zip_keys`` / ``pin_run_as_build``), values as strings."""
    zip_keys: list[list[str]] = field(default_factory=list)
    pin_run_as_build: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def subdir(self) -> str:
        """conda subdir, e.g. ``linux-64`` (from ``target_platform``)."""
        targets = self.values.get("target_platform")
        if not targets:
            raise ConfigError(f"{self.path}: no target_platform")
        if len(set(targets)) != 1:
            raise ConfigError(f"{self.path}: several target_platform values {targets}")
        return targets[0]

    @property
    def platform(self) -> str:
        """Platform with an underscore, e.g. ``linux_64``."""
        return self.subdir.replace("-", "_")

    def get(self, key: str) -> list[str]:
        return list(self.values.get(key, []))


def _scalar(text: str, where: str) -> str:
    text = text.strip()
    if not text:
        raise ConfigError(f"{where}: empty value")
    if text[0] == "'":
        if len(text) < 2 or text[-1] != "'":
            raise ConfigError(f"{where}: unterminated single-quoted value {text!r}")
        inner = text[1:-1]
        if re.search(r"(?<!')'(?!')", inner.replace("''", "")):
            raise ConfigError(f"{where}: bad quoting in {text!r}")
        return inner.replace("''", "'")
    if text[0] == '"':
        if len(text) < 2 or text[-1] != '"' or text.endswith('\\"'):
            raise ConfigError(f"{where}: unterminated double-quoted value {text!r}")
        inner = text[1:-1]
        if "\\" in inner or '"' in inner:
            raise ConfigError(f"{where}: escapes in double-quoted values are not supported: {text!r}")
        return inner
    if not _PLAIN_OK.match(text) or ": " in text or text.endswith(":"):
        raise ConfigError(f"{where}: unsupported YAML value {text!r} (flow style, anchors, tags, comments?)")
    return text


def parse_config_text(
    text: str, source: str = "<config>"
) -> tuple[dict[str, list[str]], list[list[str]], dict[str, dict[str, str]]]:
    """Parse conda-smithy's YAML subset; returns ``(values, zip_keys, pin_run_as_build)``."""
    values: dict[str, list[str]] = {}
    zip_keys: list[list[str]] = []
    pin_run_as_build: dict[str, dict[str, str]] = {}
    current = None  # the top-level key whose body we are reading
    zip_indent = None  # indentation of the current zip group's continuation items
    pin_pkg = None
    pin_indent = None
    seen: set[str] = set()
    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{source}:{lineno}"
        if "\t" in raw:
            raise ConfigError(f"{where}: tab characters are not supported")
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key_match = _KEY_RE.match(line)
        if key_match:
            current = key_match.group(1)
            if current in seen:
                raise ConfigError(f"{where}: duplicate key {current!r}")
            seen.add(current)
            if current not in ("zip_keys", "pin_run_as_build"):
                values[current] = []
            zip_indent = pin_pkg = pin_indent = None
            continue
        if current is None:
            raise ConfigError(f"{where}: expected 'key:' at the top level, got {line!r}")
        if current == "zip_keys":
            first = _ZIP_FIRST_RE.match(line)
            if first:
                zip_keys.append([_scalar(first.group(2), where)])
                zip_indent = len(first.group(1)) + 2
                continue
            item = _ITEM_RE.match(line)
            if item and zip_indent is not None and len(item.group(1)) == zip_indent:
                zip_keys[-1].append(_scalar(item.group(2), where))
                continue
            raise ConfigError(f"{where}: expected '- - key' or '  - key' in zip_keys, got {line!r}")
        if current == "pin_run_as_build":
            sub = _SUBKEY_RE.match(line)
            if not sub:
                raise ConfigError(f"{where}: expected 'name:' / 'min_pin: x.x' in pin_run_as_build")
            indent, name, value = len(sub.group(1)), sub.group(2), sub.group(3)
            if not value:
                if pin_indent is not None and indent != pin_indent:
                    raise ConfigError(f"{where}: inconsistent indentation in pin_run_as_build")
                pin_indent, pin_pkg = indent, name
                pin_run_as_build[name] = {}
            elif pin_pkg is not None and pin_indent is not None and indent > pin_indent:
                pin_run_as_build[pin_pkg][name] = _scalar(value, where)
            else:
                raise ConfigError(f"{where}: value outside a package in pin_run_as_build")
            continue
        item = _ITEM_RE.match(line)
        if not item or item.group(2).startswith("- "):
            raise ConfigError(f"{where}: expected '- value' under {current!r}, got {line!r}")
        values[current].append(_scalar(item.group(2), where))
    for key, items in values.items():
        if not items:
            raise ConfigError(f"{source}: key {key!r} has no values")
    for group in zip_keys:
        lengths = {len(values.get(k, [])) for k in group if k in values}
        if len(lengths) > 1:
            raise ConfigError(f"{source}: zip_keys group {group} has lists of different lengths")
    return values, zip_keys, pin_run_as_build


def load_config(path: Path) -> Config:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc
    values, zip_keys, pin_run_as_build = parse_config_text(text, str(path))
    return Config(path.stem, path, values, zip_keys, pin_run_as_build)


def list_configs(feedstock_dir: Path) -> list[Config]:
    """All ``.ci_support/*.yaml`` configs (not ``migrations/``, not README), sorted by name."""
    ci_support = Path(feedstock_dir) / ".ci_support"
    if not ci_support.is_dir():
        return []
    return [load_config(p) for p in sorted(ci_support.glob("*.yaml")) if p.is_file()]


# -- aliases -----------------------------------------------------------------------------------


def _cuda_values(config: Config) -> list[str]:
    return config.get("cuda_compiler_version") or ["None"]


def _blas_values(config: Config) -> list[str]:
    return config.get("blas_impl") or [GENERIC_BLAS]


def _python_matches(value: str, wanted: str) -> bool:
    version = value.split(" ")[0]
    return version == wanted or (version.startswith(wanted) and not version[len(wanted)].isdigit())


def _token_matches(token: str, config: Config) -> bool:
    if "=" in token:
        key, _, value = token.partition("=")
        return value in config.get(key)
    cuda = re.fullmatch(r"cuda([0-9][0-9.]*)", token)
    if cuda:
        wanted = cuda.group(1).replace(".", "")
        return any(v.replace(".", "") == wanted for v in _cuda_values(config) if v != "None")
    if token == "cpu":
        return "None" in _cuda_values(config)
    if token in ARM_VARIANTS:
        return token in (config.get("arm_variant_type") or [ARM_VARIANTS[0]])
    if token in BLAS_IMPLS:
        return token in _blas_values(config)
    py = re.fullmatch(r"py([0-9]+(?:\.[0-9]+)*)", token)
    if py:
        return any(_python_matches(v, py.group(1)) for v in config.get("python"))
    raise ConfigError(f"unknown alias token {token!r}")


def _split_tokens(rest: str) -> list[str]:
    """Split ``cuda12.6_mkl_c_stdlib_version=2.28`` into tokens; ``key=value`` keys may contain ``_``."""
    pieces = [p for p in rest.split("_") if p] if rest else []
    tokens: list[str] = []
    pending: list[str] = []
    for piece in pieces:
        if "=" in piece:
            tokens.append("_".join([*pending, piece]))
            pending = []
        elif pending or not _is_simple_token(piece):
            pending.append(piece)
        else:
            tokens.append(piece)
    if pending:
        raise ConfigError(f"unknown alias token {'_'.join(pending)!r}")
    return tokens


def _is_simple_token(piece: str) -> bool:
    simple = re.fullmatch(r"cuda[0-9][0-9.]*|cpu|mkl|generic|py[0-9]+(?:\.[0-9]+)*", piece)
    return piece in ARM_VARIANTS or bool(simple)


def _platform_of(name: str) -> tuple[str | None, str | None]:
    for platform in sorted(PLATFORMS, key=len, reverse=True):
        if name == platform or name.startswith(platform + "_"):
            return platform, name[len(platform) + 1 :]
    return None, None


def short_alias(config: Config, configs: list[Config]) -> str:
    """A short alias selecting exactly this config among ``configs`` (or its file name).

    ``<platform>_<cudaX.Y|cpu>[_<blas>][_pyX.Y]``, adding tokens until the alias is unique.
    """
    cuda = _cuda_values(config)
    tokens = ["cpu" if cuda == ["None"] else f"cuda{cuda[0]}" if len(cuda) == 1 else ""]
    blas = config.get("blas_impl")
    if len(blas) == 1:
        tokens.append(blas[0])
    pythons = config.get("python")
    if len(pythons) == 1:
        tokens.append("py" + ".".join(pythons[0].split(" ")[0].split(".")[:2]))
    variant = config.get("arm_variant_type")
    if len(variant) == 1 and variant[0] != ARM_VARIANTS[0]:
        tokens.insert(0, variant[0])  # linux_aarch64_tegra
    tokens = [t for t in tokens if t]
    for n in range(len(tokens) + 1):
        alias = "_".join([config.platform, *tokens[:n]])
        try:
            if [c.name for c in _match(alias, configs)] == [config.name]:
                return alias
        except ConfigError:
            continue
    return config.name


def example_aliases(configs: list[Config]) -> list[str]:
    """Platform aliases plus each config's short alias, de-duplicated, in a stable order."""
    seen: dict[str, None] = {}
    for config in configs:
        seen.setdefault(config.platform, None)
    for config in configs:
        seen.setdefault(short_alias(config, configs), None)
    return list(seen)


def _unknown(name: str, configs: list[Config], why: str) -> ConfigError:
    if not configs:
        return ConfigError(f"unknown config {name!r}: no .ci_support/*.yaml configs (rerender first?)")
    # Config names run to ~150 characters each: a handful of short aliases is the useful hint.
    aliases = capped(example_aliases(configs))
    return ConfigError(
        f"unknown config {name!r} ({why}); {len(configs)} configs in .ci_support/; aliases: {aliases}"
    )


def _match(name: str, configs: list[Config]) -> list[Config]:
    """Configs selected by ``name``; raises ``ConfigError`` (without listings) when none is."""
    stem = name[:-5] if name.endswith(".yaml") else name
    exact = [c for c in configs if c.name == stem]
    if exact:
        return exact
    platform, rest = _platform_of(stem)
    if platform is None or rest is None:
        raise ConfigError("no such file and not <platform>[_token...]")
    tokens = _split_tokens(rest)
    found = [c for c in configs if c.platform == platform and all(_token_matches(t, c) for t in tokens)]
    if not found:
        raise ConfigError("no config matches")
    return found


def resolve_configs(name: str, configs: list[Config]) -> list[Config]:
    """Configs selected by ``name``: an exact file name (without ``.yaml``) or an alias.

    An alias is ``<platform>[_<token>...]``; every token must match: ``cudaX.Y`` (cuda_compiler_version),
    ``cpu`` (no CUDA), ``mkl`` / ``generic`` (blas_impl), ``pyX.Y`` (a python value starting with X.Y),
    ``sbsa`` / ``tegra`` (arm_variant_type; a config without it counts as ``sbsa``),
    ``key=value`` (``value`` is one of the config's values for ``key``). A config without
    ``cuda_compiler_version`` counts as ``cpu``, one without ``blas_impl`` as ``generic``.
    """
    try:
        return _match(name, configs)
    except ConfigError as exc:
        raise _unknown(name, configs, str(exc)) from None
