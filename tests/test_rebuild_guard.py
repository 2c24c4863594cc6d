"""The rebuild check before each per-Python pass (``megabuild.pipeline.rebuild_guard``) and the
settings every per-Python pass hands to CMake.

The check is run on the fixture built by the real scikit-build-core for Python A, with Python B's
host env at the same prefix and the recipe's cache swap and adoption, as the pytorch step does:

* with the six dir every pass shares (the recipe), it finds only torch_python's and ``_C``'s
  edges;
* with a six dir per Python (the mistake: each pass's site-packages), it names NNPACK's PeachPy
  codegen ("command line changed") and the relink of libtorch_cpu, with Ninja's reasons;
* it warns and never fails: a tree it cannot read is one warning line.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree as Tree
from feedstock.paths import RECIPE
from megabuild.ninja_tool import edge_target
from megabuild.pipeline import forwarded_env, options, rebuild_guard
from megabuild.pipeline.description import PIPELINE, Action, Phase
from megabuild.pipeline.steps import RealBuild
from support.build_sh import source_build_sh

CODEGEN = "confu-deps/NNPACK/src/x86_64-fma/2d-fourier-8x8.py.c"  # the fixture's first PeachPy edge
Flow = tuple[Tree, CPython, CPython, Path, Path]  # tree, A, B, A's build kept, the shared six dir


def _six_module() -> Path:
    spec = importlib.util.find_spec("six")
    if spec is None or spec.origin is None:
        pytest.skip("six is needed (tests/requirements.txt)")
    return Path(spec.origin)


def _six_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    shutil.copy2(_six_module(), path / "six.py")
    return path


@pytest.fixture(scope="module")
def flow(
    tmp_path_factory: pytest.TempPathFactory, two_cpythons: list[CPython], pip_wheel_cache: Path
) -> Iterator[Flow]:
    """The fixture built for A with the shared six dir; B's host env at the same prefix."""
    if shutil.which("cmake") is None or shutil.which("ninja") is None:
        pytest.skip("cmake and ninja are needed")
    a, b = two_cpythons[0], two_cpythons[-1]
    work = tmp_path_factory.mktemp("guard")
    tree = Tree.create(work, CONDA_FORGE_SKBUILD, pip_wheel_cache)
    six = _six_dir(work / "src-work" / "python-six")  # $SRC_DIR/_megabuild/python-six in the recipe
    tree.host_env(a)
    tree.pip_install(f"-Ccmake.define.PYTHON_SIX_SOURCE_DIR={six}")
    tree.megabuild("cache", "save", "build/CMakeCache.txt")
    kept = work / "kept"
    tree.keep(kept)
    tree.host_env(b)
    yield tree, a, b, kept, six


def _prepared(flow: Flow) -> Tree:
    """B's pass up to its build: the pristine tree, the cache swapped to B, the tree adopted."""
    tree, a, b, kept, _six = flow
    tree.reset(kept)
    tree.megabuild("cache", "restore", "build/CMakeCache.txt", "--swap-python-from", a.short, "--to", b.short)
    tree.megabuild("build", "adopt")
    return tree


@pytest.mark.slow
def test_shared_six_dir_rebuilds_only_python_targets(flow: Flow, capsys: pytest.CaptureFixture[str]) -> None:
    tree = _prepared(flow)
    defines = {"PYTHON_SIX_SOURCE_DIR": str(flow[4])}
    edges = rebuild_guard.plan(tree.src, tree.build, defines, tree.env())
    print("\n" + "\n".join(f"{e.output}: {e.reason}" for e in edges))
    assert edges and all(e.expected for e in edges), edges
    assert {edge_target(e.output) for e in edges} == {"torch_python", "_C"}
    assert rebuild_guard.guard(tree.src, tree.build, defines, tree.env()) == 0
    assert "megabuild: warning" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_six_dir_per_python_is_named_with_ninjas_reason(
    flow: Flow, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mistake: each pass hands its own site-packages as the six dir."""
    tree = _prepared(flow)
    planted = {"PYTHON_SIX_SOURCE_DIR": str(_six_dir(tmp_path / "python3.X-site-packages"))}
    count = rebuild_guard.guard(tree.src, tree.build, planted, tree.env())
    out = capsys.readouterr().out
    print(out)
    lines = out.splitlines()
    assert count is not None and count >= 4, out
    assert any(line.startswith("megabuild: warning: this pass rebuilds") for line in lines), out
    assert f"  {CODEGEN}: command line changed for {CODEGEN}" in lines, out
    assert "  confu-deps/NNPACK/libnnpack.a: " in out
    (torch_cpu,) = [line for line in lines if line.startswith("  lib/libtorch_cpu.so: ")]
    assert torch_cpu.endswith("libnnpack.a is dirty"), torch_cpu
    # the Python-dependent edges are not listed
    assert "torch_python.dir" not in out and "_C.cpython" not in out


def test_a_tree_the_check_cannot_read_is_one_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    assert rebuild_guard.guard(tmp_path, tmp_path / "build", {}, env) is None  # no pyproject.toml
    shutil.copy2(Path(__file__).parent / "fixture" / "minitorch" / "pyproject.toml", tmp_path)
    assert rebuild_guard.guard(tmp_path, tmp_path / "build", {}, env) is None  # no CMakeCache.txt
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and all(line.startswith(rebuild_guard.SKIPPED) for line in lines), lines
    assert "pyproject.toml is missing" in lines[0] and "cannot read" in lines[1], lines


def test_python_targets_and_cmakes_rerun_are_expected() -> None:
    expected = [
        "CMakeFiles/torch_python.dir/torch/csrc/Module.cpp.o", "lib/libtorch_python.so",
        "lib/_C.cpython-313-x86_64-linux-gnu.so", "functorch/CMakeFiles/functorch.dir/csrc/dim.cpp.o",
        "lib/libnnapi_backend.so", "build.ninja",
    ]  # fmt: skip
    unexpected = ["lib/libtorch_cpu.so", CODEGEN, "confu-deps/NNPACK/libnnpack.a", "bin/torch_shm_manager"]
    assert all(rebuild_guard.Edge(o, "").expected for o in expected)
    assert not any(rebuild_guard.Edge(o, "").expected for o in unexpected)


# -- what every per-Python pass hands to CMake ------------------------------------------------------


def _conda_env(tmp_path: Path, python: str) -> dict[str, str]:
    """conda-build's environment for one pytorch output: the prefix is the same for every Python."""
    return {
        "PKG_NAME": "pytorch", "SRC_DIR": str(tmp_path / "work"), "RECIPE_DIR": str(RECIPE),
        "PREFIX": str(tmp_path / "prefix"), "PY_VER": python, "python": f"{python}.* *_cpython",
        "SP_DIR": str(tmp_path / "prefix" / "lib" / f"python{python}" / "site-packages"),
        "target_platform": "linux-64", "cuda_compiler_version": "None",
    }  # fmt: skip


def test_two_python_passes_hand_the_same_settings_and_environment(tmp_path: Path) -> None:
    """``-C`` settings: equal (the six dir is the top level's copy); the forwarded environment of
    build.sh: equal. Python's own values reach CMake only through the cache swap's hints."""
    src = tmp_path / "work"
    shutil.copytree(Path(__file__).parent / "fixture" / "minitorch", src)
    top = options.from_environment(_conda_env(tmp_path, "3.12") | {"PKG_NAME": "libtorch-split"})
    _six_dir(top.sp_dir)
    (step,) = [s for s in PIPELINE.all_steps(Phase.TOP_LEVEL) if s.action is Action.PIP_INSTALL]
    top_settings = RealBuild(top, {}, Phase.TOP_LEVEL).config_settings(step)
    (step,) = [s for s in PIPELINE.all_steps(Phase.PYTORCH) if s.action is Action.PIP_INSTALL]
    settings = {}
    for python in ("3.12", "3.13"):
        opts = options.from_environment(_conda_env(tmp_path, python))
        settings[python] = RealBuild(opts, {}, Phase.PYTORCH).config_settings(step)
    assert settings["3.12"] == settings["3.13"], settings
    assert top_settings[0] == settings["3.12"][0] == f"-Ccmake.define.PYTHON_SIX_SOURCE_DIR={top.six_dir}"
    assert (top.six_dir / "six.py").read_bytes() == _six_module().read_bytes()
    assert not any("site-packages" in s or "3.12" in s or "3.13" in s for s in settings["3.13"])

    exported = {}
    for python in ("3.12", "3.13"):
        # build.sh sourced in its own dir per call: its prefix and work dir are written as <tmp>,
        # as conda-build's are the same path for every output
        sp_dir = tmp_path / python / f"prefix/lib/python{python}/site-packages"
        env, _ = source_build_sh(tmp_path / python, PY_VER=python, SP_DIR=str(sp_dir))
        where = str(tmp_path / python)
        exported[python] = {k: v.replace(where, "<tmp>") for k, v in forwarded_env.forwarded(env).items()}
    assert exported["3.12"] == exported["3.13"]
    assert exported["3.12"]["USE_NNPACK"] == "1"  # the recipe builds NNPACK (x86_64: PeachPy codegen)
