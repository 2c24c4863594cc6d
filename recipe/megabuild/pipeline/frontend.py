"""One ``pip install .`` through scikit-build-core, and what it cost in bytes.

``pip install . --no-deps --no-build-isolation`` builds in the source tree (``build-dir = "build"``,
fixed upstream); ``python -m build`` without ``--wheel`` would build from an unpacked sdist in a
temporary dir, a full rebuild. The backend configures, builds, runs ``cmake --install`` into a
new temporary wheel dir (CMake lists what it installed in ``build/install_manifest.txt``), packs
the wheel and pip unpacks it into site-packages (its ``RECORD`` lists every file with its size).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from megabuild.errors import MegabuildError

_CREATED = re.compile(r"Created wheel for \S+: filename=(\S+) size=(\d+)")
_BACKEND = re.compile(r"\*\*\* scikit-build-core (\S+)")
_PLATLIB = re.compile(r"/wheel/(?:platlib|purelib)/(.+)$")


@dataclass(frozen=True)
class Bytes:
    files: int
    size: int

    def __str__(self) -> str:
        return f"{self.files} files, {self.size:,} bytes"


@dataclass(frozen=True)
class InstallResult:
    backend: str  # scikit-build-core's version, as it announced itself
    installed: Bytes  # what `cmake --install` wrote into the temporary wheel dir
    packed: Bytes  # what the wheel held, uncompressed (pip wrote the same into site-packages)
    wheel_size: int  # the compressed wheel

    def line(self) -> str:
        return (
            f"bytes: cmake --install wrote {self.installed}; the wheel packed {self.packed} "
            f"({self.wheel_size:,} compressed) (scikit-build-core {self.backend})"
        )


def _run_pip(python: Path, source_dir: Path, settings: list[str]) -> list[str]:
    cmd = [str(python), "-m", "pip", "install", ".", "--no-deps", "--no-build-isolation", "-v", *settings]
    print("+ " + " ".join(cmd), flush=True)
    lines: list[str] = []
    # PYTHONPATH points at the recipe (for megabuild itself); keep it away from the backend
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with subprocess.Popen(cmd, cwd=source_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:  # fmt: skip
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            if _CREATED.search(line) or _BACKEND.search(line):
                lines.append(line)
        code = proc.wait()
    sys.stdout.flush()
    if code != 0:
        raise MegabuildError(f"pip install . failed with exit status {code} (its output is above)")
    return lines


def record_bytes(sp_dir: Path, wheel_name: str) -> Bytes:
    """Files and bytes of the wheel, from the installed ``RECORD`` (pip's .pyc have no size)."""
    dist = "-".join(wheel_name.split("-")[:2])
    record = sp_dir / f"{dist}.dist-info" / "RECORD"
    if not record.is_file():
        raise MegabuildError(f"{record} is missing after pip install")
    files = size = 0
    for row in record.read_text(encoding="utf-8").splitlines():
        parts = row.rsplit(",", 2)
        if len(parts) == 3 and parts[2].isdigit() and ".dist-info/" not in parts[0]:
            files += 1
            size += int(parts[2])
    return Bytes(files, size)


def installed_bytes(build_dir: Path, sp_dir: Path, prefix: Path) -> Bytes:
    """``cmake --install``'s files, sized from where they ended up: site-packages (packed) or,
    for what the wheel excluded, libtorch's copy in the prefix (the same build outputs)."""
    manifest = build_dir / "install_manifest.txt"
    if not manifest.is_file():
        raise MegabuildError(f"{manifest} is missing: did scikit-build-core run cmake --install?")
    files = size = 0
    for line in manifest.read_text(encoding="utf-8").splitlines():
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


def pip_install(
    python: Path, source_dir: Path, settings: list[str], sp_dir: Path, prefix: Path
) -> InstallResult:
    lines = _run_pip(python, source_dir, settings)
    created = [m for line in lines if (m := _CREATED.search(line))]
    backend = [m.group(1) for line in lines if (m := _BACKEND.search(line))]
    if not created or not backend:
        raise MegabuildError("pip's output names no scikit-build-core run or no created wheel")
    wheel_name, wheel_size = created[-1].group(1), int(created[-1].group(2))
    return InstallResult(
        backend=backend[-1],
        installed=installed_bytes(source_dir / "build", sp_dir, prefix),
        packed=record_bytes(sp_dir, wheel_name),
        wheel_size=wheel_size,
    )
