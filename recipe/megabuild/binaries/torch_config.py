"""``torch.__config__.show()`` against the variant the package was built for.

The text has a ``Build settings:`` line (``BLAS_INFO=mkl, ..., CUDA_VERSION=13.0, ...,
USE_CUDA=ON, ..., USE_MKL=ON, USE_MKLDNN=ON, ...``) compiled into libtorch. Only where a GPU is
present (``at::hasCUDA()``) the CUDA hooks add their lines: ``CUDA Runtime 13.0`` and, with the
recipe's patch 0001, ``Magma x.y.z`` exactly when the installed linalg variant links MAGMA. Without
a GPU (conda-forge's CI) MAGMA is judged from ``torch._C._has_magma`` instead, which patch 0001
answers from the installed variant too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megabuild.binaries.findings import Finding

WHERE = "torch.__config__.show()"


@dataclass(frozen=True)
class Variant:
    blas: str
    """``mkl`` or ``generic`` (conda-forge's blas_impl)."""
    cuda_version: str | None
    """``cuda_compiler_version`` (``13.0``), ``None`` for a CPU build."""
    magma: bool | None = None
    """MAGMA expected (the installed linalg variant); ``None``: not checked."""
    mkldnn: bool | None = None


def build_settings(text: str) -> dict[str, str]:
    match = re.search(r"Build settings:(.*)", text)
    if match is None:
        return {}
    pairs = (item.strip().partition("=") for item in match.group(1).split(","))
    return {key: value.strip() for key, sep, value in pairs if sep}


def _on(value: str | None) -> bool:
    return (value or "").upper() in ("ON", "1", "TRUE", "YES")


def compare(text: str, variant: Variant, has_magma: bool | None = None) -> list[Finding]:
    """Findings of ``text`` against ``variant``; ``has_magma``: ``torch._C._has_magma`` if known."""
    settings = build_settings(text)
    if not settings:
        return [Finding("torch-config", WHERE, "no 'Build settings:' line")]
    out: list[str] = []
    blas, mkl = settings.get("BLAS_INFO", ""), _on(settings.get("USE_MKL"))
    if variant.blas == "mkl" and (blas != "mkl" or not mkl):
        out.append(f"blas_impl mkl, but BLAS_INFO={blas or '(none)'}, USE_MKL={settings.get('USE_MKL')}")
    if variant.blas != "mkl" and (blas == "mkl" or mkl):
        out.append(f"blas_impl {variant.blas}, but BLAS_INFO={blas}, USE_MKL={settings.get('USE_MKL')}")
    out += _cuda(text, settings, variant)
    out += _magma(text, variant, has_magma)
    if variant.mkldnn is not None and _on(settings.get("USE_MKLDNN")) != variant.mkldnn:
        out.append(
            f"MKL-DNN {'expected' if variant.mkldnn else 'not expected'}, "
            f"USE_MKLDNN={settings.get('USE_MKLDNN')}"
        )
    return [Finding("torch-config", WHERE, line) for line in out]


def _magma(text: str, variant: Variant, has_magma: bool | None) -> list[str]:
    if variant.magma is None:
        return []
    if re.search(r"- CUDA Runtime ", text) is not None:  # the CUDA hooks' lines are there
        magma = re.search(r"^\s*- Magma (\S+)", text, re.MULTILINE)
        if variant.magma and magma is None:
            return ["the installed linalg variant links MAGMA, but no 'Magma' line"]
        if not variant.magma and magma is not None:
            return [f"no MAGMA installed, but 'Magma {magma.group(1)}'"]
    if has_magma is not None and has_magma != variant.magma:
        links = "links" if variant.magma else "has no"
        return [f"the installed linalg variant {links} MAGMA, but torch._C._has_magma is {has_magma}"]
    return []


def _cuda(text: str, settings: dict[str, str], variant: Variant) -> list[str]:
    runtime = re.search(r"- CUDA Runtime (\S+)", text)
    if variant.cuda_version is None:
        if _on(settings.get("USE_CUDA")) or runtime is not None:
            return [
                f"CPU build, but USE_CUDA={settings.get('USE_CUDA')}, "
                f"CUDA Runtime {runtime and runtime.group(1)}"
            ]
        return []
    out = []
    if not _on(settings.get("USE_CUDA")):
        out.append(f"CUDA {variant.cuda_version} build, but USE_CUDA={settings.get('USE_CUDA')}")
    built = settings.get("CUDA_VERSION", "")
    if built != variant.cuda_version:
        out.append(f"CUDA {variant.cuda_version} build, but CUDA_VERSION={built or '(none)'}")
    return out
