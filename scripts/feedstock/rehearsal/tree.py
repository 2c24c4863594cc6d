"""An upstream wheel laid out as the build's ``pip install .`` would have left it.

The build's ``pip install .`` packs what scikit-build-core installed (the patched sources, the
pytorch outputs without their ``wheel.exclude``) into a wheel and pip unpacks it. Here the wheel
is upstream's: :func:`derive_wheel` writes the wheel that build would have packed (the recipe's
patches in, the excluded paths out, METADATA without upstream's release-time CUDA pins) and
:func:`lay_out_wheel` has pip install it. :class:`DerivedWheel` is that step as the split
procedure's tree source (``feedstock.split_check.layout.TreeSource``): the rehearsal's one stand-in for
the backend; everything after it is the recipe's own pipeline, run by ``feedstock.split_check.split_run``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import FeedstockError
from ..split_check.layout import copy_linalg
from ..wheel_files import Row, list_wheel

# Requirements upstream's release adds to the CUDA wheels (PYTORCH_EXTRA_INSTALL_REQUIREMENTS in
# .ci/manywheel): NVIDIA's runtime as pip packages. A conda build's METADATA has none of them
# (conda-forge's cuda-* run dependencies replace them), and `pip check` in the env would fail.
RELEASE_PINS = re.compile(r"^Requires-Dist: (nvidia-|cuda-toolkit|cuda-bindings)", re.IGNORECASE)


class PipError(FeedstockError):
    """pip (or ensurepip) did not install: a full disk, a wheel it refused; pip's last line says why."""


class LayOutError(FeedstockError):
    """The derived wheel could not be written."""


def run_pip(
    python: Path, args: Sequence[str], *, env: Mapping[str, str] | None = None, what: str = ""
) -> None:
    """``python -m <args>`` (``pip install ...``, ``ensurepip``) with its output captured. Not
    starting, or exiting non-zero, is a :class:`PipError`: ``what`` (default: the command) and the
    last line pip wrote, which names the cause (``[Errno 28] No space left on device``)."""
    what = what or f"{python.name} -m {' '.join(args[:2])}"
    try:
        proc = subprocess.run(
            [str(python), "-m", *args],
            capture_output=True,
            text=True,
            env=None if env is None else dict(env),
            check=False,
        )
    except OSError as exc:
        raise PipError(f"{what}: cannot run {python}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()
        raise PipError(f"{what}: {last[-1] if last else f'exit status {proc.returncode}'}")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def conda_metadata(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not RELEASE_PINS.match(line))


def derive_wheel(wheel: Path, dest: Path, replaced: Mapping[str, bytes], keep: Callable[[str], bool]) -> Path:
    """``wheel`` with ``replaced`` members' new bytes, only the members ``keep`` accepts, a conda
    METADATA and a new RECORD; stored uncompressed (pip unpacks it at once)."""
    target = dest / wheel.name
    record_lines = []
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as out:
        record_name = next(n for n in src.namelist() if n.endswith(".dist-info/RECORD"))
        for info in src.infolist():
            name = info.filename
            if name == record_name or name.endswith("/") or not keep(name):
                continue
            data = replaced.get(name)
            if data is None:
                data = src.read(info)
            if name.endswith(".dist-info/METADATA"):
                data = conda_metadata(data.decode("utf-8")).encode("utf-8")
            new = zipfile.ZipInfo(name, date_time=info.date_time)
            new.external_attr = info.external_attr  # the executable bits pip restores
            out.writestr(new, data)
            record_lines.append(_record_line(name, data))
        record_lines.append(f"{record_name},,")
        out.writestr(record_name, "\n".join(record_lines) + "\n")
    return target


def lay_out_wheel(
    wheel: Path,
    prefix: Path,
    python: Path,
    *,
    replaced: Mapping[str, bytes],
    keep: Callable[[str], bool],
    compile_bytecode: bool,
) -> None:
    """The step the rehearsal puts in place of the backend: pip installs the wheel the build would
    have packed into ``prefix`` (``lib/pythonX.Y/site-packages``, scripts in ``bin``). The top
    level's files are only staged, never packaged as Python: no bytecode there."""
    args = [
        "pip",
        "install",
        "--no-deps",
        "--no-index",
        "--no-warn-script-location",
        "--disable-pip-version-check",
        "--prefix",
        str(prefix),
        *([] if compile_bytecode else ["--no-compile"]),
    ]
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_CONSTRAINT": ""}
    try:
        with tempfile.TemporaryDirectory(prefix="rehearsal-wheel-", dir=prefix.parent) as tmp:
            derived = derive_wheel(wheel, Path(tmp), replaced, keep)
            run_pip(python, [*args, str(derived)], env=env, what=f"pip install {wheel.name}")
    except OSError as exc:  # writing the derived wheel next to the prefix: a full disk
        reason = exc.strerror or exc
        raise LayOutError(f"cannot write the wheel derived from {wheel.name}: {reason}") from None


def _in_dist_info(name: str) -> bool:
    return name.split("/", 1)[0].endswith(".dist-info")


@dataclass(frozen=True)
class DerivedWheel:
    """The split procedure's tree source for the rehearsal: the wheel the build would have packed
    (derived from upstream's ``wheel`` with the ``replaced`` members' patched bytes), installed by
    pip (``python``: the megabuild's CPython) into the prefix that owns the site-packages asked
    for, holding exactly the rows asked for (and its ``.dist-info``: METADATA, entry points)."""

    wheel: Path
    python: Path
    replaced: Mapping[str, bytes]

    def listed(self) -> list[Row]:
        """The wheel's listing, with the sizes of the files the derived wheel replaces."""
        sizes = {name: len(data) for name, data in self.replaced.items()}
        return [row._replace(size=sizes.get(row.path, row.size)) for row in list_wheel(self.wheel)]

    def lay_out(
        self, rows: Sequence[Row], site_packages: Path, scratch: Path, *, compile_bytecode: bool = False
    ) -> None:
        """pip installs into ``<prefix>/lib/pythonX.Y/site-packages`` (scripts in ``<prefix>/bin``)."""
        prefix = site_packages.parents[2]
        if site_packages.name != "site-packages" or site_packages.parent.parent.name != "lib":
            raise FeedstockError(f"{site_packages}: not a prefix's lib/pythonX.Y/site-packages")
        wanted = {row.path for row in rows}
        prefix.mkdir(parents=True, exist_ok=True)
        lay_out_wheel(self.wheel, prefix, self.python, replaced=self.replaced,
                      keep=lambda name: name in wanted or _in_dist_info(name),
                      compile_bytecode=compile_bytecode)  # fmt: skip

    def relink_linalg(self, nomagma: Path, target: Path) -> str:
        return copy_linalg(nomagma, target)
