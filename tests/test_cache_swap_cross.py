"""swap-python under conda-forge's cross-python (linux-aarch64 built on linux-64).

In a cross build, conda-forge's ``cross-python_linux-aarch64`` activation
(recipe/activate-cross-python.sh in conda-forge/cross-python-feedstock) runs
crossenv to make ``$BUILD_PREFIX/venv``, then replaces ``$PREFIX/bin/python``
by a shim that execs ``$BUILD_PREFIX/venv/bin/cross-python``: crossenv's
wrapper script, which sets PYTHONHOME/PYTHONPATH/_PYTHON_SYSCONFIGDATA_NAME
and execs the build machine's interpreter. The test builds that situation for
real, offline:

* BUILD_PREFIX: a conda-like env of a pyenv CPython with numpy (a build
  requirement of cross builds) and the installed ``crossenv`` package copied in,
  as conda installs it; stub ``aarch64-conda-linux-gnu-gcc/g++`` for crossenv's
  compiler check.
* PREFIX: the same CPython dressed up as an aarch64 one: its
  ``_sysconfigdata`` rewritten to conda's aarch64 name and values, and its
  lib-dynload and numpy extension modules replaced by aarch64-named files this
  machine cannot load (as a real aarch64 host env is).
* ``python -m crossenv`` itself, then every step of the activation script after
  it (wrapper copy and its three sed edits, the shims, the site-packages sync
  without ``*.so``, the sitecustomize link, ``PYTHONPATH``). The shims are shell
  scripts instead of the feedstock's C program: both exec the wrapper with the
  same arguments.

CMake then configures ``tests/projects/pycache_probe`` against
``$PREFIX/bin/python`` with Python A, both envs are recreated at the same paths
for Python B (conda-build does that per output), the cache is swapped by
``$PREFIX/bin/python -m megabuild`` as build.sh runs it, and compared with a
fresh configure for B; then CMake re-configures from the swapped cache, and its cache, as the
CMake File API reports it (tests/support/cmake_file_api.py), must equal the fresh one.

In the same envs, ``test_patch_0006_names_the_module_for_the_target`` checks recipe patch 0006
for real: scikit-build-core's own functions, run by cross-python, give the initial-cache values
a pip build of PyTorch 2.14 gets (Python_EXECUTABLE, Python_INCLUDE_DIR, SKBUILD_SOABI); a
project configured as a cross build (CMAKE_SYSTEM_NAME/PROCESSOR, as conda's CMAKE_ARGS carry
them) with them finds Python but gets no Python_SOABI from FindPython, so
``Python_add_library(_C MODULE WITH_SOABI)`` names the module ``_C.so``; with the lines patch
0006 adds to cmake/Dependencies.cmake it is ``_C`` + the target's EXT_SUFFIX.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pprint
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
from feedstock import patch_check
from feedstock.conda_build_standin.cpythons import CPython, make_conda_like_prefix
from feedstock.paths import RECIPE
from megabuild.cache.model import CacheFile
from megabuild.cache.python_swap import is_python_key, query_environment, query_interpreter
from support.cmake_file_api import CacheEntries, differences, read_cache, request_cache

PROJECT = Path(__file__).resolve().parent / "projects" / "pycache_probe"
PATCH_0006 = next((RECIPE / "patches").glob("0006-*SOABI*.patch"), None)
TRIPLET = "aarch64-conda-linux-gnu"
SYSCONFIGDATA = "_sysconfigdata_aarch64_conda_linux_gnu"  # conda-forge's name on linux-aarch64
UNLOADABLE = b"\x7fELF built for aarch64, not loadable here\n"
# MD5s CMake recomputes on its next run (see test_cache_cmake.py).
CMAKE_REWRITES = frozenset(
    {"_Python_DEVELOPMENT_MODULE_SIGNATURE", "_Python_DEVELOPMENT_EMBED_SIGNATURE", "_Python_NUMPY_SIGNATURE"}
)
# Left by FindPython's validation of a cached interpreter on a re-configure (see test_cache_cmake.py).
RERUN_ONLY = {"_Python_Interpreter_REASON_FAILURE": ("INTERNAL", "")}
PROBE = (
    "import json, sys, sysconfig\n"
    "info = {'soabi': sysconfig.get_config_var('SOABI'), 'platform': sysconfig.get_platform(),\n"
    "        'include': sysconfig.get_path('include')}\n"
    "try:\n"
    "    import numpy\n"
    "    info['numpy'] = numpy.get_include()\n"
    "except ImportError as exc:\n"
    "    info['numpy'] = None\n"
    "print(json.dumps(info))\n"
)


def _nodot(py: CPython) -> str:
    return f"{py.version[0]}{py.version[1]}"


def load_sysconfigdata(lib: Path) -> ModuleType:
    """The module of the build's ``_sysconfigdata_*.py`` in a Python's ``lib/python3.X``."""
    (original,) = lib.glob("_sysconfigdata_*.py")
    spec = importlib.util.spec_from_file_location("_build_sysconfigdata", original)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_aarch64_host(py: CPython, prefix: Path, cache_dir: Path) -> Path:
    """A conda-like env of ``py`` whose target-specific parts say (and are) aarch64; its sysconfigdata."""
    make_conda_like_prefix(py, prefix, cache_dir=cache_dir)
    lib = prefix / "lib" / f"python{py.short}"
    # Stdlib entries are symlinks into the pyenv install: replace them, never write through them.
    module = load_sysconfigdata(lib)
    old_prefix = module.build_time_vars["prefix"]
    values = {}
    for key, value in module.build_time_vars.items():
        if isinstance(value, str):  # conda relocates the prefix
            value = value.replace(old_prefix, str(prefix)).replace("x86_64", "aarch64")
        values[key] = value
    values.update(
        HOST_GNU_TYPE=TRIPLET,
        CC=f"{TRIPLET}-gcc -pthread",
        CXX=f"{TRIPLET}-g++ -pthread",
        AR=f"{TRIPLET}-ar",
    )
    for stale in lib.glob("_sysconfigdata*"):
        stale.unlink()
    sysconfigdata = lib / f"{SYSCONFIGDATA}.py"
    sysconfigdata.write_text(f"build_time_vars = {pprint.pformat(values)}\n")
    for config in lib.glob("config-*"):
        makefile = (config / "Makefile").read_text()
        config.unlink()
        target = lib / config.name.replace("x86_64", "aarch64")
        target.mkdir()
        (target / "Makefile").write_text(makefile.replace("x86_64", "aarch64"))
    dynload = lib / "lib-dynload"
    modules = sorted(p.name for p in dynload.iterdir() if p.suffix == ".so")
    dynload.unlink()
    dynload.mkdir()
    for name in modules:
        (dynload / name.replace("x86_64", "aarch64")).write_bytes(UNLOADABLE)
    for so in list((lib / "site-packages").rglob("*.so")):
        so.unlink()
        so.with_name(so.name.replace("x86_64", "aarch64")).write_bytes(UNLOADABLE)
    return sysconfigdata


def _shim(path: Path, target: Path) -> None:
    if path.exists() or path.is_symlink():
        path.unlink()
    path.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
    path.chmod(0o755)


@dataclass(frozen=True)
class CrossTarget:
    """What cross-python's activation needs to know about the target platform."""

    triplet: str  # conda's compiler prefix
    machine: str  # crossenv --machine (the activation: x86_64 for *-64, else the arch)
    compilers: tuple[str, str]  # C and C++ compiler names after the triplet
    fake_host: Callable[[CPython, Path, Path], Path]  # makes the host env; its sysconfigdata


AARCH64 = CrossTarget(TRIPLET, "aarch64", ("gcc", "g++"), lambda py, p, c: _fake_aarch64_host(py, p, c))


def make_cross_python(
    py: CPython, build_prefix: Path, prefix: Path, cache_dir: Path, target: CrossTarget = AARCH64
) -> dict[str, str]:
    """Host and build envs for ``py`` plus cross-python's activation; the variables it exports."""
    sysconfigdata = target.fake_host(py, prefix, cache_dir)
    make_conda_like_prefix(py, build_prefix, cache_dir=cache_dir)
    short = py.short
    build_sp = build_prefix / "lib" / f"python{short}" / "site-packages"
    crossenv_spec = importlib.util.find_spec("crossenv")
    assert crossenv_spec is not None and crossenv_spec.submodule_search_locations
    shutil.copytree(crossenv_spec.submodule_search_locations[0], build_sp / "crossenv")
    compilers = []
    for tool in target.compilers:
        stub = build_prefix / "bin" / f"{target.triplet}-{tool}"
        # crossenv runs --version, -print-sysroot (no sysroot: fail) and -dumpmachine.
        answers = f"--version) echo stub;; -dumpmachine) echo {target.triplet};; *) exit 1;;"
        stub.write_text(f'#!/bin/sh\ncase "$1" in {answers} esac\n')
        stub.chmod(0o755)
        compilers.append(str(stub))

    venv = build_prefix / "venv"
    # The activation's command line (minus --sysroot: conda's sysroot is not here).
    crossenv_args = ["--without-pip", str(venv), "--sysconfigdata-file", str(sysconfigdata)]
    crossenv_args += ["--machine", target.machine, "--cc", compilers[0], "--cxx", compilers[1]]
    subprocess.run(
        [
            str(build_prefix / "bin" / "python"),
            "-m",
            "crossenv",
            str(prefix / "bin" / "python"),
            *crossenv_args,
        ],
        check=True,
        capture_output=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTHON")},
    )
    # From here on: activate-cross-python.sh, step by step.
    (venv / "lib" / sysconfigdata.name).unlink(missing_ok=True)
    shutil.copy2(sysconfigdata, venv / "lib" / sysconfigdata.name)
    wrapper = venv / "bin" / "cross-python"
    shutil.copy2(venv / "cross" / "bin" / "python", wrapper)
    text = re.sub(r"extra_envs = .*", "extra_envs = []", wrapper.read_text())
    text = text.replace("import sys", f"import sys\nsys.argv[0] = '{prefix}/bin/python'")
    # "Load BUILD_PREFIX's packages first": two more entries in the wrapper's PYTHONPATH list.
    extra = f"{build_prefix}/lib/python{short}/lib-dynload', '{venv}/lib/python{short}/site-packages"
    text = text.replace(f"{venv}/lib", f"{venv}/lib', '{extra}")
    wrapper.write_text(text)
    _shim(Path(os.path.realpath(prefix / "bin" / "python")), wrapper)
    (venv / "build" / "bin" / "python").unlink()
    (venv / "build" / "bin" / "python").symlink_to(build_prefix / "bin" / f"python{short}")
    _shim(build_prefix / "bin" / "python", wrapper)
    shutil.rmtree(venv / "cross")
    host_sp = prefix / "lib" / f"python{short}" / "site-packages"
    for path in host_sp.rglob("*"):  # rsync -a --exclude="*.so" -I
        if path.is_file() and path.suffix != ".so":
            dest = build_sp / path.relative_to(host_sp)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
    venv_sp = venv / "lib" / f"python{short}" / "site-packages"
    shutil.rmtree(venv_sp)
    venv_sp.symlink_to(build_sp)
    if py.version[:2] >= (3, 11):
        (venv / "lib" / "sitecustomize.py").symlink_to(venv / "lib" / "site.py")
    return {"PYTHONPATH": str(venv_sp)}


@dataclass
class Cross:
    a: CPython
    b: CPython
    build_prefix: Path
    prefix: Path
    activation: dict[str, str]  # of B's envs, which are in place after the fixture
    swapped: str
    fresh: str
    swap_proc: subprocess.CompletedProcess[str]
    reconfigured: CacheEntries  # CMake's cache after re-configuring from the swapped one
    fresh_entries: CacheEntries


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} not found")
    return path


def _build_env(activation: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.pop("_CONDA_PYTHON_SYSCONFIGDATA_NAME", None)  # the activation unsets it
    env.update(activation)
    return env


def _cmake_configure(
    source: Path, build: Path, activation: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    """``cmake -G Ninja -S source -B build args...`` in the build env of cross-python's activation."""
    generator = ("-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={_tool('ninja')}")
    return subprocess.run(
        [_tool("cmake"), *generator, "-S", str(source), "-B", str(build), *args],
        capture_output=True,
        text=True,
        env=_build_env(activation),
        timeout=600,
    )


def _configure(build: Path, prefix: Path, py: CPython, activation: dict[str, str]) -> str:
    request_cache(build)
    proc = _cmake_configure(
        PROJECT,
        build,
        activation,
        "-DCMAKE_BUILD_TYPE=Release",
        # What PyTorch's build passes (2.13: setup.py; 2.14: scikit-build-core's initial cache):
        # sys.executable and site-packages, both crossenv's answers.
        f"-DPython_EXECUTABLE={prefix}/bin/python",
        f"-DCMAKE_PREFIX_PATH={prefix}/lib/python{py.short}/site-packages;{prefix}",
    )
    assert proc.returncode == 0, f"configure under cross-python failed:\n{proc.stdout}\n{proc.stderr}"
    return (build / "CMakeCache.txt").read_text()


@pytest.fixture(scope="module")
def cross(tmp_path_factory: pytest.TempPathFactory, cpythons: list[CPython], pip_wheel_cache: Path) -> Cross:
    if importlib.util.find_spec("crossenv") is None:
        pytest.skip("crossenv is not installed (tests/requirements.txt)")
    # conda-forge's crossenv 1.5.0 needs its feedstock's patches for 3.14; stay at or below 3.13.
    pairs = [(a, b) for a, b in zip(cpythons, cpythons[1:]) if b.version[:2] <= (3, 13)]
    if not pairs:
        pytest.skip(f"needs two consecutive CPythons between 3.10 and 3.13, found {len(cpythons)}")
    a, b = pairs[-1]
    root = tmp_path_factory.mktemp("cross")
    build_prefix, prefix = root / "build_env", root / "host_env"
    swap_build, fresh_build = root / f"swap-{a.short}-to-{b.short}", root / f"fresh-{b.short}"

    _configure(swap_build, prefix, a, make_cross_python(a, build_prefix, prefix, pip_wheel_cache))
    activation = make_cross_python(b, build_prefix, prefix, pip_wheel_cache)
    fresh = _configure(fresh_build, prefix, b, activation)
    cache = swap_build / "CMakeCache.txt"
    # As build.sh's run_megabuild: the host env's python (here: cross-python), PYTHONPATH=$RECIPE_DIR.
    swap_args = ["swap-python", "--from", a.short, "--to", b.short, str(cache)]
    swap_proc = subprocess.run(
        [str(prefix / "bin" / "python"), "-m", "megabuild", "cache", *swap_args],
        capture_output=True,
        text=True,
        env=dict(_build_env(activation), PYTHONPATH=str(RECIPE)),
        timeout=300,
    )
    swapped = cache.read_text().replace(str(swap_build), "<BUILD>")
    reconfigured = reconfigure(swap_build, activation, "after the swap") if swap_proc.returncode == 0 else {}
    return Cross(
        a,
        b,
        build_prefix,
        prefix,
        activation,
        swapped,
        fresh.replace(str(fresh_build), "<BUILD>"),
        swap_proc,
        reconfigured,
        read_cache(fresh_build, build_placeholder="<BUILD>"),
    )


def _probe(cross: Cross, *flags: str) -> dict[str, str | None]:
    out = subprocess.run(
        [str(cross.prefix / "bin" / "python"), *flags, "-c", PROBE],
        capture_output=True,
        text=True,
        env=_build_env(cross.activation),
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout)


def _values(text: str) -> dict[str, tuple[str, str]]:
    return {k: (e.type, e.value) for k, e in CacheFile.parse(text).as_dict().items()}


def swapped_like_fresh(
    proc: subprocess.CompletedProcess[str], swapped_text: str, fresh_text: str
) -> dict[str, tuple[str, str]]:
    """The swap's cache (shared with the macOS cross test): it ran in interpreter mode and has the
    fresh configure's entries, with only CMake's own rewrites differing."""
    assert proc.returncode == 0, proc.stderr
    assert "(interpreter mode," in proc.stdout
    swapped, fresh = _values(swapped_text), _values(fresh_text)
    assert swapped.keys() == fresh.keys()
    differ = {k: (swapped[k], fresh[k]) for k in fresh if swapped[k] != fresh[k]}
    assert differ.keys() <= CMAKE_REWRITES, differ
    return swapped


@pytest.mark.slow
def test_the_emulation_behaves_like_cross_python(cross: Cross) -> None:
    """Control: crossenv answers for aarch64 and finds numpy in the build env; -I bypasses it."""
    b = cross.b
    info = _probe(cross)
    assert info["soabi"] == f"cpython-{_nodot(b)}-aarch64-linux-gnu"
    assert info["platform"] == "linux-aarch64"
    assert info["include"] == f"{cross.prefix}/include/python{b.short}"
    venv_sp = f"{cross.build_prefix}/venv/lib/python{b.short}/site-packages"
    assert info["numpy"] == f"{venv_sp}/numpy/_core/include"
    # Isolated, the same interpreter loads the host env's aarch64 modules: numpy is gone.
    assert _probe(cross, "-I")["numpy"] is None


@pytest.mark.slow
def test_query_under_cross_python_reports_the_target(cross: Cross) -> None:
    b = cross.b
    interp = query_interpreter(str(cross.prefix / "bin" / "python"))
    assert interp.version.short == b.short
    assert interp.soabi == f"cpython-{_nodot(b)}-aarch64-linux-gnu"
    assert interp.paths["include"] == f"{cross.prefix}/include/python{b.short}"
    assert interp.paths["platlib"] == f"{cross.prefix}/lib/python{b.short}/site-packages"
    assert interp.numpy_include == (
        f"{cross.build_prefix}/venv/lib/python{b.short}/site-packages/numpy/_core/include"
    ), interp.numpy_error


def reconfigure(build: Path, activation: dict[str, str], when: str) -> CacheEntries:
    """A plain second ``cmake <build>`` in the activation's environment, and the cache it leaves."""
    rerun = subprocess.run(
        [_tool("cmake"), str(build)], capture_output=True, text=True, env=_build_env(activation), timeout=600
    )
    assert rerun.returncode == 0, f"re-configure {when} failed:\n{rerun.stdout}\n{rerun.stderr}"
    return read_cache(build, build_placeholder="<BUILD>")


@pytest.mark.slow
def test_swap_under_cross_python_matches_a_fresh_configure(cross: Cross) -> None:
    swapped = swapped_like_fresh(cross.swap_proc, cross.swapped, cross.fresh)
    b = cross.b
    properties = swapped["_Python_INTERPRETER_PROPERTIES"][1].split(";")
    assert properties[1:4] == [str(v) for v in b.version]
    assert properties[6] == f"cpython-{_nodot(b)}-aarch64-linux-gnu"
    numpy_dir = f"{cross.build_prefix}/venv/lib/python{b.short}/site-packages/numpy/_core/include"
    assert swapped["_Python_NumPy_INCLUDE_DIR"][1] == numpy_dir
    assert f"[{numpy_dir}]" in swapped["FIND_PACKAGE_MESSAGE_DETAILS_Python"][1]
    build_machine = [k for k, (_, v) in swapped.items() if is_python_key(k) and "x86_64" in v]
    assert not build_machine, {k: swapped[k] for k in build_machine}


def test_query_environment_drops_only_python_variables() -> None:
    env = {
        "PYTHONPATH": "/recipe",
        "PYTHONHOME": "/elsewhere",
        "PYTHONSTARTUP": "/x.py",
        "PYTHONINSPECT": "1",
        "PYTHON_CROSSENV": "x",
        "_PYTHON_SYSCONFIGDATA_NAME": "_sysconfigdata_aarch64_conda_linux_gnu",
        "_CONDA_PYTHON_SYSCONFIGDATA_NAME": "_sysconfigdata_x86_64_conda_linux_gnu",
        "PATH": "/usr/bin",
        "CMAKE_ARGS": "-DX=1",
    }
    assert query_environment(env) == {
        "_PYTHON_SYSCONFIGDATA_NAME": "_sysconfigdata_aarch64_conda_linux_gnu",
        "_CONDA_PYTHON_SYSCONFIGDATA_NAME": "_sysconfigdata_x86_64_conda_linux_gnu",
        "PATH": "/usr/bin",
        "CMAKE_ARGS": "-DX=1",
    }


def test_query_keeps_pythonpath_pythonhome_and_cwd_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What -I protected against still cannot reach the answer (native interpreter)."""
    poison = tmp_path / "poison"
    (poison / "numpy").mkdir(parents=True)
    (poison / "numpy" / "__init__.py").write_text("def get_include():\n    return '/poisoned'\n")
    for name in ("json", "sysconfig"):
        (poison / f"{name}.py").write_text("raise SystemExit('shadowed stdlib module imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(poison))
    monkeypatch.setenv("PYTHONHOME", str(tmp_path / "no-such-home"))
    monkeypatch.setenv("PYTHONINSPECT", "1")
    monkeypatch.chdir(poison)
    interp = query_interpreter(sys.executable)
    assert interp.version.short == f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert interp.numpy_include != "/poisoned"


@pytest.mark.slow
def test_cmake_reconfigure_after_the_cross_swap_reproduces_the_fresh_cache(cross: Cross) -> None:
    assert cross.swap_proc.returncode == 0, cross.swap_proc.stderr
    reconfigured = dict(cross.reconfigured)
    for key, value in RERUN_ONLY.items():
        if key not in cross.fresh_entries and reconfigured.get(key) == value:
            del reconfigured[key]
    assert differences(reconfigured, cross.fresh_entries) == {}


# What scikit-build-core's Builder.configure() writes into its initial cache for the Python
# hints and SKBUILD_SOABI, from its own functions (scikit_build_core/builder/sysconfig.py).
SKBUILD_VALUES = (
    "import json, os, sys, sysconfig\n"
    "from scikit_build_core.builder.sysconfig import get_python_include_dir, get_soabi\n"
    "print(json.dumps({'Python_EXECUTABLE': sys.executable,\n"
    "                  'Python_ROOT_DIR': sys.base_exec_prefix,\n"
    "                  'Python_INCLUDE_DIR': str(get_python_include_dir()),\n"
    "                  'SKBUILD_SOABI': get_soabi(os.environ),\n"
    "                  'EXT_SUFFIX': sysconfig.get_config_var('EXT_SUFFIX')}))\n"
)

SOABI_PROJECT = """cmake_minimum_required(VERSION 3.18)
project(soabi_probe LANGUAGES CXX)
set(BUILD_PYTHON ON)
find_package(Python COMPONENTS Interpreter OPTIONAL_COMPONENTS Development.Module)
message(STATUS "FindPython: Python_SOABI=[${Python_SOABI}]")
%s
Python_add_library(_C MODULE WITH_SOABI module.cpp)
file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/module_name.txt" CONTENT "$<TARGET_FILE_NAME:_C>")
"""


def _patch_0006_lines() -> str:
    """The CMake lines patch 0006 adds to cmake/Dependencies.cmake."""
    assert PATCH_0006 is not None, "patch 0006 (Python_SOABI in cross builds) missing"
    (diff,) = patch_check.split_patch(PATCH_0006.read_text(encoding="utf-8"))
    (hunk,) = diff.hunks()
    return "\n".join(line[1:] for line in hunk if line.startswith("+"))


def _copy_package(name: str, dest: Path) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations
    if not (dest / name).exists():
        shutil.copytree(spec.submodule_search_locations[0], dest / name)


def _configure_soabi_probe(
    root: Path, cross: Cross, values: dict[str, str], patched: bool
) -> tuple[int, str]:
    src, build = root / "src", root / "build"
    src.mkdir(parents=True)
    (src / "CMakeLists.txt").write_text(SOABI_PROJECT % (_patch_0006_lines() if patched else ""))
    (src / "module.cpp").write_text("int probe_module() { return 0; }\n")
    defines = [f"-D{k}={v}" for k, v in values.items() if k != "EXT_SUFFIX"]
    # conda's CMAKE_ARGS of a linux-aarch64 build on linux-64 make it a cross build (the compiler
    # is this machine's: CMake compiles nothing it would run, and generating needs no more)
    cross_args = ("-DCMAKE_SYSTEM_NAME=Linux", "-DCMAKE_SYSTEM_PROCESSOR=aarch64")
    proc = _cmake_configure(src, build, cross.activation, *cross_args, *defines)
    output = proc.stdout + proc.stderr
    if proc.returncode == 0:
        output += "\nMODULE " + (build / "module_name.txt").read_text()
    return proc.returncode, output


@pytest.mark.slow
def test_patch_0006_names_the_module_for_the_target(cross: Cross, tmp_path: Path) -> None:
    if importlib.util.find_spec("scikit_build_core") is None:
        pytest.skip("scikit-build-core is not installed (PyTorch 2.14's build backend)")
    # In a conda build scikit-build-core is in the host env; cross-python's activation copies
    # the host's pure-Python packages into the build env's site-packages, as here.
    build_sp = cross.build_prefix / "lib" / f"python{cross.b.short}" / "site-packages"
    for name in ("scikit_build_core", "packaging"):
        _copy_package(name, build_sp)
    values = json.loads(
        subprocess.run(
            [str(cross.prefix / "bin" / "python"), "-c", SKBUILD_VALUES],
            capture_output=True,
            text=True,
            env=_build_env(cross.activation),
            timeout=120,
            check=True,
        ).stdout
    )
    target_soabi = f"cpython-{_nodot(cross.b)}-aarch64-linux-gnu"
    assert values["SKBUILD_SOABI"] == target_soabi, values
    assert values["EXT_SUFFIX"] == f".{target_soabi}.so", values

    rc, out = _configure_soabi_probe(tmp_path / "unpatched", cross, values, patched=False)
    assert rc == 0, out
    assert "FindPython: Python_SOABI=[]" in out, out
    assert "MODULE _C.so" in out, out  # what 2.14 builds without the patch

    rc, out = _configure_soabi_probe(tmp_path / "patched", cross, values, patched=True)
    assert rc == 0, out
    assert f"Python_SOABI from SKBUILD_SOABI: {target_soabi}" in out, out
    assert f"MODULE _C{values['EXT_SUFFIX']}" in out, out

    # Configured outside scikit-build-core (no SKBUILD_SOABI): an error, not an untagged module.
    no_skbuild = {k: v for k, v in values.items() if k != "SKBUILD_SOABI"}
    rc, out = _configure_soabi_probe(tmp_path / "no-skbuild", cross, no_skbuild, patched=True)
    assert rc != 0 and "left Python_SOABI empty and SKBUILD_SOABI is not set" in " ".join(out.split()), out
