"""The feedstock's other tools, as the version-bump check uses them.

``list_wheel_files.py`` and ``check_patches.py`` are scripts in ``scripts/``, and the split spec
lives in ``recipe/megabuild`` (standard library only, conda-build sees only ``recipe/``). Neither
is part of this library's ``mypy --strict`` run (test_typing.py checks ``scripts/feedstock``;
mypy would otherwise follow the imports into the untyped scripts and fail on them), so they are
imported when first called, here only, and their results become this package's typed values.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..paths import RECIPE


def _module(name: str) -> ModuleType:
    if name.startswith("megabuild") and str(RECIPE) not in sys.path:
        # megabuild lives in recipe/ (conda-build only sees recipe/); bench_cache.py does the same
        sys.path.insert(0, str(RECIPE))
    return importlib.import_module(name)


# -- list_wheel_files.py ---------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One line of a listing: a file of the wheel outside its ``.dist-info``."""

    path: str
    size: int
    executable: bool


def wheel_rows(wheel: Path) -> list[Row]:
    return [Row(str(p), int(s), bool(x)) for p, s, x in _module("list_wheel_files").list_wheel(wheel)]


def write_atomically(path: Path, text: str) -> None:
    _module("list_wheel_files").write_atomically(path, text)


def sha256_of(path: Path) -> str:
    return str(_module("list_wheel_files").sha256_of(path))


# -- check_patches.py ------------------------------------------------------------------------


def wheel_cache_dir() -> Path:
    """``$PYTORCH_FEEDSTOCK_WHEEL_CACHE``, else ``~/.cache/pytorch-feedstock/wheels`` (XDG)."""
    return Path(_module("check_patches").cache_dir())


def pip_download(requirement: str, pip_tag: str, python: str, dest: Path, timeout: float) -> str | None:
    """Download one wheel into ``dest``: ``None`` when it worked, else pip's output (why not)."""
    try:
        _module("check_patches").pip_download(requirement, pip_tag, python, dest, timeout)
    except subprocess.CalledProcessError as exc:
        out = b"".join(part for part in (exc.stdout, exc.stderr) if isinstance(part, bytes))
        return out.decode("utf-8", "replace") or f"pip exited with {exc.returncode}"
    except subprocess.TimeoutExpired:
        return f"pip download took longer than {timeout:.0f} s"
    return None


@dataclass(frozen=True)
class PatchedFile:
    path: str
    reached: bool  # a wheel holds the file (or an earlier patch of the series changed it)
    ok: bool
    message: str
    offsets: int  # hunks that apply, but at another line than the patch says


@dataclass(frozen=True)
class PatchOutcome:
    patch: str
    ok: bool
    coverage: str  # all | partly | none: how many of the patched files a wheel holds
    files: tuple[PatchedFile, ...]


def check_patches(wheels: list[Path], patches: list[Path]) -> list[PatchOutcome]:
    """Dry-run ``patches`` in series order against the files the wheels hold (``--fuzz=0``)."""
    results = _module("check_patches").check(wheels, patches)
    return [
        PatchOutcome(
            str(res.patch),
            bool(res.ok),
            str(res.coverage),
            tuple(
                PatchedFile(
                    str(f.path),
                    f.member is not None,
                    bool(f.ok),
                    str(f.message),
                    sum(1 for hunk in f.hunks if hunk.get("offset")),
                )
                for f in res.files
            ),
        )
        for res in results
    ]
