"""The per-Python megabuild flow with a real free-threaded CPython: GIL -> free-threaded -> GIL.

The fixture is built by the real scikit-build-core for a GIL Python A (3.12, as the top level),
then, in the same ``build/`` and with the host env recreated at the same prefix, for the
free-threaded CPython B (3.13t, ``.ci/provision-freethreaded-python.sh``) and back for a GIL
Python C, each the way the recipe's pytorch step does it: ``megabuild cache restore`` of the
pristine cache with ``--swap-python-from 3.12 --to <B>`` (interpreter mode: the host env's
interpreter is asked), ``megabuild build adopt``, ``pip install .``. For each extra Python:

* only torch_python's and ``_C``'s objects compile;
* ``_C`` carries that build's suffix (``cpython-313t-...`` / ``cpython-313-...``) and imports
  under its interpreter;
* under the free-threaded interpreter the GIL is still off after ``import torch`` (the fixture's
  ``_C`` declares ``Py_MOD_GIL_NOT_USED``, as upstream 2.14.1's does);
* the swapped cache equals what the backend writes configuring B from nothing (File API oracle),
  which checks the free-threaded forms against CMake itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree as Tree
from support.cmake_file_api import CacheEntries, differences, read_cache, request_cache
from support.python_files import foreign_python_files
from test_skbuild_megabuild import PER_RUN, PYTHON_TARGETS, _compiled_targets

pytestmark = pytest.mark.slow
TOP = "3.12"  # the top level's Python (meta.yaml's megabuild_python; the top level records it)
IMPORT_CHECK = (
    "import json, sys, sysconfig, torch\n"
    "print(json.dumps({'gil_disabled_build': bool(sysconfig.get_config_var('Py_GIL_DISABLED')),\n"
    "  'gil_enabled': sys._is_gil_enabled() if hasattr(sys, '_is_gil_enabled') else True,\n"
    "  'c': torch._C.__file__, 'sum': torch.ones_sum(3), 'compiled': torch._C._compiled_python()}))\n"
)


class Flow:
    """The shared tree and what each Python's step compiled."""

    def __init__(self, tree: Tree, pristine: Path) -> None:
        self.tree = tree
        self.pristine = pristine
        self.compiled: dict[str, dict[str, int]] = {}
        self.imported: dict[str, dict[str, object]] = {}
        self.foreign: dict[str, list[str]] = {}  # installed files of another Python build
        self.kept_ft: CacheEntries = {}  # CMake's view of the cache the free-threaded step left

    def step(self, cpython: CPython) -> None:
        """The recipe's pytorch step for ``cpython`` (steps.py: _prepare_tree, _install)."""
        tree = self.tree
        tree.host_env(cpython)
        shutil.copy2(self.pristine, tree.build / "CMakeCache.txt")  # what `cache restore` starts from
        tree.megabuild("cache", "restore", "build/CMakeCache.txt", "--swap-python-from", TOP,
                       "--to", cpython.tag)  # fmt: skip
        adopted = tree.megabuild("build", "adopt")
        assert "adopted for this output's backend" in adopted, adopted
        request_cache(tree.build)
        log = tree.pip_install()
        assert "clearing cache" not in log, log[-3000:]
        self.compiled[cpython.tag] = _compiled_targets(log)
        # what pip installed from the shared tree (whose build/lib holds every Python's _C)
        site = f"lib/{cpython.dirname}/site-packages"
        (record,) = (tree.prefix / site).glob("torch-*.dist-info/RECORD")
        files = [f"{site}/{line.split(',')[0]}" for line in record.read_text().splitlines() if line]
        self.foreign[cpython.tag] = foreign_python_files(files, cpython.tag)
        out = tree.run("-I", "-c", IMPORT_CHECK)  # -I: not the source tree's torch/ in the cwd
        self.imported[cpython.tag] = json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pythons(cpythons: list[CPython], freethreaded_python: CPython) -> tuple[CPython, CPython, CPython]:
    gil = {c.short: c for c in cpythons}
    if TOP not in gil or len(gil) < 2:
        pytest.skip(f"needs CPython {TOP} and another GIL CPython, found {sorted(gil)}")
    other = gil.get(freethreaded_python.short) or next(c for s, c in reversed(gil.items()) if s != TOP)
    return gil[TOP], freethreaded_python, other


@pytest.fixture(scope="module")
def flow(
    tmp_path_factory: pytest.TempPathFactory,
    pythons: tuple[CPython, CPython, CPython],
    pip_wheel_cache: Path,
) -> Iterator[Flow]:
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    top, ft, gil = pythons
    work = tmp_path_factory.mktemp("freethreaded")
    tree = Tree.create(work, CONDA_FORGE_SKBUILD, pip_wheel_cache)
    tree.host_env(top)
    tree.pip_install()
    tree.megabuild("cache", "save", "build/CMakeCache.txt")
    flow = Flow(tree, work / "CMakeCache.txt.pristine")
    shutil.copy2(tree.build / "CMakeCache.txt", flow.pristine)
    flow.step(ft)
    flow.kept_ft = read_cache(tree.build)
    flow.step(gil)
    print(f"\ncompiled per step (top level {top.tag} built everything): {flow.compiled}")
    yield flow


def test_each_extra_python_compiles_only_python_dependent_objects(
    flow: Flow, pythons: tuple[CPython, CPython, CPython]
) -> None:
    _, ft, gil = pythons
    for cpython in (ft, gil):
        compiled = flow.compiled[cpython.tag]
        assert set(compiled) == PYTHON_TARGETS, (cpython.tag, compiled)


def test_freethreaded_c_imports_with_the_gil_still_off(
    flow: Flow, pythons: tuple[CPython, CPython, CPython]
) -> None:
    _, ft, gil = pythons
    nodot = ft.short.replace(".", "")
    info = flow.imported[ft.tag]
    print(f"\n{ft.tag}: {info}")
    assert info["gil_disabled_build"] is True
    assert f"_C.cpython-{nodot}t-" in str(info["c"]), info
    assert info["sum"] == 6.0 and str(info["compiled"]).startswith(ft.short)
    assert info["gil_enabled"] is False, "importing torch turned the GIL back on"
    back = flow.imported[gil.tag]
    assert back["gil_disabled_build"] is False and back["gil_enabled"] is True
    assert f"_C.cpython-{gil.short.replace('.', '')}-" in str(back["c"]), back


def test_each_python_installs_only_its_own_files(flow: Flow) -> None:
    """The tree's build/lib holds _C for 3.12, 3.13t and 3.13; each install takes its own only."""
    assert len(flow.foreign) == 2 and not any(flow.foreign.values()), flow.foreign


def test_both_builds_of_c_stay_in_the_tree(flow: Flow, pythons: tuple[CPython, CPython, CPython]) -> None:
    _, ft, gil = pythons
    names = sorted(p.name for p in (flow.tree.build / "lib").glob("_C.cpython-*.so"))
    print(f"\n{names}")
    assert any(n.startswith(f"_C.cpython-{ft.short.replace('.', '')}t-") for n in names), names
    assert any(n.startswith(f"_C.cpython-{gil.short.replace('.', '')}-") for n in names), names


def test_swapped_freethreaded_cache_equals_a_fresh_configure(
    flow: Flow, pythons: tuple[CPython, CPython, CPython]
) -> None:
    """The oracle: the backend configuring the free-threaded Python from nothing writes the same
    cache as the swap from the GIL build (ABIFLAGS, SOSABI, python3.13t paths, NumPy dir)."""
    _, ft, _ = pythons
    tree = flow.tree
    tree.host_env(ft)
    shutil.rmtree(tree.build)
    request_cache(tree.build)
    tree.pip_install()
    fresh = read_cache(tree.build)
    diff = {k: v for k, v in differences(flow.kept_ft, fresh).items() if not PER_RUN.match(k)}
    assert not diff, diff
    assert "t" in fresh["_Python_INTERPRETER_PROPERTIES"][1].split(";")[5], fresh[
        "_Python_INTERPRETER_PROPERTIES"
    ]
