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

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree as Tree
from support.cmake_file_api import differences, read_cache, request_cache

pytestmark = pytest.mark.slow
Built = tuple[Tree, CPython, CPython, Path]  # the tree, Python A, Python B, A's build kept
PYTHON_TARGETS = {"torch_python", "_C"}
# Entries a fresh configure and a re-configure legitimately differ in: the backend's temporary
# wheel dirs (new on every run) and what only a re-configure leaves (FindPython's validation).
PER_RUN = re.compile(
    r"^SKBUILD_(PLATLIB|DATA|HEADERS|SCRIPTS|NULL|METADATA)_DIR$|^CMAKE_INSTALL_PREFIX$"
    r"|^_Python_Interpreter_REASON_FAILURE$"
)


def _compiled_targets(log: str) -> dict[str, int]:
    compiled = [o for run in ninja.status_runs(log) for o in run if ninja.kind(o) == "compile"]
    return ninja.by_target(compiled)


@pytest.fixture(scope="module", params=[CONDA_FORGE_SKBUILD, "1.1.2"], ids=lambda v: f"skbuild{v}")
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, two_cpythons: list[CPython],
    pip_wheel_cache: Path,
) -> Iterator[Built]:  # fmt: skip
    """The tree built for Python A by the real backend, and a pristine copy of it."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    by_short = {c.short: c for c in two_cpythons}
    a = by_short.get("3.12", two_cpythons[-1])
    b = next(c for c in reversed(two_cpythons) if c is not a)
    work = tmp_path_factory.mktemp(f"skbuild-{request.param}")
    tree = Tree.create(work, request.param, pip_wheel_cache)
    tree.host_env(a)
    log = tree.pip_install()
    assert f"*** scikit-build-core {request.param}" in log
    tree.megabuild("cache", "save", "build/CMakeCache.txt")
    pristine = work / "pristine-build"
    tree.keep(pristine)
    tree.host_env(b)  # B's output: same prefix, B's own scikit-build-core
    yield tree, a, b, pristine


def test_naive_second_python_clears_the_cache_and_rebuilds_everything(
    built: Built,
) -> None:
    tree, a, b, pristine = built
    tree.reset(pristine)
    (tree.src / "build/CMakeFiles/megabuild-tree-kept").write_text("")  # what adopt leaves
    log = tree.pip_install()
    compiled = _compiled_targets(log)
    # scikit-build-core logs "New isolated environment ... clearing cache" at INFO, which pip -v
    # does not show: without the marker check the full rebuild would pass silently
    said = bool(re.search(r"New isolated environment .* clearing cache", log))
    print(f"\nnaive {a.short} -> {b.short}: compiled {compiled}; backend said so: {said}")
    assert {"c10", "torch_cpu"} <= set(compiled), compiled
    assert not (tree.src / "build/CMakeFiles/megabuild-tree-kept").exists()


def test_recipe_flow_keeps_the_cache_and_compiles_only_python_targets(
    built: Built,
) -> None:
    tree, a, b, pristine = built
    tree.reset(pristine)
    tree.megabuild("cache", "restore", "build/CMakeCache.txt", "--swap-python-from", a.short,
                   "--to", b.short)  # fmt: skip
    adopted = tree.megabuild("build", "adopt")
    assert "adopted for this output's backend" in adopted, adopted
    request_cache(tree.src / "build")
    log = tree.pip_install()
    compiled = _compiled_targets(log)
    print(f"\nrecipe {a.short} -> {b.short}: compiled {compiled}")
    assert "clearing cache" not in log, log[-3000:]
    assert (tree.src / "build/CMakeFiles/megabuild-tree-kept").is_file()
    # not libtorch's empty.cpp either: patch 0012 keeps the configure from rewriting it
    assert set(compiled) == PYTHON_TARGETS, compiled
    tag = b.short.replace(".", "")
    assert list((tree.src / "build/lib").glob(f"_C.cpython-{tag}-*.so"))

    # the oracle: the same backend configuring B from nothing gives the same cache
    kept = read_cache(tree.src / "build")
    shutil.rmtree(tree.src / "build")
    request_cache(tree.src / "build")
    tree.pip_install()
    fresh = read_cache(tree.src / "build")
    diff = {k: v for k, v in differences(kept, fresh).items() if not PER_RUN.match(k)}
    assert not diff, diff
