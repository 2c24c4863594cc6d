"""Patch 0012 on the real backend: a re-configure leaves libtorch's ``empty.cpp`` alone.

Since 2.14 every build configures (scikit-build-core), and PyTorch's ``caffe2/CMakeLists.txt``
writes ``empty.cpp`` on every configure: a second ``pip install`` of an unchanged tree recompiles
it and relinks libtorch, and through it libtorch_python, which in a megabuild is once per Python.
The fixture carries upstream's lines verbatim; the harness applies the recipe's patch to them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree

pytestmark = pytest.mark.slow


def _second_build(tmp_path: Path, cpython: CPython, cache: Path, patched: bool) -> dict[str, int]:
    tree = SkbuildTree.create(tmp_path, CONDA_FORGE_SKBUILD, cache, patched=patched)
    tree.host_env(cpython)
    tree.pip_install()
    history = ninja.LogHistory()
    history.ran(tree.build)
    tree.pip_install()
    return ninja.by_target(history.ran(tree.build))


def test_a_reconfigure_rebuilds_libtorch_unless_patched(
    tmp_path: Path, cpythons: list[CPython], pip_wheel_cache: Path
) -> None:
    if shutil.which("cmake") is None or shutil.which("ninja") is None or not cpythons:
        pytest.skip("cmake, ninja and a CPython are needed")
    upstream = _second_build(tmp_path / "upstream", cpythons[-1], pip_wheel_cache, patched=False)
    patched = _second_build(tmp_path / "patched", cpythons[-1], pip_wheel_cache, patched=True)
    print(f"\nsecond build, upstream's lines: {upstream}; with patch 0012: {patched}")
    assert upstream.get("torch") == 2, upstream  # empty.cpp compiled, libtorch linked
    assert "torch_python" in upstream, upstream  # relinked against the new libtorch
    assert patched == {}, patched
