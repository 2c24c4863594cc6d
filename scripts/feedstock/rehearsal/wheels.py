"""The rehearsal's downloads: the upstream torch wheel for linux-64 and every wheel its METADATA
pins for Linux (NVIDIA's CUDA runtime, triton, the pure-Python dependencies), kept in the shared
wheel cache (``$PYTORCH_FEEDSTOCK_WHEEL_CACHE``, else ``~/.cache/pytorch-feedstock/wheels``)."""

from __future__ import annotations

import email.parser
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement

from ..errors import FeedstockError
from ..wheel_files import write_atomically

# PyPI's only linux x86_64 torch wheel of a release is the CUDA build (2.14.1: CUDA 13.0).
PIP_PLATFORM = "manylinux_2_28_x86_64"
PYTHON = "3.12"  # the megabuild's Python (recipe/build.sh's top level)
# pip takes --platform literally: a glibc 2.28 machine accepts every older manylinux tag too
# (NCCL 2.30.7 is manylinux_2_18 only, cupti 13.0.85 manylinux_2_25 only).
ACCEPTED_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)),
    "manylinux2014_x86_64",
    "manylinux2010_x86_64",
    "manylinux1_x86_64",
    "linux_x86_64",
)
MARKER_ENV = {
    "platform_system": "Linux",
    "sys_platform": "linux",
    "platform_machine": "x86_64",
    "python_version": PYTHON,
    "python_full_version": f"{PYTHON}.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "extra": "",
}
COMPLETE = "COMPLETE"  # written last: its text is the requirement list the directory holds
TIMEOUT = 3600.0


class DownloadError(FeedstockError):
    """A wheel could not be downloaded (pip's last line says why)."""


@dataclass(frozen=True)
class Downloads:
    torch: Path
    runtime_dir: Path  # every wheel the torch wheel pins for Linux, plus the test tools
    requirements: tuple[str, ...]

    def runtime_wheels(self) -> list[Path]:
        return sorted(self.runtime_dir.glob("*.whl"))


def torch_wheel_path(version: str, cache: Path) -> Path:
    tag = "cp" + PYTHON.replace(".", "")
    return cache / PIP_PLATFORM / f"torch-{version}-{tag}-{tag}-{PIP_PLATFORM}.whl"


def runtime_dir(version: str, cache: Path) -> Path:
    return cache / PIP_PLATFORM / f"torch-{version}-cp{PYTHON.replace('.', '')}-runtime"


def metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as zf:
        name = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        if name is None:
            raise DownloadError(f"{wheel.name}: no .dist-info/METADATA")
        return email.parser.Parser().parsestr(zf.read(name).decode("utf-8"))


def linux_requirements(wheel: Path) -> list[str]:
    """The wheel's ``Requires-Dist`` that apply on linux x86_64 with CPython 3.12, no extras."""
    out = []
    for line in metadata(wheel).get_all("Requires-Dist") or []:
        try:
            req = Requirement(line)
        except InvalidRequirement as exc:
            raise DownloadError(f"{wheel.name}: bad Requires-Dist {line!r}: {exc}") from None
        if req.marker is None or Marker(str(req.marker)).evaluate(MARKER_ENV):
            req.marker = None
            out.append(str(req))
    return out


def cached(version: str, cache: Path) -> Downloads | None:
    """The downloads of an earlier run, or ``None`` when any part is missing."""
    torch = torch_wheel_path(version, cache)
    where = runtime_dir(version, cache)
    if not torch.is_file() or not (where / COMPLETE).is_file():
        return None
    wanted = tuple((where / COMPLETE).read_text(encoding="utf-8").split("\n"))
    return Downloads(torch, where, wanted)


def toolkit_requirements(requirements: list[str], extras: list[str]) -> list[str]:
    """``cuda-toolkit[<extras>]`` at the version the wheel pins (the test section's nvcc must be
    the toolkit the wheel was built with: a newer cicc writes PTX its ptxas cannot read)."""
    for line in requirements:
        req = Requirement(line)
        if req.name == "cuda-toolkit" and extras:
            return [f"cuda-toolkit[{','.join(extras)}]{req.specifier}"]
    return []


def pip_download(requirements: list[str], dest: Path, *, deps: bool, find_links: Path | None = None) -> None:
    platforms = [arg for plat in ACCEPTED_PLATFORMS for arg in ("--platform", plat)]
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--progress-bar",
        "off",
        "--only-binary=:all:",
        "--python-version",
        PYTHON,
        "--implementation",
        "cp",
        "--abi",
        "cp" + PYTHON.replace(".", ""),
        *platforms,
        *([] if deps else ["--no-deps"]),
        "-d",
        str(dest),
        *requirements,
    ]
    try:
        subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=TIMEOUT)
    except subprocess.CalledProcessError as exc:
        last = [line for line in (exc.stderr or exc.stdout or "").splitlines() if line.strip()]
        raise DownloadError(f"pip download {' '.join(requirements)}: {last[-1] if last else exc}") from None
    except subprocess.TimeoutExpired:
        raise DownloadError(f"pip download took longer than {TIMEOUT:.0f} s") from None


def download(version: str, cache: Path, toolkit_extras: list[str]) -> Downloads:
    """The torch wheel and its Linux runtime wheels (plus the ``cuda-toolkit`` extras the test
    sections need, e.g. ``nvcc``), downloaded once; a later call with the same requirements reads
    the cache only. A new requirement list downloads into a fresh directory (the old one lends pip
    its files), so no wheel of an older resolution stays behind."""
    found = cached(version, cache)
    torch = torch_wheel_path(version, cache)
    if not torch.is_file():
        torch.parent.mkdir(parents=True, exist_ok=True)
        pip_download([f"torch=={version}"], torch.parent, deps=False)
        if not torch.is_file():
            raise DownloadError(f"pip download left no {torch.name} in {torch.parent}")
    pins = linux_requirements(torch)
    wanted = tuple([*pins, *toolkit_requirements(pins, toolkit_extras)])
    if found is not None and found.requirements == wanted:
        return found
    where = runtime_dir(version, cache)
    fresh = where.with_name(where.name + ".partial")
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir(parents=True)
    pip_download(list(wanted), fresh, deps=True, find_links=where if where.is_dir() else None)
    write_atomically(fresh / COMPLETE, "\n".join(wanted))
    shutil.rmtree(where, ignore_errors=True)
    fresh.rename(where)
    return Downloads(torch, where, wanted)
