"""An upstream wheel laid out as the build's ``pip install .`` would have left it.

The build's ``pip install .`` packs what scikit-build-core installed (the patched sources, the
pytorch outputs without their ``wheel.exclude``) into a wheel and pip unpacks it. Here the wheel
is upstream's: :func:`derive_wheel` writes the wheel that build would have packed (the recipe's
patches in, the excluded paths out, METADATA without upstream's release-time CUDA pins) and
:func:`lay_out_wheel` has pip install it. That one function is the rehearsal's stand-in for the
backend; everything after it is the recipe's own pipeline.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import FeedstockError

# Requirements upstream's release adds to the CUDA wheels (PYTORCH_EXTRA_INSTALL_REQUIREMENTS in
# .ci/manywheel): NVIDIA's runtime as pip packages. A conda build's METADATA has none of them
# (conda-forge's cuda-* run dependencies replace them), and `pip check` in the env would fail.
RELEASE_PINS = re.compile(r"^Requires-Dist: (nvidia-|cuda-toolkit|cuda-bindings)", re.IGNORECASE)


class LayOutError(FeedstockError):
    """pip refused the derived wheel."""


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
    with tempfile.TemporaryDirectory(prefix="rehearsal-wheel-", dir=prefix.parent) as tmp:
        derived = derive_wheel(wheel, Path(tmp), replaced, keep)
        cmd = [
            str(python),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            "--no-warn-script-location",
            "--disable-pip-version-check",
            "--prefix",
            str(prefix),
            *([] if compile_bytecode else ["--no-compile"]),
            str(derived),
        ]
        env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_CONSTRAINT": ""}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()
            raise LayOutError(f"pip install {wheel.name}: {last[-1] if last else proc.returncode}")
