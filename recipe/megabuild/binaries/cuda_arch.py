"""The CUDA architectures in a library's fatbin against ``TORCH_CUDA_ARCH_LIST``.

``cuobjdump --list-elf`` names one cubin per kernel file and architecture
(``libtorch_cuda.12.sm_90.cubin``), ``--list-ptx`` the PTX (``libtorch_cuda.3.sm_120.ptx``). Every
listed architecture needs cubins and nothing else may be there, except what PyTorch adds on its own
(:data:`ADDED_ARCHS`); PTX exactly for the ``+PTX`` entries.
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
class AddedArch:
    """An architecture ``cmake/Codegen.cmake``'s ``_BUILD_FOR_ADDITIONAL_ARCHS`` compiles single
    kernels for (RowwiseScaledMM.cu, ScaledGroupMM.cu, GroupMM.cu) when the build's gencode flags
    hold ``base``, from CUDA ``since`` on."""

    gencode: str
    """As Codegen.cmake names it (``103f``: ``-gencode arch=compute_103f,code=sm_103f``)."""
    base: str
    """The listed architecture it needs (``compute_100`` in the gencode flags: ``sm_100``)."""
    since: tuple[int, int] = (12, 0)
    """The CUDA version from which Codegen.cmake adds it (the function does nothing before 12.0)."""

    @property
    def listed(self) -> str:
        """The cubin's name in cuobjdump's listing: a family-specific ``f`` cubin is listed as the
        plain architecture (``sm_103``), an arch-specific ``a`` one keeps its suffix (``sm_90a``)."""
        return f"sm_{self.gencode.removesuffix('f')}"


ADDED_ARCHS = (
    AddedArch("89", "sm_86"),
    AddedArch("90a", "sm_90"),
    AddedArch("100a", "sm_100"),
    AddedArch("103f", "sm_100", since=(12, 9)),
    AddedArch("110a", "sm_110", since=(13, 0)),
    AddedArch("120a", "sm_120"),
    AddedArch("121a", "sm_120", since=(12, 9)),
)
"""PyTorch 2.14's ``_BUILD_FOR_ADDITIONAL_ARCHS`` rules (``cmake/Codegen.cmake``): upstream's
2.14.1 CUDA 13.0 linux-64 wheel holds sm_89, sm_90a, sm_100a, sm_103, sm_120a and sm_121a cubins
next to its list's."""


def added_archs(wanted: Archs, cuda_version: str | None) -> frozenset[str]:
    """The cubins PyTorch adds to a build of ``wanted`` with CUDA ``cuda_version`` (``None``: not
    known, so no version-gated addition)."""
    version = _version(cuda_version) if cuda_version not in (None, "None") else None
    return frozenset(
        rule.listed
        for rule in ADDED_ARCHS
        if rule.base in wanted.cubins and version is not None and version >= rule.since
    )


def _version(text: str | None) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)*", text or "")
    if match is None:
        raise MegabuildError(f"CUDA version {text!r} is not like 13.0")
    return int(match.group(1)), int(match.group(2))


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


def compare(rel: str, wanted: Archs, found: Archs, cuda_version: str | None) -> list[Finding]:
    """Findings of ``found`` against ``wanted`` and what PyTorch adds to it (:func:`added_archs`)."""
    out = [Finding("cuda-arch", rel, f"no {sm} cubins") for sm in sorted(wanted.cubins - found.cubins)]
    added = added_archs(wanted, cuda_version)
    out += [
        Finding("cuda-arch", rel, f"{sm} cubins, neither listed nor added by PyTorch")
        for sm in sorted(found.cubins - wanted.cubins - added)
    ]
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
