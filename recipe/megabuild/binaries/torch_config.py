"""``torch.__config__.show()`` against the variant the package was built for.

The text has a ``Build settings:`` line (``BLAS_INFO=mkl, ..., CUDA_VERSION=13.0, ...,
USE_CUDA=ON, ..., USE_MKL=ON, USE_MKLDNN=ON, ...``) compiled into libtorch. Only where a GPU is
present (``at::hasCUDA()``) the CUDA hooks add their lines: ``CUDA Runtime 13.0`` and, with the
recipe's patch 0001, ``Magma x.y.z`` exactly when the installed linalg variant links MAGMA.

MAGMA support is asked of ``torch._C`` first, which answers without a GPU (conda-forge's CI):
patch 0001 gives it the function ``_cuda_linalg_has_magma()``, which loads the installed
libtorch_cuda_linalg and asks it, and removes the attribute ``_has_magma`` that an unpatched
build sets at import. Only when ``_C`` has neither does the ``Magma`` line answer, and only where
the CUDA hooks' lines are there. An expectation no source can answer is a finding under CI (a
check that cannot fail there checks nothing) and a warning elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megabuild.binaries.findings import Finding
from megabuild.model import MKL_BLAS

WHERE = "torch.__config__.show()"
# where an answer about MAGMA comes from, as the findings and the report line name it
FUNCTION = "torch._C._cuda_linalg_has_magma()"
ATTRIBUTE = "torch._C._has_magma"
MAGMA_LINE = "the 'Magma' line of torch.__config__.show()"
_CUDA_HOOKS = re.compile(r"- CUDA Runtime ")


@dataclass(frozen=True)
class Variant:
    blas: str
    """``mkl`` or ``generic`` (conda-forge's blas_impl)."""
    cuda_version: str | None
    """``cuda_compiler_version`` (``13.0``), ``None`` for a CPU build."""
    magma: bool | None = None
    """MAGMA expected (the installed linalg variant); ``None``: not checked."""
    mkldnn: bool | None = None


@dataclass(frozen=True)
class MagmaAnswer:
    """Whether torch has MAGMA, and which source said so."""

    has_magma: bool | None
    """``None``: not known (``detail`` says why)."""
    source: str
    """:data:`FUNCTION`, :data:`ATTRIBUTE` or :data:`MAGMA_LINE`."""
    detail: str = ""
    """Why it is not known; the ``Magma x.y.z`` line where that answered yes."""

    def line(self) -> str:
        """The report line saying where the answer came from."""
        if self.has_magma is None:
            return f"check-torch-config: MAGMA not known: {self.detail}"
        return f"check-torch-config: MAGMA from {self.source}: {self.has_magma}"

    def evidence(self) -> str:
        """What the source said, as a finding quotes it."""
        if self.source == MAGMA_LINE:
            return f"'{self.detail}'" if self.has_magma else "no 'Magma' line"
        return f"{self.source} is {self.has_magma}"


def magma_from_c(c_module: object) -> MagmaAnswer | None:
    """What ``torch._C`` says of MAGMA: patch 0001's function, else an unpatched build's attribute;
    ``None`` when it has neither."""
    ask = getattr(c_module, "_cuda_linalg_has_magma", None)
    if ask is not None:
        try:
            return MagmaAnswer(bool(ask()), FUNCTION)
        except Exception as exc:  # loading the installed library can fail in any way torch reports
            return MagmaAnswer(None, FUNCTION, f"{FUNCTION} raised {type(exc).__name__}: {exc}")
    attribute = getattr(c_module, "_has_magma", None)
    if attribute is not None:
        return MagmaAnswer(bool(attribute), ATTRIBUTE)
    return None


def magma_from_text(text: str, why: str = "") -> MagmaAnswer:
    """The answer of the ``Magma`` line, known only where the CUDA hooks' lines are there (a GPU);
    ``why``: what else was asked, for the reason it is not known."""
    if _CUDA_HOOKS.search(text) is None:
        reason = f"{WHERE} has no CUDA hooks lines (no GPU)"
        return MagmaAnswer(None, MAGMA_LINE, f"{why}, and {reason}" if why else reason)
    magma = re.search(r"^\s*- (Magma \S+)", text, re.MULTILINE)
    return MagmaAnswer(magma is not None, MAGMA_LINE, magma.group(1) if magma else "")


def build_settings(text: str) -> dict[str, str]:
    match = re.search(r"Build settings:(.*)", text)
    if match is None:
        return {}
    pairs = (item.strip().partition("=") for item in match.group(1).split(","))
    return {key: value.strip() for key, sep, value in pairs if sep}


def _on(value: str | None) -> bool:
    return (value or "").upper() in ("ON", "1", "TRUE", "YES")


def compare(
    text: str, variant: Variant, magma: MagmaAnswer | None = None, *, ci: bool = False
) -> list[Finding]:
    """Findings of ``text`` against ``variant``. ``magma``: torch's answer (:func:`magma_from_c`),
    ``None``: the text's ``Magma`` line answers. ``ci``: a MAGMA expectation nothing answers is a
    finding (elsewhere :func:`unanswered_magma` is the caller's warning)."""
    settings = build_settings(text)
    if not settings:
        return [Finding("torch-config", WHERE, "no 'Build settings:' line")]
    out: list[str] = []
    blas, mkl = settings.get("BLAS_INFO", ""), _on(settings.get("USE_MKL"))
    if variant.blas == MKL_BLAS and (blas != "mkl" or not mkl):  # BLAS_INFO: torch's own word
        out.append(f"blas_impl mkl, but BLAS_INFO={blas or '(none)'}, USE_MKL={settings.get('USE_MKL')}")
    if variant.blas != MKL_BLAS and (blas == "mkl" or mkl):
        out.append(f"blas_impl {variant.blas}, but BLAS_INFO={blas}, USE_MKL={settings.get('USE_MKL')}")
    out += _cuda(text, settings, variant)
    out += _magma(variant, magma or magma_from_text(text), ci)
    if variant.mkldnn is not None and _on(settings.get("USE_MKLDNN")) != variant.mkldnn:
        out.append(
            f"MKL-DNN {'expected' if variant.mkldnn else 'not expected'}, "
            f"USE_MKLDNN={settings.get('USE_MKLDNN')}"
        )
    return [Finding("torch-config", WHERE, line) for line in out]


def unanswered_magma(variant: Variant, answer: MagmaAnswer) -> str | None:
    """The line for a MAGMA expectation ``answer`` cannot check; ``None`` when there is none."""
    if variant.magma is None or answer.has_magma is not None:
        return None
    return f"MAGMA {'expected' if variant.magma else 'not expected'}, but not known: {answer.detail}"


def _magma(variant: Variant, answer: MagmaAnswer, ci: bool) -> list[str]:
    unanswered = unanswered_magma(variant, answer)
    if unanswered is not None:
        return [unanswered] if ci else []
    if variant.magma is None or answer.has_magma == variant.magma:
        return []
    if variant.magma:
        return [f"the installed linalg variant links MAGMA, but {answer.evidence()}"]
    return [f"no MAGMA installed, but {answer.evidence()}"]


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
