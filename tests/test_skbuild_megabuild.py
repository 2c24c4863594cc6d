"""The scikit-build-core trap, on the fixture built by the real backend (conda-forge's version
and PyPI's newest).

Two conda-like host envs at the SAME prefix, as conda-build makes them: Python A, then Python B,
each with its own scikit-build-core under ``lib/python3.X/site-packages``. The tree is built for
A; then B's output builds in the same ``build/``:

* naively (just ``pip install .``): scikit-build-core sees another package dir in
  ``.skbuild-info.json``, deletes the cache and ``CMakeFiles/`` ("New isolated environment ...
  clearing cache", logged at INFO only: pip -v does not show it), and everything compiles again;
* as the recipe does (``megabuild cache restore --swap-python-from A --to B``, then
  ``megabuild build adopt``): no clearing; only torch_python's and ``_C``'s objects compile, and
  the cache CMake leaves equals a fresh scikit-build-core configure for B (File API oracle).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from feedstock.paths import RECIPE
from harness import ninja
from harness.conda_build import CONDA_FORGE_SKBUILD, skbuild_packages
from harness.prefix import python_prefix
from harness.pythons import CPython
from support.cmake_file_api import differences, read_cache, request_cache

FIXTURE = Path(__file__).resolve().parent / "fixture" / "minitorch"
pytestmark = pytest.mark.slow
PYTHON_TARGETS = {"torch_python", "_C"}
# relinked because every configure rewrites empty.cpp (as PyTorch's does); not compiled for B
RELINKED = {"torch"}
# Entries a fresh configure and a re-configure legitimately differ in: the backend's temporary
# wheel dirs (new on every run) and what only a re-configure leaves (FindPython's validation).
PER_RUN = re.compile(
    r"^SKBUILD_(PLATLIB|DATA|HEADERS|SCRIPTS|NULL|METADATA)_DIR$|^CMAKE_INSTALL_PREFIX$"
    r"|^_Python_Interpreter_REASON_FAILURE$"
)


@dataclass
class Tree:
    src: Path
    prefix: Path
    a: CPython
    b: CPython
    version: str
    pip_cache: Path

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.prefix / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "HOME": os.environ.get("HOME", str(self.src)),
            "CMAKE_GENERATOR": "Ninja",
            "USE_CUDA": "0",
            "USE_MKLDNN": "0",
            "BUILD_TEST": "0",
            "MAX_JOBS": "2",
            "PYTORCH_BUILD_VERSION": "2.14.1",
        }

    def host_env(self, cpython: CPython) -> None:
        """(Re)create the host env at the same prefix, with its own scikit-build-core."""
        packages = ["numpy", "pip", *skbuild_packages(self.version, cpython.version[:2])]
        python_prefix(cpython, self.prefix, packages, cache_dir=self.pip_cache)

    def run(self, *args: str, python_path: bool = False) -> str:
        env = self.env() | ({"PYTHONPATH": str(RECIPE)} if python_path else {})
        proc = subprocess.run(
            [str(self.prefix / "bin/python"), *args], cwd=self.src, env=env, capture_output=True, text=True
        )
        assert proc.returncode == 0, f"{args}: {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        return proc.stdout + proc.stderr

    def pip_install(self) -> str:
        return self.run("-m", "pip", "install", ".", "--no-deps", "--no-build-isolation", "-v")

    def megabuild(self, *args: str) -> str:
        return self.run("-m", "megabuild", *args, python_path=True)


def _compiled_targets(log: str) -> dict[str, int]:
    compiled = [o for run in ninja.status_runs(log) for o in run if ninja.kind(o) == "compile"]
    return ninja.by_target(compiled)


@pytest.fixture(scope="module", params=[CONDA_FORGE_SKBUILD, "1.1.2"], ids=lambda v: f"skbuild{v}")
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, two_cpythons: list[CPython],
    pip_wheel_cache: Path,
) -> Iterator[tuple[Tree, Path]]:  # fmt: skip
    """The tree built for Python A by the real backend, and a pristine copy of it."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    by_short = {c.short: c for c in two_cpythons}
    a = by_short.get("3.12", two_cpythons[-1])
    b = next(c for c in reversed(two_cpythons) if c is not a)
    work = tmp_path_factory.mktemp(f"skbuild-{request.param}")
    tree = Tree(work / "src", work / "h_env_placehold", a, b, request.param, pip_wheel_cache)
    shutil.copytree(FIXTURE, tree.src, ignore=shutil.ignore_patterns("build", "__pycache__"))
    tree.host_env(a)
    log = tree.pip_install()
    assert f"*** scikit-build-core {request.param}" in log
    tree.megabuild("cache", "save", "build/CMakeCache.txt")
    pristine = work / "pristine-build"
    shutil.copytree(tree.src / "build", pristine, symlinks=True)
    tree.host_env(b)  # B's output: same prefix, B's own scikit-build-core
    yield tree, pristine


def _reset(tree: Tree, pristine: Path) -> None:
    shutil.rmtree(tree.src / "build")
    shutil.copytree(pristine, tree.src / "build", symlinks=True)


def test_naive_second_python_clears_the_cache_and_rebuilds_everything(built: tuple[Tree, Path]) -> None:
    tree, pristine = built
    _reset(tree, pristine)
    (tree.src / "build/CMakeFiles/megabuild-tree-kept").write_text("")  # what adopt leaves
    log = tree.pip_install()
    compiled = _compiled_targets(log)
    # scikit-build-core logs "New isolated environment ... clearing cache" at INFO, which pip -v
    # does not show: without the marker check the full rebuild would pass silently
    said = bool(re.search(r"New isolated environment .* clearing cache", log))
    print(f"\nnaive {tree.a.short} -> {tree.b.short}: compiled {compiled}; backend said so: {said}")
    assert {"c10", "torch_cpu"} <= set(compiled), compiled
    assert not (tree.src / "build/CMakeFiles/megabuild-tree-kept").exists()


def test_recipe_flow_keeps_the_cache_and_compiles_only_python_targets(built: tuple[Tree, Path]) -> None:
    tree, pristine = built
    _reset(tree, pristine)
    tree.megabuild("cache", "restore", "build/CMakeCache.txt", "--swap-python-from", tree.a.short,
                   "--to", tree.b.short)  # fmt: skip
    adopted = tree.megabuild("build", "adopt")
    assert "adopted for this output's backend" in adopted, adopted
    request_cache(tree.src / "build")
    log = tree.pip_install()
    compiled = _compiled_targets(log)
    print(f"\nrecipe {tree.a.short} -> {tree.b.short}: compiled {compiled}")
    assert "clearing cache" not in log, log[-3000:]
    assert (tree.src / "build/CMakeFiles/megabuild-tree-kept").is_file()
    assert set(compiled) - RELINKED == PYTHON_TARGETS, compiled
    assert compiled.get("torch", 0) <= 1  # empty.cpp, rewritten by the configure
    tag = tree.b.short.replace(".", "")
    assert list((tree.src / "build/lib").glob(f"_C.cpython-{tag}-*.so"))

    # the oracle: the same backend configuring B from nothing gives the same cache
    kept = read_cache(tree.src / "build")
    shutil.rmtree(tree.src / "build")
    request_cache(tree.src / "build")
    tree.pip_install()
    fresh = read_cache(tree.src / "build")
    diff = {k: v for k, v in differences(kept, fresh).items() if not PER_RUN.match(k)}
    assert not diff, diff
