"""check-torch-config judges MAGMA without a GPU, from what the recipe's patch 0001 leaves in torch.

Patch 0001 removes the attribute ``torch._C._has_magma`` from CUDA builds and gives ``_C`` the
function ``_cuda_linalg_has_magma()``, which loads the installed libtorch_cuda_linalg and asks it:
no GPU needed. Without a GPU ``torch.__config__.show()`` has no CUDA hooks lines, so no ``Magma``
line either. The check asks the function, else the attribute (a build without the patch), else the
``Magma`` line; under CI an expectation none of them answers is a finding.

Here: the model (``megabuild.binaries.torch_config``) with each source, and the command line
importing a ``torch`` package written here with each shape of ``_C``. The real thing, the
miniature's patched ``_C`` loading the installed linalg library with each variant and with the
other variant planted, is judged in the end-to-end run (``tests/test_e2e_megabuild.py``), whose
build it shares.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from feedstock.paths import RECIPE
from megabuild.binaries import config_cli, torch_config
from megabuild.binaries.torch_config import ATTRIBUTE, FUNCTION, MAGMA_LINE, MagmaAnswer, Variant
from support.megabuild_cli import run_megabuild

SETTINGS = (
    "  - Build settings: BLAS_INFO=generic, CUDA_VERSION=12.6, USE_CUDA=ON, USE_MKL=OFF, USE_MKLDNN=ON,\n"
)
NO_GPU = "PyTorch built with:\n" + SETTINGS  # no CUDA hooks lines
GPU = "PyTorch built with:\n  - CUDA Runtime 12.6\n{magma}" + SETTINGS
MAGMA, NOMAGMA = Variant("generic", "12.6", True), Variant("generic", "12.6", False)


def _raises() -> bool:
    raise RuntimeError("libtorch_cuda_linalg.so: cannot open shared object file")


def _details(text: str, variant: Variant, magma: MagmaAnswer | None = None, ci: bool = False) -> list[str]:
    return [f.detail for f in torch_config.compare(text, variant, magma, ci=ci)]


# ------------------------------------------------------------------------------------------------
# the model: each source of the answer
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("c_module", "expected"),
    [
        # patch 0001: the function answers, whether or not an attribute is there
        (SimpleNamespace(_cuda_linalg_has_magma=lambda: True), MagmaAnswer(True, FUNCTION)),
        (SimpleNamespace(_cuda_linalg_has_magma=lambda: 0, _has_magma=True), MagmaAnswer(False, FUNCTION)),
        # a build without the patch: the attribute set at import
        (SimpleNamespace(_has_magma=False), MagmaAnswer(False, ATTRIBUTE)),
        (SimpleNamespace(_has_magma=True), MagmaAnswer(True, ATTRIBUTE)),
    ],
)
def test_torch_c_answers_from_the_function_else_the_attribute(c_module: Any, expected: MagmaAnswer) -> None:
    assert torch_config.magma_from_c(c_module) == expected


def test_a_function_that_raises_is_not_known_with_its_reason() -> None:
    answer = torch_config.magma_from_c(SimpleNamespace(_cuda_linalg_has_magma=_raises, _has_magma=True))
    assert answer is not None and answer.has_magma is None and answer.source == FUNCTION
    assert answer.line() == (
        "check-torch-config: MAGMA not known: torch._C._cuda_linalg_has_magma() raised RuntimeError: "
        "libtorch_cuda_linalg.so: cannot open shared object file"
    )


def test_torch_c_without_either_leaves_it_to_the_text() -> None:
    assert torch_config.magma_from_c(SimpleNamespace()) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GPU.format(magma="  - Magma 2.9.0\n"), MagmaAnswer(True, MAGMA_LINE, "Magma 2.9.0")),
        (GPU.format(magma=""), MagmaAnswer(False, MAGMA_LINE)),
        (NO_GPU, MagmaAnswer(None, MAGMA_LINE, "torch.__config__.show() has no CUDA hooks lines (no GPU)")),
    ],
)
def test_the_magma_line_answers_only_with_the_cuda_hooks_lines(text: str, expected: MagmaAnswer) -> None:
    assert torch_config.magma_from_text(text) == expected


@pytest.mark.parametrize(
    ("answer", "variant", "finding"),
    [
        (MagmaAnswer(True, FUNCTION), NOMAGMA,
         "no MAGMA installed, but torch._C._cuda_linalg_has_magma() is True"),
        (MagmaAnswer(False, FUNCTION), MAGMA,
         "the installed linalg variant links MAGMA, but torch._C._cuda_linalg_has_magma() is False"),
        (MagmaAnswer(False, ATTRIBUTE), MAGMA,
         "the installed linalg variant links MAGMA, but torch._C._has_magma is False"),
        (MagmaAnswer(True, ATTRIBUTE), NOMAGMA, "no MAGMA installed, but torch._C._has_magma is True"),
    ],
)  # fmt: skip
def test_torch_c_is_judged_without_a_gpu(answer: MagmaAnswer, variant: Variant, finding: str) -> None:
    assert _details(NO_GPU, variant, answer) == [finding]
    matching = Variant(variant.blas, variant.cuda_version, not variant.magma)
    assert _details(NO_GPU, matching, answer) == []


def test_torch_c_answers_before_the_magma_line() -> None:
    """With a GPU both say the same in a patched build; where they differ, torch._C is asked."""
    text = GPU.format(magma="  - Magma 2.9.0\n")
    assert _details(text, MAGMA, MagmaAnswer(True, FUNCTION)) == []
    assert _details(text, NOMAGMA) == ["no MAGMA installed, but 'Magma 2.9.0'"]


@pytest.mark.parametrize("variant", [MAGMA, NOMAGMA], ids=["magma", "nomagma"])
def test_an_expectation_nothing_answers_is_a_finding_under_ci_only(variant: Variant) -> None:
    answer = torch_config.magma_from_text(NO_GPU)
    expected = "expected" if variant.magma else "not expected"
    line = f"MAGMA {expected}, but not known: torch.__config__.show() has no CUDA hooks lines (no GPU)"
    assert torch_config.unanswered_magma(variant, answer) == line
    assert _details(NO_GPU, variant, answer, ci=True) == [line]
    assert _details(NO_GPU, variant, answer) == []
    # no expectation (CPU builds, --magma any): nothing to answer
    assert torch_config.unanswered_magma(Variant("generic", "12.6"), answer) is None
    assert _details(NO_GPU, Variant("generic", "12.6"), answer, ci=True) == []


@pytest.mark.parametrize(
    ("value", "ci"),
    [("true", True), ("1", True), ("github_actions", True), ("azure", True),
     ("", False), ("0", False), ("false", False), ("False", False)],
)  # fmt: skip
def test_ci_is_any_value_but_empty_0_or_false(value: str, ci: bool) -> None:
    assert config_cli.under_ci({"CI": value}) is ci
    assert config_cli.under_ci({}) is False


# ------------------------------------------------------------------------------------------------
# the command line, importing a torch whose _C has each shape
# ------------------------------------------------------------------------------------------------


def _torch_package(where: Path, c_module: str, show: str = NO_GPU) -> Path:
    """A ``torch`` package: ``_C`` from ``c_module``'s source, ``torch.__config__.show()`` -> ``show``."""
    package = where / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import _C, __config__\n")
    (package / "_C.py").write_text(textwrap.dedent(c_module))
    (package / "__config__.py").write_text(f"def show():\n    return {show!r}\n")
    return where


def _cli(path: Path, ci: str, *magma: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(RECIPE), str(path)]),
        "CI": ci,
    }
    cmd = [sys.executable, "-m", "megabuild", "check-torch-config", "--blas", "generic",
           "--cuda-version", "12.6", *magma]  # fmt: skip
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


FUNCTION_SAYS_YES = "def _cuda_linalg_has_magma():\n    return True\n"
FUNCTION_RAISES = "def _cuda_linalg_has_magma():\n    raise RuntimeError('no libtorch_cuda_linalg')\n"


@pytest.mark.parametrize(
    ("c_module", "show", "source_line"),
    [
        (FUNCTION_SAYS_YES, NO_GPU, "MAGMA from torch._C._cuda_linalg_has_magma(): True"),
        ("_has_magma = True\n", NO_GPU, "MAGMA from torch._C._has_magma: True"),
        ("", GPU.format(magma="  - Magma 2.9.0\n"),
         "MAGMA from the 'Magma' line of torch.__config__.show(): True"),
    ],
)  # fmt: skip
def test_the_command_says_which_source_answered(
    c_module: str, show: str, source_line: str, tmp_path: Path
) -> None:
    path = _torch_package(tmp_path, c_module, show)
    done = _cli(path, "true", "--magma", "no")
    assert done.returncode == 1, done.stderr
    assert f"check-torch-config: {source_line}" in done.stderr.splitlines()
    assert len(done.stdout.splitlines()) == 1 and "no MAGMA installed, but" in done.stdout
    assert _cli(path, "true", "--magma", "yes").returncode == 0


@pytest.mark.parametrize(
    ("c_module", "reason"),
    [
        (FUNCTION_RAISES, "torch._C._cuda_linalg_has_magma() raised RuntimeError: no libtorch_cuda_linalg"),
        ("", "torch._C has neither torch._C._cuda_linalg_has_magma() nor torch._C._has_magma, "
             "and torch.__config__.show() has no CUDA hooks lines (no GPU)"),
    ],
)  # fmt: skip
def test_not_known_fails_under_ci_and_warns_elsewhere(c_module: str, reason: str, tmp_path: Path) -> None:
    path = _torch_package(tmp_path, c_module)
    line = f"MAGMA expected, but not known: {reason}"
    under_ci = _cli(path, "github_actions", "--magma", "yes")
    assert under_ci.returncode == 1
    assert under_ci.stdout.splitlines() == [f"torch-config: torch.__config__.show(): {line}"]
    assert f"check-torch-config: MAGMA not known: {reason}" in under_ci.stderr.splitlines()
    elsewhere = _cli(path, "", "--magma", "yes")
    assert elsewhere.returncode == 0 and elsewhere.stdout == ""
    assert f"check-torch-config: warning: {line} (a finding under CI)" in elsewhere.stderr.splitlines()
    # nothing expected: nothing to answer, under CI too
    assert _cli(path, "true", "--magma", "any").returncode == 0


@pytest.mark.parametrize(("ci", "code"), [("true", 1), ("", 0)])
def test_a_show_file_answers_from_its_text_alone(
    ci: str, code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--show-file imports no torch: the text's Magma line is the only source."""
    show = tmp_path / "show.txt"
    show.write_text(NO_GPU)
    monkeypatch.setenv("CI", ci)
    args = ("check-torch-config", "--blas", "generic", "--cuda-version", "12.6", "--show-file", show)
    done = run_megabuild(*args, "--magma", "no")
    reason = "torch.__config__.show() has no CUDA hooks lines (no GPU)"
    assert f"check-torch-config: MAGMA not known: {reason}" in done.stderr.splitlines()
    assert done.returncode == code, done.stdout + done.stderr
