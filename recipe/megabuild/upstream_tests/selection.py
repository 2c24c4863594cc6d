"""The upstream test selection of ``recipe/upstream_tests.json``: load, check, and turn into pytest argv.

The data file is the one place that says which upstream test files the ``pytorch`` output's test
section runs, with which pytest options, and which tests it skips where. Every skip carries our
reason, a selector over the test env (``platform``, ``cuda``, ``blas``, ``python``) and its
provenance in conda-forge's pytorch-cpu feedstock. Loading refuses anything it cannot check: an
unknown key, a value outside the ``universe`` the file declares, a skip without a reason, a ``-k``
term pytest would not parse, a test file of conda-forge's feedstock left out.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megabuild.errors import MegabuildError

SELECTOR_KEYS = ("platform", "cuda", "blas", "python")
MEGABUILD_PYTHON = "megabuild"
"""In ``full_pythons``: the Python of the top-level build (``--megabuild-python``)."""
NO_CUDA = "None"
"""``cuda_compiler_version`` of a CPU config, as conda-build renders it."""

_TOP_KEYS = {
    "about",
    "conda_forge",
    "universe",
    "full_pythons",
    "files",
    "pytest",
    "environment",
    "skips",
    "conda_forge_skips_not_kept",
}
_CONDA_FORGE_KEYS = {
    "feedstock",
    "commit",
    "path",
    "pytorch_version",
    "test_files",
    "inductor_files",
    "skip_lines",
    "skipped_tests",
    "about_skips",
}
_UNIVERSE_KEYS = {"platforms": "platform", "cuda": "cuda", "blas": "blas", "pythons": "python"}
# a -k term: names joined by and/or/not and parentheses (pytest's -k grammar, without its rarer forms)
_K_TOKEN = re.compile(r"\s*(\(|\)|[A-Za-z0-9_]+)")
_COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class PackageTestEnv:
    """One test env of the ``pytorch`` output: its config's values and its Python."""

    platform: str
    cuda: str
    blas: str
    python: str
    """``3.12``, ``3.14t`` (free-threaded)."""
    megabuild_python: str


@dataclass(frozen=True)
class Selector:
    """Where something applies; a key that is absent matches every value."""

    platform: tuple[str, ...] | None = None
    cuda: bool | tuple[str, ...] | None = None
    blas: tuple[str, ...] | None = None
    python: tuple[str, ...] | None = None

    def matches(self, env: PackageTestEnv) -> bool:
        if self.platform is not None and env.platform not in self.platform:
            return False
        if isinstance(self.cuda, bool) and self.cuda != (env.cuda != NO_CUDA):
            return False
        if isinstance(self.cuda, tuple) and env.cuda not in self.cuda:
            return False
        if self.blas is not None and env.blas not in self.blas:
            return False
        return self.python is None or env.python in self.python


@dataclass(frozen=True)
class Skip:
    test: str
    """A ``-k`` term: ``TestTorch and test_print``."""
    when: Selector
    reason: str
    conda_forge: str | None
    """What conda-forge's feedstock had (its comment and selector); None: our skip alone."""


@dataclass(frozen=True)
class Setting:
    """A value chosen by the first entry whose selector matches (the last entry matches all)."""

    value: int
    when: Selector
    reason: str


@dataclass(frozen=True)
class UpstreamFile:
    path: str
    when: Selector
    reason: str


@dataclass(frozen=True)
class Selection:
    universe: dict[str, tuple[str, ...]]
    """The values a selector (and a test env) may name, per selector key."""
    conda_forge_commit: str
    conda_forge_files: tuple[str, ...]
    full_pythons: tuple[str, ...]
    files: tuple[UpstreamFile, ...]
    markers: str
    timeout_s: int
    extra_args: tuple[str, ...]
    workers: tuple[Setting, ...]
    environment: tuple[tuple[str, str], ...]
    skips: tuple[Skip, ...]

    def is_full(self, env: PackageTestEnv) -> bool:
        """Whether *env*'s Python runs the upstream tests (the others get the smoke checks)."""
        wanted = {env.megabuild_python if p == MEGABUILD_PYTHON else p for p in self.full_pythons}
        return env.python in wanted

    def skips_for(self, env: PackageTestEnv) -> tuple[Skip, ...]:
        return tuple(skip for skip in self.skips if skip.when.matches(env))

    def files_for(self, env: PackageTestEnv) -> tuple[str, ...]:
        return tuple(f.path for f in self.files if f.when.matches(env))

    def workers_for(self, env: PackageTestEnv) -> int:
        return next(s.value for s in self.workers if s.when.matches(env))


def pytest_args(selection: Selection, env: PackageTestEnv) -> list[str] | None:
    """The arguments after ``python -m pytest`` for *env*; None where its Python only gets smoke checks."""
    check_env(selection, env)
    if not selection.is_full(env):
        return None
    args = ["-n", str(selection.workers_for(env)), *selection.files_for(env)]
    skips = selection.skips_for(env)
    if skips:
        args += ["-k", "not (" + " or ".join(f"({skip.test})" for skip in skips) + ")"]
    args += ["-m", selection.markers, f"--timeout={selection.timeout_s}", *selection.extra_args]
    return args


def check_env(selection: Selection, env: PackageTestEnv) -> None:
    """Refuse a test env the data does not know: a typo there would silently select nothing."""
    known = selection.universe
    given = {"platform": env.platform, "blas": env.blas, "python": env.python}
    for key, value in given.items():
        if value not in known[key]:
            raise MegabuildError(f"unknown {key} {value!r} (upstream_tests.json knows {list(known[key])})")
    if env.cuda != NO_CUDA and env.cuda not in known["cuda"]:
        raise MegabuildError(f"unknown cuda {env.cuda!r} (upstream_tests.json knows {list(known['cuda'])})")
    if env.megabuild_python not in known["python"]:
        raise MegabuildError(f"unknown megabuild Python {env.megabuild_python!r}")


# ---------------------------------------------------------------------------------------------
# Loading and checking
# ---------------------------------------------------------------------------------------------


def load_selection(path: Path) -> Selection:
    """Read and check *path*; any mistake is a :class:`MegabuildError` naming the entry."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise MegabuildError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise MegabuildError(f"{path}: not JSON: {exc}") from None
    try:
        return parse_selection(raw)
    except MegabuildError as exc:
        raise MegabuildError(f"{path}: {exc}") from None


def parse_selection(raw: Any) -> Selection:
    data = _mapping(raw, "the file", required=_TOP_KEYS)
    universe = _universe(data["universe"])
    conda_forge = _mapping(data["conda_forge"], "conda_forge", required=_CONDA_FORGE_KEYS)
    _text(conda_forge["feedstock"], "conda_forge.feedstock")
    commit = _text(conda_forge["commit"], "conda_forge.commit")
    if not _COMMIT.fullmatch(commit):
        raise MegabuildError(f"conda_forge.commit: not a 40-digit commit: {commit!r}")
    conda_forge_files = (*_texts(conda_forge["test_files"], "conda_forge.test_files"),)
    conda_forge_files += _texts(conda_forge["inductor_files"], "conda_forge.inductor_files")
    files = tuple(_test_file(entry, f"files[{i}]", universe) for i, entry in enumerate(_items(data, "files")))
    missing = sorted(set(conda_forge_files) - {f.path for f in files})
    if missing:
        raise MegabuildError(
            f"files: the test files of conda-forge's feedstock are not all run: missing {missing}"
        )
    skips = tuple(_skip(entry, f"skips[{i}]", universe) for i, entry in enumerate(_items(data, "skips")))
    _no_duplicates([s.test for s in skips], "skips")
    _no_duplicates([f.path for f in files], "files")
    from_conda_forge = {s.test for s in skips if s.conda_forge is not None}
    not_kept = _not_kept(data["conda_forge_skips_not_kept"], {s.test for s in skips})
    skipped = conda_forge["skipped_tests"]
    if not isinstance(skipped, int) or len(from_conda_forge) + not_kept != skipped:
        raise MegabuildError(
            f"conda-forge's feedstock skips {skipped} tests, but {len(from_conda_forge)} skips name it as "
            f"their source and {not_kept} are listed as not kept: account for each"
        )
    full = _mapping(data["full_pythons"], "full_pythons", required={"pythons", "reason"})
    full_pythons = _texts(full["pythons"], "full_pythons.pythons")
    _text(full["reason"], "full_pythons.reason")
    _within(full_pythons, (*universe["python"], MEGABUILD_PYTHON), "full_pythons.pythons")
    pytest = _pytest_options(data["pytest"], universe)
    return Selection(
        universe=universe,
        conda_forge_commit=commit,
        conda_forge_files=conda_forge_files,
        full_pythons=full_pythons,
        files=files,
        skips=skips,
        environment=_environment(data["environment"]),
        **pytest,
    )


def _pytest_options(raw: Any, universe: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    keys = {"markers", "timeout_s", "extra_args", "workers"}
    reasons = {f"{key}_reason" for key in ("markers", "timeout", "extra_args")}
    opts = _mapping(raw, "pytest", required=keys | reasons)
    for key in sorted(reasons):
        _text(opts[key], f"pytest.{key}")
    timeout = opts["timeout_s"]
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout <= 0:
        raise MegabuildError(f"pytest.timeout_s: a positive number of seconds, got {timeout!r}")
    workers = tuple(
        _setting(entry, f"pytest.workers[{i}]", universe) for i, entry in enumerate(opts["workers"])
    )
    if not workers or workers[-1].when != Selector():
        raise MegabuildError("pytest.workers: the last entry must match every env (an empty 'when')")
    return {
        "markers": _text(opts["markers"], "pytest.markers"),
        "timeout_s": timeout,
        "extra_args": _texts(opts["extra_args"], "pytest.extra_args", empty_ok=True),
        "workers": workers,
    }


def _universe(raw: Any) -> dict[str, tuple[str, ...]]:
    universe = _mapping(raw, "universe", required=set(_UNIVERSE_KEYS))
    return {key: _texts(universe[name], f"universe.{name}") for name, key in _UNIVERSE_KEYS.items()}


def _selector(raw: Any, where: str, universe: Mapping[str, tuple[str, ...]]) -> Selector:
    when = _mapping(raw, where, allowed=set(SELECTOR_KEYS))
    values: dict[str, Any] = {}
    for key, value in when.items():
        if key == "cuda" and isinstance(value, bool):
            values[key] = value
            continue
        values[key] = _texts(value, f"{where}.{key}")
        _within(values[key], universe[key], f"{where}.{key}")
    return Selector(**values)


def _skip(raw: Any, where: str, universe: Mapping[str, tuple[str, ...]]) -> Skip:
    entry = _mapping(raw, where, required={"test", "when", "reason", "conda_forge"})
    test = _text(entry["test"], f"{where}.test")
    _check_k_term(test, f"{where}.test")
    conda_forge = entry["conda_forge"]
    if conda_forge is not None:
        conda_forge = _text(conda_forge, f"{where}.conda_forge")
    return Skip(
        test,
        _selector(entry["when"], f"{where}.when", universe),
        _text(entry["reason"], f"{where}.reason"),
        conda_forge,
    )


def _test_file(raw: Any, where: str, universe: Mapping[str, tuple[str, ...]]) -> UpstreamFile:
    entry = _mapping(raw, where, required={"path", "when", "reason"})
    path = _text(entry["path"], f"{where}.path")
    if not (path.startswith("test/") and path.endswith(".py")) or ".." in path.split("/"):
        raise MegabuildError(f"{where}.path: an upstream test file under test/, got {path!r}")
    return UpstreamFile(
        path, _selector(entry["when"], f"{where}.when", universe), _text(entry["reason"], f"{where}.reason")
    )


def _setting(raw: Any, where: str, universe: Mapping[str, tuple[str, ...]]) -> Setting:
    entry = _mapping(raw, where, required={"value", "when", "reason"})
    value = entry["value"]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise MegabuildError(f"{where}.value: a positive integer, got {value!r}")
    return Setting(
        value, _selector(entry["when"], f"{where}.when", universe), _text(entry["reason"], f"{where}.reason")
    )


def _environment(raw: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(raw, list):
        raise MegabuildError("environment: a list")
    out = []
    for i, item in enumerate(raw):
        entry = _mapping(item, f"environment[{i}]", required={"name", "value", "reason"})
        _text(entry["reason"], f"environment[{i}].reason")
        out.append(
            (_text(entry["name"], f"environment[{i}].name"), _text(entry["value"], f"environment[{i}].value"))
        )
    return tuple(out)


def _not_kept(raw: Any, kept: set[str]) -> int:
    """The skips of conda-forge's feedstock we do not keep, each with why; none kept too. Returns how many."""
    if not isinstance(raw, list):
        raise MegabuildError("conda_forge_skips_not_kept: a list")
    for i, item in enumerate(raw):
        entry = _mapping(
            item, f"conda_forge_skips_not_kept[{i}]", required={"test", "conda_forge_selector", "why_not"}
        )
        test = _text(entry["test"], f"conda_forge_skips_not_kept[{i}].test")
        _text(entry["conda_forge_selector"], f"conda_forge_skips_not_kept[{i}].conda_forge_selector")
        _text(entry["why_not"], f"conda_forge_skips_not_kept[{i}].why_not")
        if test in kept:
            raise MegabuildError(f"conda_forge_skips_not_kept[{i}]: {test!r} is in skips too")
    return len(raw)


def _check_k_term(term: str, where: str) -> None:
    """A term pytest's ``-k`` accepts: names, and/or/not, balanced parentheses, no dangling operator."""
    tokens, pos = [], 0
    while pos < len(term.rstrip()):
        match = _K_TOKEN.match(term, pos)
        if not match:
            raise MegabuildError(f"{where}: not a pytest -k term: {term!r}")
        tokens.append(match.group(1))
        pos = match.end()
    depth, expect_name = 0, True
    for token in tokens:
        if token == "(" or token == "not":
            if not expect_name:
                raise MegabuildError(f"{where}: not a pytest -k term: {term!r}")
            depth += token == "("
        elif token == ")" or token in ("and", "or"):
            if expect_name or (token == ")" and depth == 0):
                raise MegabuildError(f"{where}: not a pytest -k term: {term!r}")
            depth -= token == ")"
            expect_name = token != ")"
        else:
            if not expect_name:
                raise MegabuildError(f"{where}: not a pytest -k term: {term!r}")
            expect_name = False
    if expect_name or depth:
        raise MegabuildError(f"{where}: not a pytest -k term: {term!r}")


def _mapping(
    raw: Any, where: str, *, required: set[str] | None = None, allowed: set[str] | None = None
) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise MegabuildError(f"{where}: an object, got {type(raw).__name__}")
    known = (required or set()) | (allowed or set())
    unknown = sorted(set(raw) - known)
    if unknown:
        raise MegabuildError(f"{where}: unknown key(s) {unknown} (known: {sorted(known)})")
    missing = sorted((required or set()) - set(raw))
    if missing:
        raise MegabuildError(f"{where}: missing key(s) {missing}")
    return raw


def _items(data: Mapping[str, Any], key: str) -> list[Any]:
    value = data[key]
    if not isinstance(value, list) or not value:
        raise MegabuildError(f"{key}: a non-empty list")
    return value


def _text(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise MegabuildError(f"{where}: a non-empty string, got {raw!r}")
    return raw


def _texts(raw: Any, where: str, *, empty_ok: bool = False) -> tuple[str, ...]:
    if not isinstance(raw, list) or (not raw and not empty_ok):
        raise MegabuildError(f"{where}: a {'' if empty_ok else 'non-empty '}list of strings, got {raw!r}")
    return tuple(_text(item, f"{where}[{i}]") for i, item in enumerate(raw))


def _within(values: Sequence[str], known: Sequence[str], where: str) -> None:
    unknown = [v for v in values if v not in known]
    if unknown:
        raise MegabuildError(f"{where}: unknown value(s) {unknown} (known: {list(known)})")


def _no_duplicates(values: Sequence[str], where: str) -> None:
    twice = sorted(value for value, count in Counter(values).items() if count > 1)
    if twice:
        raise MegabuildError(f"{where}: listed twice: {twice}")
