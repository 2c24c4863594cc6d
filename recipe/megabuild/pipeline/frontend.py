"""One ``pip install .`` through scikit-build-core, and what it cost in bytes.

``pip install . --no-deps --no-build-isolation`` builds in the source tree (``build-dir = "build"``,
fixed upstream); ``python -m build`` without ``--wheel`` would build from an unpacked sdist in a
temporary dir, a full rebuild. The backend configures, builds, runs ``cmake --install`` into a
new temporary wheel dir (CMake lists what it installed in ``build/install_manifest.txt``), packs
the wheel and pip unpacks it into site-packages (its ``RECORD`` lists every file with its size).

The figures come from files, never from pip's or the backend's log (other projects' formats:
scikit-build-core colours its banner whenever ``FORCE_COLOR`` reaches it, ``pip -q`` drops both):
the backend's version from its installed metadata, the wheel from the ``.dist-info`` pip wrote
for this source dir (``direct_url.json``). A figure that cannot be taken is one warning line; a
measurement never fails the build (docs/architecture.md).
"""

from __future__ import annotations

import email.parser
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from megabuild.errors import MegabuildError

BACKEND = "scikit-build-core"
_PLATLIB = re.compile(r"/wheel/(?:platlib|purelib)/(.+)$")
_T = TypeVar("_T")


class MeasurementError(Exception):
    """A figure that cannot be taken; reported as a warning, never as a failed build."""


@dataclass(frozen=True)
class Bytes:
    files: int
    size: int

    def __str__(self) -> str:
        return f"{self.files} files, {self.size:,} bytes"


@dataclass(frozen=True)
class InstallResult:
    """The figures of one pass; ``None`` where one could not be taken (``missing`` says why)."""

    backend: str | None  # scikit-build-core's version, from its installed metadata
    wheel: str | None  # the wheel's file name, from the installed .dist-info
    installed: Bytes | None  # what `cmake --install` wrote into the temporary wheel dir
    packed: Bytes | None  # what the wheel held, uncompressed (pip wrote the same into site-packages)
    missing: tuple[str, ...] = ()

    def line(self) -> str:
        def known(value: object) -> str:
            return "(unknown)" if value is None else str(value)

        return (
            f"bytes: cmake --install wrote {known(self.installed)}; the wheel packed {known(self.packed)} "
            f"({known(self.wheel)}, scikit-build-core {known(self.backend)})"
        )

    def warning(self) -> str | None:
        """One line naming every figure not taken, or None."""
        if not self.missing:
            return None
        return f"megabuild: warning: not measured (the build goes on): {'; '.join(self.missing)}"


def run_pip(python: Path, source_dir: Path, settings: list[str]) -> None:
    cmd = [str(python), "-m", "pip", "install", ".", "--no-deps", "--no-build-isolation", "-v", *settings]
    print("+ " + " ".join(cmd), flush=True)
    # PYTHONPATH points at the recipe (for megabuild itself); keep it away from the backend
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    sys.stdout.flush()
    # pip's and the backend's output go to the build log (stdout), in order; stderr stays for
    # megabuild's own one-line error
    code = subprocess.run(cmd, cwd=source_dir, env=env, stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise MegabuildError(f"pip install . failed with exit status {code} (its output is above)")


def backend_version(sp_dir: Path) -> str:
    """scikit-build-core's version, from its ``.dist-info`` in ``sp_dir`` (the host env's)."""
    for dist in importlib.metadata.distributions(name=BACKEND, path=[str(sp_dir)]):
        version = dist.version
        if version:
            return version
    raise MeasurementError(f"no {BACKEND} metadata in {sp_dir}")


def installed_dist_info(sp_dir: Path, source_dir: Path) -> Path:
    """The ``.dist-info`` pip wrote for ``source_dir`` (its ``direct_url.json`` names the dir)."""
    wanted = source_dir.resolve()
    for dist_info in sorted(sp_dir.glob("*.dist-info")):
        try:
            url = json.loads((dist_info / "direct_url.json").read_text(encoding="utf-8"))["url"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        parsed = urllib.parse.urlparse(str(url))
        if parsed.scheme == "file" and Path(urllib.request.url2pathname(parsed.path)).resolve() == wanted:
            return dist_info
    raise MeasurementError(f"no .dist-info in {sp_dir} records an install of {source_dir}")


def wheel_name(dist_info: Path) -> str:
    """``torch-2.14.1-cp312-cp312-linux_x86_64.whl``: the dist-info's name and its WHEEL tag."""
    try:
        wheel = email.parser.Parser().parsestr((dist_info / "WHEEL").read_text(encoding="utf-8"))
    except OSError as exc:
        raise MeasurementError(f"{dist_info / 'WHEEL'} is unreadable ({exc})") from None
    tags = wheel.get_all("Tag") or []
    if len(tags) != 1:
        raise MeasurementError(f"{dist_info / 'WHEEL'} names {len(tags)} tags, not one")
    return f"{dist_info.name.removesuffix('.dist-info')}-{tags[0]}.whl"


def record_bytes(dist_info: Path) -> Bytes:
    """Files and bytes of the wheel, from the installed ``RECORD`` (pip's .pyc have no size)."""
    record = dist_info / "RECORD"
    try:
        rows = record.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MeasurementError(f"{record} is unreadable ({exc})") from None
    files = size = 0
    for row in rows:
        parts = row.rsplit(",", 2)
        if len(parts) == 3 and parts[2].isdigit() and ".dist-info/" not in parts[0]:
            files += 1
            size += int(parts[2])
    return Bytes(files, size)


def installed_bytes(build_dir: Path, sp_dir: Path, prefix: Path) -> Bytes:
    """``cmake --install``'s files, sized from where they ended up: site-packages (packed) or,
    for what the wheel excluded, libtorch's copy in the prefix (the same build outputs)."""
    manifest = build_dir / "install_manifest.txt"
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MeasurementError(f"{manifest} is unreadable ({exc})") from None
    files = size = 0
    for line in lines:
        match = _PLATLIB.search(line.strip())
        if not match:
            continue
        rel = match.group(1)
        files += 1
        for candidate in (sp_dir / rel, prefix / rel.removeprefix("torch/")):
            if candidate.is_file():
                size += candidate.stat().st_size
                break
    return Bytes(files, size)


def measure(source_dir: Path, sp_dir: Path, prefix: Path) -> InstallResult:
    """Every figure of the pass just run, each taken on its own: one that fails is ``None``."""
    missing: list[str] = []

    def take(figure: Callable[[], _T]) -> _T | None:
        try:
            return figure()
        except (MeasurementError, OSError, ValueError) as exc:
            missing.append(str(exc))
            return None

    dist_info = take(lambda: installed_dist_info(sp_dir, source_dir))
    return InstallResult(
        backend=take(lambda: backend_version(sp_dir)),
        wheel=None if dist_info is None else take(lambda: wheel_name(dist_info)),
        installed=take(lambda: installed_bytes(source_dir / "build", sp_dir, prefix)),
        packed=None if dist_info is None else take(lambda: record_bytes(dist_info)),
        missing=tuple(missing),
    )


def pip_install(
    python: Path, source_dir: Path, settings: list[str], sp_dir: Path, prefix: Path
) -> InstallResult:
    """Run the pass (its failure fails the build), then measure it (never fails the build)."""
    run_pip(python, source_dir, settings)
    result = measure(source_dir, sp_dir, prefix)
    warning = result.warning()
    if warning is not None:
        print(warning, flush=True)
    return result
