"""Compare two sets of built packages: the harness's and the real conda-build's, of one config.

A package is described by a :class:`PackageView` (what ``info/`` and the files say); the two sets
are matched by name and build string with the ``h<hash>`` part masked, and every field that
conda-build decides is compared:

* ``index``: name, version, build string, depends, constrains, track_features;
* ``files``: the file list; per file its type (file or link), the link's target, the prefix
  placeholder and file mode, ``no_link``; per ELF file its RUNPATH and DT_NEEDED;
* ``run_exports``;
* ``env``: what each script saw (:data:`ENV_KEYS`, the build's own paths written as ``$PREFIX``,
  ``$BUILD_PREFIX``, ``$SRC_DIR``), and the order the scripts ran in.

Differences that are understood are data (:class:`Known`, with their reason; the caller's list is
mirrored in docs/testing.md); :func:`compare` returns the others. Standard library only.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from megabuild import model
from megabuild.compiler_cache import settings as cache_settings

ENV_KEYS = (
    "PKG_NAME",
    "PKG_VERSION",
    "PKG_BUILDNUM",
    "PY_VER",
    "SP_DIR",
    "STDLIB_DIR",
    "PREFIX",
    "BUILD_PREFIX",
    "SRC_DIR",
    "CMAKE_ARGS",
    "python",
    "blas_impl",
    "cuda_compiler_version",
    "with_magma",
    "target_platform",
    "CI",
    cache_settings.LOCAL_DIR,
    "FEEDSTOCK_BUILD_TELEMETRY",
    cache_settings.CONF,
    cache_settings.AWS_CREDENTIALS,
)
"""The variables of a script's environment compared (script_env names included: unset is a value)."""
_HASH = re.compile(r"_h[0-9a-f]{7}_")
_PADDING = re.compile(r"(_placeh?o?l?d?)+_?[a-z]*$")


@dataclass(frozen=True)
class FileView:
    """One file of a package as ``paths.json`` and the file itself say."""

    kind: str  # "file" or "link"
    target: str = ""  # a link's target
    placeholder: str = ""  # "<prefix>" when paths.json has a prefix_placeholder (each build's own path)
    mode: str = ""  # paths.json file_mode ("text" / "binary" / "")
    no_link: bool = False
    runpath: tuple[str, ...] = ()
    needed: tuple[str, ...] = ()


@dataclass(frozen=True)
class PackageView:
    index: Mapping[str, Any]
    files: Mapping[str, FileView]
    run_exports: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """name-version-build with the build string's hash masked: what pairs the two sets."""
        return f"{self.index['name']}-{self.index['version']}-{_HASH.sub('_h*_', str(self.index['build']))}"


@dataclass(frozen=True)
class Difference:
    package: str  # PackageView.key, or "env:<script>" / "order"
    field: str  # "index.depends", "files", "file.runpath", "run_exports", "env.CMAKE_ARGS", ...
    item: str  # what differs: a spec, a path, a variable
    harness: str
    real: str

    def __str__(self) -> str:
        return (
            f"{self.package}: {self.field} {self.item}: harness {self.harness!r}, conda-build {self.real!r}"
        )


@dataclass(frozen=True)
class Known:
    """A difference that is understood: every field a glob over :class:`Difference`'s."""

    package: str
    field: str
    item: str
    reason: str

    def covers(self, diff: Difference) -> bool:
        return all(
            fnmatch.fnmatchcase(value, pattern)
            for value, pattern in (
                (diff.package, self.package),
                (diff.field, self.field),
                (diff.item, self.item),
            )
        )


KNOWN: tuple[Known, ...] = (
    Known(
        "pytorch-*",
        "files",
        "lib/python*/site-packages/torch-*.dist-info/licenses/*",
        "real_build.py's tarball adds LICENSE and NOTICE at the source root (about/license_file) and "
        "scikit-build-core copies them into the wheel; the harness builds the fixture tree, which has none",
    ),
    Known(
        "env:libtorch-split",
        "env.PY_VER",
        "PY_VER",
        "conda-build gives the top level the PY_VER of a python variant, not its host python's "
        "(megabuild_python); the pipeline takes the host's python record (megabuild.pipeline.options)",
    ),
    *(
        Known(
            f"env:{script}",
            "env.*",
            "[PS][YPT]*",  # PY_VER, SP_DIR, STDLIB_DIR
            "the libtorch and linalg install scripts' host envs have no python: conda-build's PY_VER, "
            "SP_DIR and STDLIB_DIR are a python variant's (3.13 for the CUDA config), the harness's "
            "3.12; the install steps read neither",
        )
        for script in (model.LIBTORCH, f"{model.LINALG}-*")
    ),
    Known(
        "env:*",
        "env.with_magma",
        "with_magma",
        "conda-build exports every key of an output's variant, with_magma to outputs that do not use it "
        "(a value of the config's); the harness exports the used keys; only the linalg output reads it",
    ),
)
"""The differences between the harness's packages and the real conda-build's that are understood,
each with its reason (mirrored in docs/testing.md, "The recipe built by the real conda-build")."""

INDEX_FIELDS = ("name", "version", "build", "depends", "constrains", "track_features")


def _as_set(value: Any) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return set(value.split())
    return {str(v) for v in value}


def _set_diff(package: str, name: str, ours: Any, theirs: Any) -> list[Difference]:
    a, b = _as_set(ours), _as_set(theirs)
    return [
        Difference(package, name, v, "present" if v in a else "absent", "present" if v in b else "absent")
        for v in sorted(a ^ b)
    ]


def _file_diffs(key: str, ours: Mapping[str, FileView], theirs: Mapping[str, FileView]) -> list[Difference]:
    diffs = _set_diff(key, "files", ours.keys(), theirs.keys())
    for path in sorted(ours.keys() & theirs.keys()):
        a, b = ours[path], theirs[path]
        for name in ("kind", "target", "placeholder", "mode", "no_link", "runpath", "needed"):
            va, vb = getattr(a, name), getattr(b, name)
            if va != vb:
                diffs.append(Difference(key, f"file.{name}", path, str(va), str(vb)))
    return diffs


def compare_packages(ours: PackageView, theirs: PackageView) -> list[Difference]:
    """Every difference between the harness's package ``ours`` and conda-build's ``theirs``."""
    key = theirs.key
    diffs: list[Difference] = []
    for name in INDEX_FIELDS:
        a, b = ours.index.get(name), theirs.index.get(name)
        if name in ("depends", "constrains", "track_features"):
            diffs += _set_diff(key, f"index.{name}", a, b)
        elif str(a) != str(b):
            diffs.append(Difference(key, f"index.{name}", "", str(a), str(b)))
    diffs += _file_diffs(key, ours.files, theirs.files)
    for kind in sorted(set(ours.run_exports) | set(theirs.run_exports)):
        diffs += _set_diff(
            key, f"run_exports.{kind}", ours.run_exports.get(kind), theirs.run_exports.get(kind)
        )
    return diffs


ElfReader = Callable[[Path], tuple[tuple[str, ...], tuple[str, ...]]]


def view_from_dir(root: Path, elf: ElfReader | None = None) -> PackageView:
    """The view of an extracted package (its files and ``info/``); ``elf`` reads an ELF file's
    (RUNPATH, DT_NEEDED)."""
    info = root / "info"
    index = json.loads((info / "index.json").read_text())
    exports_file = info / "run_exports.json"
    exports = json.loads(exports_file.read_text()) if exports_file.exists() else {}
    files = {}
    for entry in json.loads((info / "paths.json").read_text())["paths"]:
        path = root / entry["_path"]
        link = entry.get("path_type") == "softlink"
        runpath: tuple[str, ...] = ()
        needed: tuple[str, ...] = ()
        if not link and elf is not None and path.is_file():
            with path.open("rb") as fh:
                if fh.read(4) == b"\x7fELF":
                    runpath, needed = elf(path)
        files[entry["_path"]] = FileView(
            kind="link" if link else "file",
            target=os.readlink(path) if link else "",
            placeholder="<prefix>" if entry.get("prefix_placeholder") else "",
            mode=entry.get("file_mode", "") if entry.get("prefix_placeholder") else "",
            no_link=bool(entry.get("no_link")),
            runpath=runpath,
            needed=needed,
        )
    return PackageView(index, files, exports)


def normalize_env(env: Mapping[str, str]) -> dict[str, str]:
    """:data:`ENV_KEYS` of one script's environment, its own paths masked: ``PREFIX``,
    ``BUILD_PREFIX`` and ``SRC_DIR`` relative to the build's root (``SRC_DIR``'s parent, written
    ``$ROOT``), every other value with those three written as variables."""
    src = env.get("SRC_DIR", "")
    root = os.path.dirname(src.rstrip("/")) if src else ""
    dirs = sorted(
        ((env.get(k, ""), k) for k in ("PREFIX", "BUILD_PREFIX", "SRC_DIR")), key=lambda r: -len(r[0])
    )
    out = {}
    for name in ENV_KEYS:
        value = env.get(name)
        if value is None:
            out[name] = "<unset>"
            continue
        if name in ("PREFIX", "BUILD_PREFIX", "SRC_DIR"):
            value = value.replace(root, "$ROOT", 1) if root else value
            # conda-build pads the host prefix to 255 characters: its length follows the root's
            value = _PADDING.sub("_placehold*", value)
        else:
            for path, var in dirs:
                if path:
                    value = value.replace(path, f"${var}")
        out[name] = value
    return out


def compare_envs(
    ours: Sequence[tuple[str, Mapping[str, str]]], theirs: Sequence[tuple[str, Mapping[str, str]]]
) -> list[Difference]:
    """The scripts each run ran, in order ((label, environment) pairs), and what each saw."""
    diffs = []
    a, b = [label for label, _ in ours], [label for label, _ in theirs]
    if a != b:
        diffs.append(Difference("order", "scripts", "", " -> ".join(a), " -> ".join(b)))
    theirs_by = dict(theirs)
    for label, env in ours:
        if label not in theirs_by:
            continue
        na, nb = normalize_env(env), normalize_env(theirs_by[label])
        diffs += [Difference(f"env:{label}", f"env.{k}", k, na[k], nb[k]) for k in ENV_KEYS if na[k] != nb[k]]
    return diffs


def compare(
    ours: Iterable[PackageView],
    theirs: Iterable[PackageView],
    known: Sequence[Known] = (),
    envs: tuple[Sequence[tuple[str, Mapping[str, str]]], Sequence[tuple[str, Mapping[str, str]]]]
    | None = None,
) -> tuple[list[Difference], list[tuple[Difference, Known]]]:
    """(differences nothing in ``known`` covers, the covered ones with what covers them)."""
    a = {p.key: p for p in ours}
    b = {p.key: p for p in theirs}
    diffs = _set_diff("packages", "packages", a.keys(), b.keys())
    for key in sorted(a.keys() & b.keys()):
        diffs += compare_packages(a[key], b[key])
    if envs is not None:
        diffs += compare_envs(*envs)
    unexplained, explained = [], []
    for diff in diffs:
        cover = next((k for k in known if k.covers(diff)), None)
        if cover is None:
            unexplained.append(diff)
        else:
            explained.append((diff, cover))
    return unexplained, explained


__all__ = [
    "ENV_KEYS",
    "KNOWN",
    "Difference",
    "FileView",
    "Known",
    "PackageView",
    "compare",
    "compare_packages",
    "view_from_dir",
]
