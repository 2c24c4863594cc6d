"""The feedstock library's wheel and patch tools (``feedstock.wheel_files``,
``feedstock.patch_check``: the logic behind list_wheel_files.py and check_patches.py) as the
version-bump check uses them: their results become this package's typed values."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from .. import patch_check, wheel_files
from ..wheel_files import list_wheel

# -- wheel listings (feedstock.wheel_files) ----------------------------------------------------


class Row(NamedTuple):
    """One line of a listing: a file of the wheel outside its ``.dist-info`` (a tuple, so
    ``path, size, executable = row`` reads it too)."""

    path: str
    size: int
    executable: bool


def wheel_rows(wheel: Path) -> list[Row]:
    return [Row(p, s, x) for p, s, x in list_wheel(wheel)]


def write_atomically(path: Path, text: str) -> None:
    wheel_files.write_atomically(path, text)


def sha256_of(path: Path) -> str:
    return wheel_files.sha256_of(path)


# -- patches (feedstock.patch_check) -----------------------------------------------------------


def wheel_cache_dir() -> Path:
    """``$PYTORCH_FEEDSTOCK_WHEEL_CACHE``, else ``~/.cache/pytorch-feedstock/wheels`` (XDG)."""
    return patch_check.cache_dir()


def pip_download(requirement: str, pip_tag: str, python: str, dest: Path, timeout: float) -> str | None:
    """Download one wheel into ``dest``: ``None`` when it worked, else pip's output (why not)."""
    try:
        patch_check.pip_download(requirement, pip_tag, python, dest, timeout)
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
    results = patch_check.check(wheels, patches)
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
