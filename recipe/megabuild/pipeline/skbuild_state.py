"""``build/.skbuild-info.json``: keep scikit-build-core from clearing the shared cache.

On every run scikit-build-core reads this file and, when the recorded source dir or the directory
of the ``scikit_build_core`` package that configured the tree differs from its own ("New isolated
environment ... clearing cache"), deletes ``CMakeCache.txt`` and the top-level ``CMakeFiles/``:
CMake then configures from scratch and Ninja rebuilds everything. Each conda ``pytorch`` output
has its own host env with its own scikit-build-core under ``lib/python3.X/site-packages``, so by
default every output after the top level would rebuild libtorch.

The pytorch step therefore *adopts* the tree for its backend after the typed cache edit has made
the cache consistent with its Python: the same source dir and the same scikit-build-core version
are required (another version may configure differently; that is an error, not a rebuild), and
only the backend's location and interpreter are rewritten. A marker in ``CMakeFiles/`` tells
afterwards whether the cache survived: if the backend cleared it anyway, the step fails loudly.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

INFO = ".skbuild-info.json"
MARKER = Path("CMakeFiles") / "megabuild-tree-kept"
DISTRIBUTION = "scikit-build-core"


@dataclass(frozen=True)
class Backend:
    """The scikit-build-core this interpreter imports, as its ``.skbuild-info.json`` names it."""

    path: Path
    version: str


@dataclass(frozen=True)
class Adoption:
    previous: Path
    backend: Backend

    def line(self) -> str:
        if self.previous == self.backend.path:
            return f"scikit-build-core {self.backend.version}: build/ was configured by this backend"
        return (
            f"scikit-build-core {self.backend.version}: build/ adopted for this output's backend "
            f"{self.backend.path} (configured by {self.previous}); the cache is kept, not cleared"
        )


def installed_backend() -> Backend:
    """Locate scikit-build-core without importing it (``DIR`` in its cmake.py: the package dir)."""
    spec = importlib.util.find_spec("scikit_build_core")
    if spec is None or not spec.submodule_search_locations:
        raise MegabuildError(f"{sys.executable} cannot import scikit_build_core (a host requirement)")
    try:
        version = importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise MegabuildError(f"{DISTRIBUTION} has no distribution metadata in {sys.prefix}") from None
    return Backend(Path(next(iter(spec.submodule_search_locations))).resolve(), version)


def read_info(build_dir: Path) -> dict[str, str]:
    path = build_dir / INFO
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MegabuildError(
            f"{path} is missing: the top level's scikit-build-core run configures {build_dir}"
        ) from None
    except (OSError, ValueError) as exc:
        raise MegabuildError(f"{path} is unreadable ({exc}); the backend would clear the cache") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise MegabuildError(f"{path} is not a JSON object of strings; the backend would clear the cache")
    return {str(k): v for k, v in data.items()}


def adopt(build_dir: Path, source_dir: Path, backend: Backend) -> Adoption:
    """Point ``.skbuild-info.json`` at ``backend``, or raise if that would hide a real change."""
    info = read_info(build_dir)
    recorded_src = info.get("source_dir", "")
    if Path(recorded_src) != source_dir.resolve():
        raise MegabuildError(
            f"{build_dir} was configured from {recorded_src!r}, not {source_dir.resolve()}; "
            "scikit-build-core would clear its cache and rebuild everything"
        )
    recorded_version = info.get("skbuild_version", "")
    if recorded_version != backend.version:
        raise MegabuildError(
            f"{build_dir} was configured by scikit-build-core {recorded_version or '(unknown)'}, this "
            f"output's host env has {backend.version}: pin one version in every host env"
        )
    previous = Path(info.get("skbuild_path", ""))
    info["skbuild_path"] = os.fspath(backend.path)
    info["python_executable"] = sys.executable
    path = build_dir / INFO
    tmp = path.with_name(f".{INFO}.tmp")
    tmp.write_text(json.dumps(info, indent=2), encoding="utf-8")
    tmp.replace(path)
    return Adoption(previous, backend)


def mark(build_dir: Path) -> Path:
    """Leave a marker that scikit-build-core's cache clearing (rmtree of CMakeFiles/) removes."""
    marker = build_dir / MARKER
    if not marker.parent.is_dir():
        raise MegabuildError(f"{marker.parent} is missing: {build_dir} holds no configured tree")
    marker.write_text("written before this step's scikit-build-core run; gone if it cleared the cache\n")
    return marker


def check_kept(build_dir: Path) -> None:
    """Raise if the marker is gone: the backend cleared the cache and everything was rebuilt."""
    if not (build_dir / MARKER).is_file():
        raise MegabuildError(
            f"scikit-build-core cleared the CMake cache of {build_dir} (it logs 'clearing cache' only "
            "at INFO level): this output configured and rebuilt libtorch from scratch instead of only "
            "the Python-dependent targets"
        )
