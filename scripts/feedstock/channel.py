"""Turn rendered outputs into a local conda channel and solve user requests against it.

The records written here are what conda-build puts into each package's ``info/index.json``
(name, version, build, build_number, depends, constrains, track_features, subdir), so a solve over
this channel answers "what does ``conda install pytorch`` give a user" without building anything.

External dependencies (python, numpy, BLAS, CUDA, ...) are represented by small stand-in records
generated from the names the outputs depend on.  The rules are deliberately few and explicit
(see :func:`stand_in_records`); everything else becomes a dependency-free ``noarch`` record whose
version satisfies the specs that name it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from megabuild.model import ARM_VARIANT_NAMES, PLATFORMS, SBSA

from .errors import FeedstockError
from .specs import as_list, spec_name, spec_parts

PYTHONS: tuple[str, ...] = ("3.10", "3.11", "3.12", "3.13", "3.14")
"""Python minor versions the stand-in channel offers (the feedstock's supported range)."""
FREETHREADED_PYTHONS: tuple[str, ...] = ("3.14",)
"""...and their free-threaded builds (``python 3.14.* *_cp314t``, ``python_abi 3.14 *_cp314t``)."""


def _abi_tags(freethreaded: Iterable[str] = FREETHREADED_PYTHONS) -> list[tuple[str, str]]:
    """(minor version, python_abi tag) of every Python the stand-in channel offers; the
    free-threaded builds of the ``freethreaded`` minor versions."""
    gil = [(py, "cp" + py.replace(".", "")) for py in PYTHONS]
    return gil + [(py, "cp" + py.replace(".", "") + "t") for py in dict.fromkeys(freethreaded)]


PLATFORM_VIRTUALS: dict[str, dict[str, str]] = {
    "linux-64": {"__unix": "0", "__linux": "6.5", "__glibc": "2.35", "__archspec": "1"},
    "linux-aarch64": {"__unix": "0", "__linux": "6.5", "__glibc": "2.35", "__archspec": "1"},
    "osx-64": {"__unix": "0", "__osx": "14.0", "__archspec": "1"},
    "osx-arm64": {"__unix": "0", "__osx": "14.0", "__archspec": "1"},
}
"""Virtual packages every machine of a platform has (``__cuda`` is added per request)."""

# conda-forge's BLAS split: one build per implementation, selected by the build string suffix.
BLAS_LIBS: tuple[str, ...] = ("libblas", "libcblas", "liblapack", "liblapacke", "blas-devel")
BLAS_IMPLS: tuple[str, ...] = ("mkl", "openblas")
BLAS_VERSION = "3.9.0"
BLAS_BUILD_NUMBER = 35
OPENBLAS_VERSION = "0.3.30"
OPENBLAS_THREADING: tuple[str, ...] = ("pthreads", "openmp")
"""openblas-feedstock's two threading builds of ``libopenblas`` / ``openblas`` (build strings
``pthreads_h<hash>_<n>`` and ``openmp_h<hash>_<n>``)."""

# Packages that are built once per Python on conda-forge (they get a python_abi dependency).
PER_PYTHON: frozenset[str] = frozenset({"numpy", "triton", "optree", "pybind11-abi", "cython"})

TIMESTAMP = 1_767_225_600_000  # 2026-01-01, the same for every record: ties are not broken by age.

_VERSION_TOKEN = re.compile(r"\d+(?:\.\d+)*")


class SolveError(FeedstockError):
    """The request has no solution (wraps rattler's SolverError)."""


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _strings(value: Any) -> list[str]:
    # index.json's track_features is one space-separated string; recipes give a list.
    if isinstance(value, str):
        return value.split()
    return [str(v) for v in as_list(value)]


def index_record(output: Any) -> dict[str, Any]:
    """The ``index.json`` conda-build would write for one rendered output.

    ``output`` is a ``RenderedOutput`` from ``scripts/feedstock/render.py`` or a mapping with the
    same field names (``name, version, build_string, build_number, subdir, depends, constrains,
    track_features, noarch``).
    """
    noarch = _field(output, "noarch")
    if noarch not in (None, "", False, "none"):
        raise ValueError(f"{_field(output, 'name')}: noarch={noarch!r}; every output must be noarch: none")
    record: dict[str, Any] = {
        "name": str(_field(output, "name")),
        "version": str(_field(output, "version")),
        "build": str(_field(output, "build_string")),
        "build_number": int(_field(output, "build_number")),
        "depends": _strings(_field(output, "depends")),
        "constrains": _strings(_field(output, "constrains")),
        "subdir": str(_field(output, "subdir")),
        "license": "BSD-3-Clause",
        "timestamp": TIMESTAMP,
    }
    features = _strings(_field(output, "track_features"))
    if features:
        record["track_features"] = " ".join(features)
    return record


def filename(record: Mapping[str, Any]) -> str:
    return f"{record['name']}-{record['version']}-{record['build']}.conda"


def satisfying_version(version_spec: str | None) -> str:
    """A version matching ``version_spec``, picked from the numbers the spec itself mentions."""
    import rattler

    if version_spec in (None, "", "*"):
        return "1.0.0"
    spec = rattler.VersionSpec(version_spec)
    tokens = _VERSION_TOKEN.findall(version_spec)
    candidates: list[str] = []
    for token in tokens:
        candidates += [token, f"{token}.0", f"{token}.1"]
    candidates += ["0.1", "1.0.0"]
    for candidate in candidates:
        if spec.matches(rattler.Version(candidate)):
            return candidate
    raise ValueError(f"no stand-in version satisfies {version_spec!r}")


def _build_from_glob(glob: str | None, number: int) -> str:
    if not glob:
        return f"h0_{number}"
    text = glob.replace("*", "_").strip("_")
    return f"h0_{text}" if glob.startswith("*") else text


def _python_records(freethreaded_versions: Iterable[str]) -> list[dict[str, Any]]:
    records = []
    for py, tag in _abi_tags(freethreaded_versions):
        freethreaded = tag.endswith("t")
        records.append(
            {
                "name": "python",
                "version": f"{py}.0",
                "build": f"h0_{tag}" if freethreaded else "h0_cpython",
                "build_number": 0,
                "depends": [f"python_abi {py}.* *_{tag}"],
                "constrains": [],
            }
        )
        records.append(
            {
                "name": "python_abi",
                "version": py,
                "build": f"8_{tag}",
                "build_number": 8,
                "depends": [],
                "constrains": [f"python {py}.* *_{tag if freethreaded else 'cpython'}"],
                # conda-forge users get the GIL build unless they ask for *_cp314t; modelled as a
                # feature the solver avoids (the real mechanism is not checked here)
                **({"track_features": "py_freethreading"} if freethreaded else {}),
            }
        )
    return records


DEVEL = "blas-devel"  # no track_features in blas-feedstock


def _blas_records(subdir: str) -> list[dict[str, Any]]:
    records = []
    for impl in BLAS_IMPLS:
        build = f"{BLAS_BUILD_NUMBER}_{subdir.replace('-', '')}_{impl}"
        openblas = f"libopenblas >={OPENBLAS_VERSION},<0.3.31.0a0"
        impl_dep = "mkl >=2025.0.0,<2026.0a0" if impl == "mkl" else openblas
        for name in BLAS_LIBS:
            siblings = [f"{other} {BLAS_VERSION} *{impl}" for other in BLAS_LIBS if other != name]
            records.append(
                {
                    "name": name,
                    "version": BLAS_VERSION,
                    "build": build,
                    "build_number": BLAS_BUILD_NUMBER,
                    "depends": [impl_dep],
                    "constrains": siblings,
                    # blas-feedstock: `track_features: blas_<impl>` where impl != blas_default_impl
                    # (openblas): a bare `libblas` request solves to OpenBLAS
                    **({"track_features": f"blas_{impl}"} if impl != "openblas" and name != DEVEL else {}),
                }
            )
    records += _openblas_records(subdir)
    records.append(
        {
            "name": "nomkl",
            "version": "1.0",
            "build": "h0_openblas",
            "build_number": 0,
            "depends": [f"{name} * *openblas" for name in ("libblas", "libcblas", "liblapack")],
            "constrains": [],
        }
    )
    return records


def _openblas_records(subdir: str) -> list[dict[str, Any]]:
    """``libopenblas`` (the library) and ``openblas`` (headers, static library; depends on the exact
    libopenblas) in a pthreads and an OpenMP build each. openblas-feedstock down-prioritizes the
    OpenMP build on Linux and Windows and the pthreads build on macOS (rattler-build's
    ``down_prioritize_variant``), modelled here as a track feature on that build."""
    records = []
    for threading in OPENBLAS_THREADING:
        build = f"{threading}_h0_0"
        down = (threading == "pthreads") == subdir.startswith("osx-")
        for name in ("libopenblas", "openblas"):
            depends = [f"libopenblas {OPENBLAS_VERSION} {build}"] if name == "openblas" else []
            records.append(
                {
                    "name": name,
                    "version": OPENBLAS_VERSION,
                    "build": build,
                    "build_number": 0,
                    "depends": depends,
                    "constrains": [],
                    **({"track_features": "openblas_threading"} if down else {}),
                }
            )
    return records


def _cuda_version_record(version: str) -> dict[str, Any]:
    major = version.split(".")[0]
    return {
        "name": "cuda-version",
        "version": version,
        "build": "h0_3",
        "build_number": 3,
        "depends": [],
        "constrains": [f"__cuda >={major}", f"cudatoolkit {version}|{version}.*"],
    }


ARM_VARIANT = "arm-variant"
ARM_VARIANT_FEATURE = "arm-variant-tegra"
ARM_VARIANT_SUBDIRS = tuple(p.subdir for p in PLATFORMS if p.arm_variants)


def _arm_variant_record(build: str) -> dict[str, Any]:
    """conda-forge's ``arm-variant`` (noarch, one build per variant). Its description says "The
    default is SBSA. Select the tegra 'arm-variant' package by installing 'arm-variant=*=tegra'";
    modelled here as a track feature on every build but sbsa (the real mechanism is not checked)."""
    return {
        "name": ARM_VARIANT,
        "version": "1.2.0",
        "build": build,
        "build_number": 0,
        "depends": [],
        "constrains": [],
        "noarch": "generic",
        **({"track_features": ARM_VARIANT_FEATURE} if build != SBSA.name else {}),
    }


def _explicit_names() -> frozenset[str]:
    return frozenset({"python", "python_abi", "nomkl", "libopenblas", "openblas", ARM_VARIANT, *BLAS_LIBS})


def stand_in_records(
    records: Iterable[Mapping[str, Any]],
    subdir: str,
    freethreaded: Iterable[str] = FREETHREADED_PYTHONS,
) -> list[dict[str, Any]]:
    """Stand-ins for every external package the given records (of one subdir) depend on.

    Rules, in order:

    * virtual packages (``__cuda``, ``__glibc``, ...) are never records;
    * ``python`` 3.10-3.14 and the free-threaded builds of ``freethreaded`` (3.14t; the
      end-to-end harness adds the free-threaded CPython it has) with ``python_abi``
      (``X.Y`` / ``8_cpXY[t]``), always present;
    * libblas, libcblas, liblapack, liblapacke, blas-devel: one ``*_mkl`` and one ``*_openblas``
      build each (mkl ones depend on ``mkl`` and track ``blas_mkl``, as blas-feedstock's non-default
      builds do), plus ``nomkl`` (depends on the ``*openblas`` builds) and OpenBLAS itself
      (``libopenblas``, ``openblas``: a ``pthreads_*`` and an ``openmp_*`` build each, the one
      openblas-feedstock down-prioritizes on the platform with a track feature);
    * ``cuda-version X.Y`` constrains ``__cuda >=X`` (as conda-forge's does);
    * linux-aarch64: ``arm-variant`` ``sbsa`` and ``tegra`` builds, always present; all but
      ``sbsa`` carry a track feature (conda-forge's default is sbsa);
    * names in :data:`PER_PYTHON` get one build per Python (depending on that ``python_abi``);
    * anything else: one ``noarch: generic`` record without dependencies per distinct version
      spec, at a version satisfying it (build strings follow any build glob in the spec).
    """
    ours = {r["name"] for r in records}
    specs: dict[str, set[str]] = {}
    pending = [dep for r in records for dep in r.get("depends", [])]
    freethreaded = tuple(freethreaded)
    out: list[dict[str, Any]] = [*_python_records(freethreaded), *_blas_records(subdir)]
    if subdir in ARM_VARIANT_SUBDIRS:  # on conda-forge whether or not a package depends on it
        out += [_arm_variant_record(build) for build in ARM_VARIANT_NAMES]
    pending += [dep for r in out for dep in r["depends"]]
    seen: set[str] = set()
    while pending:
        spec = pending.pop()
        if spec in seen:
            continue
        seen.add(spec)
        name = spec_name(spec)
        if name.startswith("__") or name in ours or name in _explicit_names():
            continue
        specs.setdefault(name, set()).add(spec)

    made: set[tuple[str, str, str]] = set()
    for name in sorted(specs):
        for spec in sorted(specs[name]):
            _, version_spec, build_glob = spec_parts(spec)
            version = satisfying_version(version_spec)
            if name == "cuda-version":
                record = _cuda_version_record(".".join(version.split(".")[:2]))
            elif name in PER_PYTHON:
                for py, tag in _abi_tags(freethreaded):
                    record = {
                        "name": name,
                        "version": version,
                        "build": f"py{tag[2:]}_h0_0",
                        "build_number": 0,
                        "depends": [f"python >={py},{_next_minor(py)}", f"python_abi {py}.* *_{tag}"],
                        "constrains": [],
                    }
                    key = (name, version, record["build"])
                    if key not in made:
                        made.add(key)
                        out.append(record)
                continue
            else:
                record = {
                    "name": name,
                    "version": version,
                    "build": _build_from_glob(build_glob, 0),
                    "build_number": 0,
                    "depends": [],
                    "constrains": [],
                    "noarch": "generic",
                }
            key = (record["name"], record["version"], record["build"])
            if key not in made:
                made.add(key)
                out.append(record)

    for record in out:
        record.setdefault("subdir", "noarch" if record.get("noarch") else subdir)
        record.setdefault("license", "stand-in")
        record.setdefault("timestamp", TIMESTAMP)
    return out


def _next_minor(py: str) -> str:
    major, minor = py.split(".")
    return f"<{major}.{int(minor) + 1}.0a0"


def write_channel(outputs: Iterable[Any], channel_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Write ``<channel_dir>/<subdir>/repodata.json`` (and ``noarch``) for the rendered outputs.

    Returns the records per subdir.  Two outputs with the same file name but different metadata
    are a rendering bug (two CI jobs would upload different packages under one name): ValueError.
    """
    ours: dict[str, dict[str, dict[str, Any]]] = {}
    for output in outputs:
        record = index_record(output)
        by_name = ours.setdefault(record["subdir"], {})
        fname = filename(record)
        if fname in by_name and by_name[fname] != record:
            raise ValueError(f"{fname} rendered twice with different metadata:\n{by_name[fname]}\n{record}")
        by_name[fname] = record

    per_subdir: dict[str, dict[str, dict[str, Any]]] = {"noarch": {}}
    for subdir, by_name in ours.items():
        per_subdir.setdefault(subdir, {}).update(by_name)
        for record in stand_in_records(by_name.values(), subdir):
            per_subdir.setdefault(record["subdir"], {}).setdefault(filename(record), record)

    for subdir, by_name in per_subdir.items():
        path = channel_dir / subdir / "repodata.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        packages = dict(sorted(by_name.items()))
        repodata = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages}
        path.write_text(json.dumps(repodata, indent=1, sort_keys=True) + "\n")
    return {subdir: list(by_name.values()) for subdir, by_name in per_subdir.items()}


@dataclasses.dataclass(frozen=True)
class Installed:
    name: str
    version: str
    build: str
    build_number: int
    depends: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.name} {self.version} {self.build}"


class Channel:
    """A local channel directory, loaded once; ``solve`` answers install requests against it."""

    def __init__(self, channel_dir: Path) -> None:
        import rattler

        self.path = Path(channel_dir).resolve()
        self._channel = rattler.Channel(self.path.as_uri())
        self._sparse: dict[str, Any] = {}

    def _repodata(self, subdir: str) -> Any:
        import rattler

        if subdir not in self._sparse:
            path = self.path / subdir / "repodata.json"
            if not path.exists():
                raise FileNotFoundError(f"no repodata for {subdir} in {self.path}")
            self._sparse[subdir] = rattler.SparseRepoData(self._channel, subdir, path)
        return self._sparse[subdir]

    def solve_records(
        self, specs: Sequence[str], platform: str, virtual_packages: Mapping[str, str] | None = None
    ) -> list[Any]:
        """rattler's ``RepoDataRecord`` s installing ``specs`` on ``platform``, with the platform's
        virtual packages plus the given ones (what ``rattler.install`` takes).

        Raises :class:`SolveError` when unsatisfiable.
        """
        import rattler
        from rattler.exceptions import SolverError

        virtuals = {**PLATFORM_VIRTUALS.get(platform, {}), **(virtual_packages or {})}
        vps = [
            rattler.GenericVirtualPackage(
                rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0")
            )
            for name, version in virtuals.items()
        ]
        sources = [self._repodata(platform), self._repodata("noarch")]
        try:
            # Older py-rattler solves synchronously, newer returns a coroutine.
            result: Any = rattler.solve_with_sparse_repodata(list(specs), sources, virtual_packages=vps)
            if inspect.iscoroutine(result):
                result = asyncio.run(result)
        except SolverError as exc:
            raise SolveError(str(exc)) from None
        return list(result)

    def solve(
        self, specs: Sequence[str], platform: str, virtual_packages: Mapping[str, str] | None = None
    ) -> dict[str, Installed]:
        """:meth:`solve_records` as name -> :class:`Installed`."""
        result = self.solve_records(specs, platform, virtual_packages)
        return {
            r.name.normalized: Installed(
                r.name.normalized, str(r.version), str(r.build), int(r.build_number), tuple(r.depends)
            )
            for r in result
        }
