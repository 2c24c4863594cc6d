"""The CUDA architectures in a library's fatbin against ``TORCH_CUDA_ARCH_LIST``.

``cuobjdump --list-elf`` names one cubin per kernel file and architecture
(``libtorch_cuda.12.sm_90.cubin``), ``--list-ptx`` the PTX (``libtorch_cuda.3.sm_120.ptx``). Every
listed architecture needs cubins and nothing else may be there, except the arch-specific
variants (``sm_90a``, ``sm_100f``) of a listed architecture's family that single kernels ask
for; PTX exactly for the ``+PTX`` entries.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from megabuild.binaries.findings import Finding
from megabuild.errors import MegabuildError

_ENTRY = re.compile(r"(\d+)\.(\d)([af]?)(\+PTX)?")
_LISTED = re.compile(r"\.(sm_(\d+?)(\d)([af]?))\.(cubin|ptx)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class Archs:
    cubins: frozenset[str]
    ptx: frozenset[str]


def parse_arch_list(text: str) -> Archs:
    """``"7.5;8.0;12.0+PTX"`` -> cubins sm_75, sm_80, sm_120 and PTX for sm_120."""
    cubins, ptx = set(), set()
    for entry in (e for e in re.split(r"[;\s]+", text.strip()) if e):
        match = _ENTRY.fullmatch(entry)
        if match is None:
            raise MegabuildError(f"TORCH_CUDA_ARCH_LIST entry {entry!r} is not like 8.6 or 12.0+PTX")
        sm = f"sm_{match.group(1)}{match.group(2)}{match.group(3)}"
        cubins.add(sm)
        if match.group(4):
            ptx.add(sm)
    if not cubins:
        raise MegabuildError("TORCH_CUDA_ARCH_LIST is empty")
    return Archs(frozenset(cubins), frozenset(ptx))


def parse_listings(elf_listing: str, ptx_listing: str) -> Archs:
    cubins = {m.group(1) for m in _LISTED.finditer(elf_listing) if m.group(5) == "cubin"}
    ptx = {m.group(1) for m in _LISTED.finditer(ptx_listing) if m.group(5) == "ptx"}
    return Archs(frozenset(cubins), frozenset(ptx))


def _family(sm: str) -> str:
    """``sm_100a`` -> ``10`` (the major version: what an arch- or family-specific variant targets)."""
    digits = re.sub(r"\D", "", sm)
    return digits[:-1]


def compare(rel: str, wanted: Archs, found: Archs) -> list[Finding]:
    out = [Finding("cuda-arch", rel, f"no {sm} cubins") for sm in sorted(wanted.cubins - found.cubins)]
    families = {_family(sm) for sm in wanted.cubins}
    for sm in sorted(found.cubins - wanted.cubins):
        if sm[-1] in "af" and _family(sm) in families:
            continue  # an arch-specific variant some kernels ask for (-gencode arch=compute_90a)
        out.append(Finding("cuda-arch", rel, f"{sm} cubins, not in TORCH_CUDA_ARCH_LIST"))
    out += [Finding("cuda-arch", rel, f"no PTX for {sm} (+PTX)") for sm in sorted(wanted.ptx - found.ptx)]
    out += [
        Finding("cuda-arch", rel, f"PTX for {sm}, not asked for") for sm in sorted(found.ptx - wanted.ptx)
    ]
    return out


def listings(cuobjdump: str, library: Path) -> tuple[str, str]:
    """``cuobjdump --list-elf`` and ``--list-ptx`` of ``library`` (a file without PTX lists none)."""
    out = []
    for flag in ("--list-elf", "--list-ptx"):
        try:
            proc = subprocess.run(
                [cuobjdump, flag, str(library)], capture_output=True, text=True, timeout=900
            )
        except OSError as exc:
            raise MegabuildError(f"cannot run {cuobjdump}: {exc.strerror or exc}") from None
        if proc.returncode != 0 and "does not contain" not in proc.stderr + proc.stdout:
            last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise MegabuildError(f"cuobjdump {flag} {library.name} failed: {last}")
        out.append(proc.stdout)
    return out[0], out[1]
