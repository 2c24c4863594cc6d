"""osx-64 cross-compiled on osx-arm64: cross-python, FindPython, scikit-build-core and the swap.

conda-forge.yml builds osx-64 on osx-arm64 (``build_platform``), so every Python's step of the
osx-64 megabuild runs with that Python's ``cross-python_osx-64``: the same activation as for
linux-aarch64 (conda-forge/cross-python-feedstock, recipe/activate-cross-python.sh: crossenv with
``--machine x86_64`` and the host's ``$_CONDA_PYTHON_SYSCONFIGDATA_NAME``,
``_sysconfigdata_x86_64_apple_darwin13_4_0``). tests/test_cache_swap_cross.py builds that
situation offline for real; here the same machinery (``make_cross_python``) gets an osx-64 host
env: conda-forge's macOS python layout (python-feedstock recipe/build_base.sh: built with
``_PYTHON_HOST_PLATFORM=darwin-x86_64``, recorded in the Makefile that crossenv reads, together
with ``MACOSX_DEPLOYMENT_TARGET``; ``lib/libpython3.X.dylib``; SOABI ``cpython-3XY-darwin``), its
modules unloadable here, as a real x86_64 Mach-O host env is for crossenv's build interpreter.

What runs for real: crossenv (so ``_PYTHON_SYSCONFIGDATA_NAME``, ``_PYTHON_HOST_PLATFORM`` and the
target's sysconfig come from it), scikit-build-core's own functions under cross-python, CMake's
FindPython in a project configured for Darwin (``CMAKE_SYSTEM_NAME=Darwin``,
``CMAKE_OSX_ARCHITECTURES=x86_64``, as a cross configure on an arm64 Mac is), ``python -m megabuild
cache swap-python`` run by cross-python as build.sh runs it, and CMake's re-configure from the
swapped cache, compared with a fresh configure of the next Python. The build machine's protoc
(``CAFFE2_CUSTOM_PROTOC_EXECUTABLE=$BUILD_PREFIX/bin/protoc``) is checked where build.sh runs for
an osx-64 cross config: tests/test_build_env.py::test_cmake_args_from_the_real_activation.
What this machine cannot show: Apple clang and the SDK, and whether a real arm64 Mac runs x86_64
binaries (Rosetta) where CMake would otherwise not run them.
"""

from __future__ import annotations

import importlib.util
import json
import pprint
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cpythons import CPython, make_conda_like_prefix
from feedstock.paths import RECIPE
from megabuild.cache.python_swap import is_python_key, query_interpreter
from support.cmake_file_api import CacheEntries, differences, read_cache, request_cache
from test_cache_swap_cross import (
    PROBE,
    RERUN_ONLY,
    SKBUILD_VALUES,
    UNLOADABLE,
    CrossTarget,
    _build_env,
    _cmake_configure,
    _copy_package,
    _nodot,
    load_sysconfigdata,
    make_cross_python,
    reconfigure,
    swapped_like_fresh,
)

TRIPLET = "x86_64-apple-darwin13.4.0"  # macos_machine of the osx-64 configs
SYSCONFIGDATA = "_sysconfigdata_x86_64_apple_darwin13_4_0"  # conda's name (HOST with _ for . and -)
DEPLOYMENT_TARGET = "11.0"  # MACOSX_DEPLOYMENT_TARGET of .ci_support/osx_64_*.yaml
HOST_PLATFORM = f"macosx-{DEPLOYMENT_TARGET}-x86_64"
# conda's CMAKE_ARGS of an osx-64 build on osx-arm64 name the target system and architecture
DARWIN_ARGS = (
    "-DCMAKE_SYSTEM_NAME=Darwin",
    "-DCMAKE_SYSTEM_PROCESSOR=x86_64",
    "-DCMAKE_SYSTEM_VERSION=13.4.0",  # as harness/activation.py's osx-64 cross CMAKE_ARGS
    "-DCMAKE_OSX_ARCHITECTURES=x86_64",  # scikit-build-core's, from CMAKE_SYSTEM_PROCESSOR
)
PROJECT = """cmake_minimum_required(VERSION 3.18)
project(osx_cross_probe LANGUAGES NONE)
find_package(Python COMPONENTS Interpreter Development.Module NumPy REQUIRED)
message(STATUS "probe: APPLE=[${APPLE}] CROSS=[${CMAKE_CROSSCOMPILING}] SOABI=[${Python_SOABI}]")
message(STATUS "probe: LIBRARIES=[${Python_LIBRARIES}] INCLUDE=[${Python_INCLUDE_DIRS}]")
"""


def _darwin_values(values: dict[str, object], py: CPython, prefix: Path) -> dict[str, object]:
    """conda-forge's osx-64 sysconfig values of ``py`` (the rest relocated from the build's)."""
    linux_soabi = str(values["SOABI"])
    soabi = f"cpython-{_nodot(py)}-darwin"
    old_prefix = str(values["prefix"])
    out = {
        key: value.replace(old_prefix, str(prefix)).replace(linux_soabi, soabi)
        if isinstance(value, str)
        else value
        for key, value in values.items()
    }
    out.update(
        SOABI=soabi,
        EXT_SUFFIX=f".{soabi}.so",
        MULTIARCH="darwin",
        MACHDEP="darwin",
        HOST_GNU_TYPE=TRIPLET,
        MACOSX_DEPLOYMENT_TARGET=DEPLOYMENT_TARGET,
        LDLIBRARY=f"libpython{py.short}.dylib",
        CC=f"{TRIPLET}-clang",
        CXX=f"{TRIPLET}-clang++",
        AR=f"{TRIPLET}-ar",
        LDSHARED=f"{TRIPLET}-clang -bundle -undefined dynamic_lookup",
    )
    return out


def fake_osx64_host(py: CPython, prefix: Path, cache_dir: Path) -> Path:
    """A conda-like env of ``py`` whose target-specific parts say (and are) osx-64; its sysconfigdata."""
    make_conda_like_prefix(py, prefix, cache_dir=cache_dir)
    lib = prefix / "lib" / f"python{py.short}"
    module = load_sysconfigdata(lib)
    linux_soabi = module.build_time_vars["SOABI"]
    values = _darwin_values(module.build_time_vars, py, prefix)
    for stale in lib.glob("_sysconfigdata*"):
        stale.unlink()
    sysconfigdata = lib / f"{SYSCONFIGDATA}.py"
    sysconfigdata.write_text(f"build_time_vars = {pprint.pformat(values)}\n")
    for config in lib.glob("config-*"):
        makefile = (config / "Makefile").read_text()
        config.unlink()
        target = lib / f"config-{py.short}-darwin"
        target.mkdir()
        # crossenv takes the first line of each: the python feedstock's build records these
        recorded = f"_PYTHON_HOST_PLATFORM=darwin-x86_64\nMACOSX_DEPLOYMENT_TARGET={DEPLOYMENT_TARGET}\n"
        (target / "Makefile").write_text(recorded + makefile)
    dynload = lib / "lib-dynload"
    modules = sorted(p.name for p in dynload.iterdir() if p.suffix == ".so")
    dynload.unlink()
    dynload.mkdir()
    for name in modules:
        (dynload / name.replace(linux_soabi, values["SOABI"])).write_bytes(UNLOADABLE)
    for so in list((lib / "site-packages").rglob("*.so")):
        so.unlink()
        so.with_name(so.name.replace(linux_soabi, str(values["SOABI"]))).write_bytes(UNLOADABLE)
    for libpython in (prefix / "lib").glob("libpython*"):
        libpython.unlink()
    (prefix / "lib" / f"libpython{py.short}.dylib").write_bytes(UNLOADABLE)
    return sysconfigdata


OSX64 = CrossTarget(TRIPLET, "x86_64", ("clang", "clang++"), fake_osx64_host)


def _configure(build: Path, prefix: Path, py: CPython, activation: dict[str, str]) -> str:
    source = build.parent.parent / "src"  # one source tree, as the megabuild has
    source.mkdir(exist_ok=True)
    (source / "CMakeLists.txt").write_text(PROJECT)
    request_cache(build)
    proc = _cmake_configure(
        source,
        build,
        activation,
        *DARWIN_ARGS,
        # what scikit-build-core's initial cache gives (crossenv's answers)
        f"-DPython_EXECUTABLE={prefix}/bin/python",
        f"-DPython_INCLUDE_DIR={prefix}/include/python{py.short}",
        f"-DCMAKE_PREFIX_PATH={prefix}/lib/python{py.short}/site-packages;{prefix}",
    )
    assert proc.returncode == 0, f"Darwin configure under cross-python failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@dataclass
class OsxCross:
    a: CPython
    b: CPython
    build_prefix: Path
    prefix: Path
    activation: dict[str, str]
    configure_out: str  # CMake's output of the fresh configure for B
    swapped: str
    fresh: str
    swap_proc: subprocess.CompletedProcess[str]
    reconfigured: CacheEntries
    fresh_entries: CacheEntries
    fresh_rerun: CacheEntries  # the fresh tree after a plain second configure


@pytest.fixture(scope="module")
def osx_cross(
    tmp_path_factory: pytest.TempPathFactory, cpythons: list[CPython], pip_wheel_cache: Path
) -> OsxCross:
    if importlib.util.find_spec("crossenv") is None:
        pytest.skip("crossenv is not installed (tests/requirements.txt)")
    pairs = [(a, b) for a, b in zip(cpythons, cpythons[1:]) if b.version[:2] <= (3, 13)]
    if not pairs:
        pytest.skip(f"needs two consecutive CPythons between 3.10 and 3.13, found {len(cpythons)}")
    a, b = pairs[-1]
    root = tmp_path_factory.mktemp("osx-cross")
    build_prefix, prefix = root / "build_env", root / "host_env"
    swap_build, fresh_build = root / "swap" / "build", root / "fresh" / "build"
    for build in (swap_build, fresh_build):
        build.parent.mkdir()

    _configure(swap_build, prefix, a, make_cross_python(a, build_prefix, prefix, pip_wheel_cache, OSX64))
    activation = make_cross_python(b, build_prefix, prefix, pip_wheel_cache, OSX64)
    out = _configure(fresh_build, prefix, b, activation)
    cache = swap_build / "CMakeCache.txt"
    swap_args = ["--from", a.short, "--to", b.short, str(cache)]
    swap_proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "megabuild", "cache", "swap-python", *swap_args],
        capture_output=True,
        text=True,
        env=dict(_build_env(activation), PYTHONPATH=str(RECIPE)),
        timeout=300,
    )
    swapped = cache.read_text().replace(str(swap_build.parent), "<ROOT>")
    reconfigured = reconfigure(swap_build, activation, "after the swap") if swap_proc.returncode == 0 else {}
    fresh = (fresh_build / "CMakeCache.txt").read_text().replace(str(fresh_build.parent), "<ROOT>")
    fresh_entries = read_cache(fresh_build, build_placeholder="<BUILD>")
    # a plain re-configure of the fresh tree: what CMake adds on any second run (see below)
    fresh_rerun = reconfigure(fresh_build, activation, "of the fresh tree")
    return OsxCross(
        a,
        b,
        build_prefix,
        prefix,
        activation,
        out,
        swapped,
        fresh,
        swap_proc,
        reconfigured,
        fresh_entries,
        fresh_rerun,
    )


def _run(cross: OsxCross, code: str, **env: str) -> dict[str, object]:
    out = subprocess.run(
        [str(cross.prefix / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        env=dict(_build_env(cross.activation), **env),
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.slow
def test_cross_python_answers_for_osx64(osx_cross: OsxCross) -> None:
    """What FindPython and scikit-build-core ask cross-python: the target's sysconfig."""
    b = osx_cross.b
    info = _run(osx_cross, PROBE)
    assert info["soabi"] == f"cpython-{_nodot(b)}-darwin"
    assert info["platform"] == HOST_PLATFORM
    assert info["include"] == f"{osx_cross.prefix}/include/python{b.short}"
    assert (
        info["numpy"]
        == f"{osx_cross.build_prefix}/venv/lib/python{b.short}/site-packages/numpy/_core/include"
    )
    # crossenv's wrapper starts the build machine's interpreter with these (its site.py then
    # restores the caller's values, so the process itself does not see them in os.environ)
    wrapper = (osx_cross.build_prefix / "venv" / "bin" / "cross-python").read_text()
    assert f"os.environ['_PYTHON_SYSCONFIGDATA_NAME']='{SYSCONFIGDATA}'" in wrapper
    assert "os.environ['_PYTHON_HOST_PLATFORM']='darwin-x86_64'" in wrapper
    interp = query_interpreter(str(osx_cross.prefix / "bin" / "python"))
    assert interp.soabi == f"cpython-{_nodot(b)}-darwin" and interp.version.short == b.short


WHEEL_VALUES = (
    "import json, os\n"
    "from scikit_build_core.builder.builder import get_archs\n"
    "from scikit_build_core.builder.wheel_tag import WheelTag\n"
    "tag = WheelTag.compute_best(get_archs(os.environ))\n"
    "print(json.dumps({'tag': str(tag), 'archs': get_archs(os.environ)}))\n"
)


@pytest.mark.slow
def test_scikit_build_core_under_cross_python(osx_cross: OsxCross) -> None:
    """SKBUILD_SOABI and the wheel tag scikit-build-core computes for the osx-64 target."""
    if importlib.util.find_spec("scikit_build_core") is None:
        pytest.skip("scikit-build-core is not installed (PyTorch 2.14's build backend)")
    build_sp = osx_cross.build_prefix / "lib" / f"python{osx_cross.b.short}" / "site-packages"
    for name in ("scikit_build_core", "packaging", "pathspec"):
        if importlib.util.find_spec(name) is not None:
            _copy_package(name, build_sp)
    values = _run(osx_cross, SKBUILD_VALUES)
    soabi = f"cpython-{_nodot(osx_cross.b)}-darwin"
    assert values["SKBUILD_SOABI"] == soabi and values["EXT_SUFFIX"] == f".{soabi}.so", values
    assert values["Python_INCLUDE_DIR"] == f"{osx_cross.prefix}/include/python{osx_cross.b.short}", values
    wheel = _run(osx_cross, WHEEL_VALUES, ARCHFLAGS="-arch x86_64")
    # the platform tag comes from crossenv's _PYTHON_HOST_PLATFORM; ARCHFLAGS is read only when
    # sys.platform is darwin (on the Mac: CMAKE_OSX_ARCHITECTURES=x86_64, same in every step)
    nodot = _nodot(osx_cross.b)
    assert wheel["tag"] == f"cp{nodot}-cp{nodot}-{HOST_PLATFORM.replace('-', '_').replace('.', '_')}", wheel


@pytest.mark.slow
def test_findpython_reads_the_darwin_target(osx_cross: OsxCross) -> None:
    """A Darwin cross configure: no library needed (Development.Module), the target's include dir."""
    out = osx_cross.configure_out
    b = osx_cross.b
    assert "probe: APPLE=[1] CROSS=[TRUE]" in out, out
    assert "LIBRARIES=[]" in out, out
    assert f"INCLUDE=[{osx_cross.prefix}/include/python{b.short}]" in out, out
    # cross-compiling without an emulator FindPython leaves Python_SOABI empty: patch 0006
    # takes it from SKBUILD_SOABI (run under crossenv in tests/test_cache_swap_cross.py)
    assert "SOABI=[]" in out, out


@pytest.mark.slow
def test_swap_under_osx64_cross_python_matches_a_fresh_configure(osx_cross: OsxCross) -> None:
    swapped = swapped_like_fresh(osx_cross.swap_proc, osx_cross.swapped, osx_cross.fresh)
    b = osx_cross.b
    properties = swapped["_Python_INTERPRETER_PROPERTIES"][1].split(";")
    assert properties[1:4] == [str(v) for v in b.version]
    # FindPython records no SOABI when cross-compiling without an emulator; the swap keeps it so
    assert properties[6] == ""
    assert swapped["CMAKE_OSX_ARCHITECTURES"][1] == "x86_64"
    build_machine = [k for k, (_, v) in swapped.items() if is_python_key(k) and "linux" in v]
    assert not build_machine, {k: swapped[k] for k in build_machine}


@pytest.mark.slow
def test_cmake_reconfigure_after_the_osx64_swap_reproduces_the_fresh_cache(osx_cross: OsxCross) -> None:
    """Re-configured after the swap, the tree's cache is the fresh tree's after its own second run.

    On a second configure of a cross tree FindPython (Development.Module, no library on Darwin)
    also looks for a python-config on PATH and records it (``_Python_CONFIG``), swapped or not:
    what a second run adds is the same for both trees.
    """
    assert osx_cross.swap_proc.returncode == 0, osx_cross.swap_proc.stderr
    assert differences(osx_cross.reconfigured, osx_cross.fresh_rerun) == {}
    rerun_only = set(differences(osx_cross.fresh_rerun, osx_cross.fresh_entries))
    assert rerun_only <= {"_Python_CONFIG", *RERUN_ONLY}, rerun_only
