"""check-torch-config judged by the real ``torch.__config__.show()`` of upstream's 2.14.1 build.

``tests/data/torch-2.14.1-linux-64-cuda130-config-show.txt`` is what the linux-64 wheel (CUDA 13.0,
MKL) prints without a GPU, saved from the rehearsal's environment (docs/rehearsal.md). The
pytorch output's rendered gate for that variant must pass it, and fail it when the build settings
say another BLAS, CUDA version or MKL-DNN, planted in the real text. MAGMA is judged from the
library, not this text (``tests/test_torch_config_magma.py``), so ``--magma any`` here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from support.megabuild_cli import run_megabuild

SHOW = Path(__file__).parent / "data" / "torch-2.14.1-linux-64-cuda130-config-show.txt"
VARIANT = ("--blas", "mkl", "--cuda-version", "13.0", "--mkldnn", "yes", "--magma", "any")


def _check(text: str, tmp_path: Path, *variant: str) -> tuple[int, list[str]]:
    shown = tmp_path / "show.txt"
    shown.write_text(text, encoding="utf-8")
    done = run_megabuild("check-torch-config", *variant, "--show-file", shown)
    return done.returncode, done.stdout.splitlines()


def test_the_real_build_settings_pass_their_variant(tmp_path: Path) -> None:
    text = SHOW.read_text(encoding="utf-8")
    assert "BLAS_INFO=mkl" in text and "CUDA_VERSION=13.0" in text and "USE_MKLDNN=ON" in text
    assert _check(text, tmp_path, *VARIANT) == (0, [])


def _planted(setting: str, value: str) -> str:
    text = SHOW.read_text(encoding="utf-8")
    planted, count = re.subn(rf"\b{setting}=[^,]*", f"{setting}={value}", text)
    assert count == 1, setting
    return planted


@pytest.mark.parametrize(
    ("text", "variant", "finding"),
    [
        # the wrong BLAS in the build settings
        (lambda: _planted("BLAS_INFO", "open").replace("USE_MKL=ON", "USE_MKL=OFF"), VARIANT,
         "blas_impl mkl, but BLAS_INFO=open, USE_MKL=OFF"),
        # the real MKL build judged as the generic-BLAS variant
        (lambda: SHOW.read_text(encoding="utf-8"), ("--blas", "generic", *VARIANT[2:]),
         "blas_impl generic, but BLAS_INFO=mkl, USE_MKL=ON"),
        (lambda: _planted("CUDA_VERSION", "12.6"), VARIANT, "CUDA 13.0 build, but CUDA_VERSION=12.6"),
        (lambda: _planted("USE_CUDA", "0"), VARIANT, "CUDA 13.0 build, but USE_CUDA=0"),
        (lambda: _planted("USE_MKLDNN", "OFF"), VARIANT, "MKL-DNN expected, USE_MKLDNN=OFF"),
    ],
)  # fmt: skip
def test_a_planted_build_setting_fails(
    text: Callable[[], str], variant: tuple[str, ...], finding: str, tmp_path: Path
) -> None:
    code, lines = _check(text(), tmp_path, *variant)
    assert code == 1 and lines == [f"torch-config: torch.__config__.show(): {finding}"], lines
