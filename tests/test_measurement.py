"""A measurement never fails a build: the figures of a ``pip install .`` pass come from files.

* The miniature megabuild with ``FORCE_COLOR=1`` handed to every build script, as conda-build
  hands a variable the recipe's ``script_env`` names, is tests/test_e2e_megabuild.py's own run
  (``test_force_color_build_passes_and_is_measured`` there: one build, not two).
* One pass of the real backend on the fixture with ``PIP_QUIET`` set (neither the banner nor
  pip's ``Created wheel for`` line is printed): every figure is still taken; and with the
  backend's metadata planted away, the pass goes on with one warning line.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree
from megabuild.pipeline import frontend

pytestmark = pytest.mark.slow
CONFIG = "linux_64_cpu_generic"
WHEEL = r"torch-2\.14\.1-cp3\d+-cp3\d+t?-linux_x86_64\.whl"
BYTES_LINE = re.compile(
    r"^bytes: cmake --install wrote \d+ files, [\d,]+ bytes; the wheel packed \d+ files, [\d,]+ bytes "
    rf"\(({WHEEL}), scikit-build-core ([^)\s]+)\)$",
    re.M,
)


# -- one pass of the real backend, its log silenced --------------------------------------------


@pytest.fixture(scope="module")
def tree(
    tmp_path_factory: pytest.TempPathFactory, cpythons: list[CPython], pip_wheel_cache: Path
) -> Iterator[SkbuildTree]:
    """The fixture and a host env with conda-forge's scikit-build-core, at 3.12 (or the newest)."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    if not cpythons:
        pytest.skip("needs a CPython >= 3.10")
    python = next((c for c in cpythons if c.short == "3.12"), cpythons[-1])
    built = SkbuildTree.create(tmp_path_factory.mktemp("quiet-pip"), CONDA_FORGE_SKBUILD, pip_wheel_cache)
    built.host_env(python)
    yield built


def _sp_dir(tree: SkbuildTree) -> Path:
    return next((tree.prefix / "lib").glob("python3.*/site-packages"))


def _quiet_pass(tree: SkbuildTree, monkeypatch: pytest.MonkeyPatch) -> frontend.InstallResult:
    """``frontend.pip_install`` as the pipeline calls it, in the tree's build environment."""
    for key, value in (tree.env() | {"PIP_QUIET": "2"}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    return frontend.pip_install(tree.python, tree.src, [], _sp_dir(tree), tree.prefix)


def test_quiet_pip_is_measured_from_files(
    tree: SkbuildTree, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    result = _quiet_pass(tree, monkeypatch)
    out = "".join(capfd.readouterr())
    # what a log scraper needed is not there at all
    assert "Created wheel for" not in out and f"scikit-build-core {CONDA_FORGE_SKBUILD}" not in out, out
    assert result.missing == () and "megabuild: warning" not in out, out
    assert result.backend == CONDA_FORGE_SKBUILD
    assert result.wheel is not None and re.fullmatch(WHEEL, result.wheel), result.wheel
    assert result.packed is not None and result.installed is not None
    assert result.packed.files > 0 and result.installed.files > 0
    assert BYTES_LINE.fullmatch(result.line()), result.line()


def test_figure_not_taken_is_one_warning_and_the_pass_goes_on(
    tree: SkbuildTree, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Planted: the backend imports, but its metadata is gone (renamed away from .dist-info)."""
    (dist_info,) = _sp_dir(tree).glob("scikit_build_core-*.dist-info")
    hidden = dist_info.with_name("hidden-metadata")
    dist_info.rename(hidden)
    try:
        result = _quiet_pass(tree, monkeypatch)
    finally:
        hidden.rename(dist_info)
    out = "".join(capfd.readouterr())
    warnings = [line for line in out.splitlines() if "warning: not measured" in line]
    assert len(warnings) == 1, out
    assert warnings[0].startswith("megabuild: warning:") and "scikit-build-core metadata" in warnings[0]
    assert result.backend is None and result.wheel is not None and result.packed is not None
    assert "scikit-build-core (unknown)" in result.line()
    assert os.path.isdir(tree.src / "build")
