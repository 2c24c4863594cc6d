"""``megabuild build-state`` on a real CMake/Ninja build whose one target depends on "the Python".

The project mirrors the megabuild's Python switch: ``pyext`` compiles against the include dir the
cache's ``PY_INCLUDE`` names (PyTorch's ``torch_python`` against ``Python_INCLUDE_DIRS``), ``core``
does not, and every CMake run rewrites ``empty.cpp`` (PyTorch's libtorch as upstream has it; the
recipe's patch 0012 stops that), so a regeneration relinks: restore must cope with it.
The tests build for 3.12, save, rebuild for 3.13 in the same tree, go back to 3.12's cache and
restore: Ninja must then compile nothing of ``pyext``, and the library must be 3.12's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from megabuild.buildstate import restore, snapshot
from megabuild.errors import MegabuildError
from support.megabuild_cli import run_megabuild

pytestmark = pytest.mark.slow

CMAKE = """
cmake_minimum_required(VERSION 3.18)
project(mini CXX)
set(PY_INCLUDE "" CACHE PATH "the Python's include dir")
file(WRITE ${PROJECT_BINARY_DIR}/empty.cpp "")
add_library(core SHARED core.cpp)
add_library(torch SHARED ${PROJECT_BINARY_DIR}/empty.cpp)
target_link_libraries(torch PUBLIC core)
add_library(pyext SHARED ext.cpp ext2.cpp)
target_include_directories(pyext PRIVATE ${PY_INCLUDE})
target_link_libraries(pyext PRIVATE torch)
"""
# The same project with macOS's names (osx-arm64 2.14.1 wheel: torch/lib/lib*.dylib,
# torch/_C.cpython-3XY-darwin.so): the Python extension's file name changes with the Python (its
# suffix is SKBUILD_SOABI's), so 3.12's and 3.13's builds leave two files. (Install names and
# @rpath: tests/test_macos_dylibs.py, on the real wheel's load commands.)
CMAKE_MACOS_NAMES = """
set(CMAKE_SHARED_LIBRARY_SUFFIX ".dylib")
set(PY_TAG "" CACHE STRING "the Python's SOABI tag")
set_target_properties(pyext PROPERTIES PREFIX "" OUTPUT_NAME "_C" SUFFIX ".${PY_TAG}.so")
"""
SOURCES = {
    "core.cpp": 'extern "C" int core() { return 1; }\n',
    "ext.cpp": (
        '#include <pyver.h>\nextern "C" int core();\n'
        'extern "C" int py_version() { return PYV + 0 * core(); }\n'
    ),
    "ext2.cpp": '#include <pyver.h>\nextern "C" int py_minor() { return PYV % 100; }\n',
}
PYEXT_OBJECTS = {"CMakeFiles/pyext.dir/ext.cpp.o", "CMakeFiles/pyext.dir/ext2.cpp.o"}
_BUILDING = re.compile(r"Building CXX object (\S+)")


class Tree:
    """The project's build dir, switched between "Pythons" by editing the cache, as the recipe does."""

    def __init__(self, root: Path, macos_names: bool = False) -> None:
        if shutil.which("c++") is None or shutil.which("ninja") is None or shutil.which("cmake") is None:
            pytest.skip("needs cmake, ninja and a C++ compiler")
        self.root = root
        src = root / "src"
        src.mkdir()
        self.macos_names = macos_names
        (src / "CMakeLists.txt").write_text(CMAKE + (CMAKE_MACOS_NAMES if macos_names else ""))
        for name, text in SOURCES.items():
            (src / name).write_text(text)
        for minor in ("3.12", "3.13"):
            include = root / "py" / minor / "include"
            include.mkdir(parents=True)
            (include / "pyver.h").write_text(f"#define PYV {minor.replace('.', '')}\n")
            os.utime(include / "pyver.h", ns=(10**18, 10**18))  # a package's mtime: long before the build
        self.build = root / "build"
        self.state = root / "state"
        cmd = ["cmake", "-G", "Ninja", "-S", src, "-B", self.build, f"-DPY_INCLUDE={self.include('3.12')}",
               f"-DPY_TAG={self.tag('3.12')}"]  # fmt: skip
        subprocess.run(cmd, check=True, capture_output=True)

    def include(self, python: str) -> Path:
        return self.root / "py" / python / "include"

    def tag(self, python: str) -> str:
        return f"cpython-{python.replace('.', '')}-darwin"

    def extension(self, python: str) -> Path:
        """The Python extension the build links for ``python``."""
        name = f"_C.{self.tag(python)}.so" if self.macos_names else "libpyext.so"
        return self.build / name

    def switch(self, python: str) -> None:
        proc = run_megabuild(
            "cache",
            "set",
            f"PY_INCLUDE={self.include(python)}",
            f"PY_TAG={self.tag(python)}",
            self.build / "CMakeCache.txt",
        )
        assert proc.returncode == 0, proc.stderr

    def ninja(self) -> set[str]:
        """Build; the objects Ninja compiled (its status lines name them)."""
        proc = subprocess.run(["ninja", "-C", self.build], capture_output=True, text=True, check=True)
        return set(_BUILDING.findall(proc.stdout))

    def py_version(self, python: str = "3.13") -> int:
        """What the built library says (in a new process: dlopen would hand back a loaded copy)."""
        code = f"import ctypes; print(ctypes.CDLL({str(self.extension(python))!r}).py_version())"
        return int(
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        )

    def restore(self, python: str = "3.12") -> restore.RestorePlan:
        planned = restore.plan(self.build, self.state, python)
        assert planned is not None
        restore.apply(planned)
        return planned


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    built = Tree(tmp_path)
    assert built.ninja() >= PYEXT_OBJECTS
    snapshot.save(built.build, built.state, "3.12")
    built.switch("3.13")
    assert built.ninja() >= PYEXT_OBJECTS
    assert built.py_version() == 313
    return built


def test_restore_spares_the_saved_pythons_compiles(tree: Tree) -> None:
    tree.switch("3.12")
    planned = tree.restore()
    assert {rec.path for rec in planned.put_back} >= PYEXT_OBJECTS, planned.lines()
    assert not planned.dropped
    compiled = tree.ninja()
    assert not compiled & PYEXT_OBJECTS, compiled  # regenerating still recompiles empty.cpp and relinks
    assert tree.py_version() == 312
    assert tree.ninja() == set()  # and the tree is consistent: nothing left to do


def test_without_restore_the_saved_python_compiles_again(tree: Tree) -> None:
    """The control: the cost the restore saves."""
    tree.switch("3.12")
    assert tree.ninja() >= PYEXT_OBJECTS
    assert tree.py_version() == 312


@pytest.fixture
def macos_tree(tmp_path: Path) -> Tree:
    built = Tree(tmp_path, macos_names=True)
    assert built.ninja() >= PYEXT_OBJECTS
    snapshot.save(built.build, built.state, "3.12")
    built.switch("3.13")
    assert built.ninja() >= PYEXT_OBJECTS
    assert built.py_version("3.13") == 313
    return built


def test_macos_names_restore_spares_the_saved_pythons_compiles(macos_tree: Tree) -> None:
    """macOS's names: ``.dylib`` libraries, and a Python extension
    whose file name is the Python's (``_C.cpython-312-darwin.so``). The saved build puts back 3.12's
    objects; 3.12's extension file was never overwritten (3.13's has another name), so it needs no
    putting back, and 3.13's file stays beside it."""
    build = macos_tree.build
    assert {p.name for p in build.glob("_C.*.so")} == {"_C.cpython-312-darwin.so", "_C.cpython-313-darwin.so"}
    assert {p.name for p in build.glob("lib*.dylib")} == {"libcore.dylib", "libtorch.dylib"}
    macos_tree.switch("3.12")
    planned = macos_tree.restore()
    put_back = {rec.path for rec in planned.put_back}
    assert put_back >= PYEXT_OBJECTS, planned.lines()
    assert "_C.cpython-313-darwin.so" not in put_back
    compiled = macos_tree.ninja()
    assert not compiled & PYEXT_OBJECTS, compiled
    assert macos_tree.py_version("3.12") == 312
    assert macos_tree.py_version("3.13") == 313  # the other Python's file is left alone
    assert macos_tree.ninja() == set()


def test_macos_names_without_restore_the_saved_python_compiles_again(macos_tree: Tree) -> None:
    """The control on macOS's names: the naive flow compiles 3.12's objects again."""
    macos_tree.switch("3.12")
    assert macos_tree.ninja() >= PYEXT_OBJECTS
    assert macos_tree.py_version("3.12") == 312


def test_an_output_rewritten_in_place_is_rebuilt_not_trusted(tree: Tree) -> None:
    """A tool that writes its output in place (not unlink-and-create, as compilers and linkers do)
    writes through the hard link into the saved copy too: restore then removes the output, so that
    Ninja rebuilds it, instead of restoring a log entry that no longer describes it."""
    obj = tree.build / "CMakeFiles/pyext.dir/ext2.cpp.o"
    state = snapshot.load(tree.state)
    (saved,) = [rec for rec in state.outputs if rec.path == "CMakeFiles/pyext.dir/ext2.cpp.o"]
    with state.kept_path(tree.state, saved).open("r+b") as fh:  # the inode the 3.12 build wrote
        fh.seek(0, os.SEEK_END)
        fh.write(b"\0" * 16)
    tree.switch("3.12")
    planned = tree.restore()
    assert [rec.path for rec in planned.dropped] == ["CMakeFiles/pyext.dir/ext2.cpp.o"]
    assert not obj.exists()
    assert tree.ninja() & PYEXT_OBJECTS == {"CMakeFiles/pyext.dir/ext2.cpp.o"}
    assert tree.py_version() == 312


def test_another_python_restores_nothing(tree: Tree) -> None:
    before = (tree.build / ".ninja_log").read_bytes()
    assert restore.plan(tree.build, tree.state, "3.13") is None
    proc = run_megabuild("build-state", "restore", "--build-dir", tree.build, "--state", tree.state,
                         "--python", "3.13")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "the saved build is Python 3.12's; 3.13 builds in the shared tree" in proc.stdout
    assert (tree.build / ".ninja_log").read_bytes() == before


def test_cli_dry_run_changes_nothing_then_restore_reports(tree: Tree) -> None:
    tree.switch("3.12")
    args = ("build-state", "restore", "--build-dir", tree.build, "--state", tree.state, "--python", "3.12")
    log = (tree.build / ".ninja_log").read_bytes()
    proc = run_megabuild(*args, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "would put back" in proc.stdout and (tree.build / ".ninja_log").read_bytes() == log
    proc = run_megabuild(*args)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"put back \d+ outputs replaced since", proc.stdout), proc.stdout
    # only what the regeneration rewrote (empty.cpp) is newer than what was put back
    stale = [line.split(":")[0].strip() for line in proc.stdout.splitlines() if line.endswith(" is newer")]
    assert stale == ["CMakeFiles/torch.dir/empty.cpp.o"], proc.stdout
    assert not tree.ninja() & PYEXT_OBJECTS


def test_restore_says_when_an_input_is_newer_than_a_put_back_output(tree: Tree) -> None:
    """A fresh host env whose header got a new mtime: Ninja will rebuild, and the log says why."""
    tree.switch("3.12")
    (tree.include("3.12") / "pyver.h").touch()
    proc = run_megabuild("build-state", "restore", "--build-dir", tree.build, "--state", tree.state,
                         "--python", "3.12")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"\d+ put-back outputs? ha(s|ve) a newer input, so Ninja rebuilds them", proc.stdout)
    assert "pyver.h is newer" in proc.stdout
    assert tree.ninja() >= PYEXT_OBJECTS


def test_save_replaces_an_older_state(tree: Tree) -> None:
    snapshot.save(tree.build, tree.state, "3.13")
    assert snapshot.load(tree.state).python == "3.13"
    assert not tree.state.with_name("state.partial").exists()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (("restore", "--python", "3.12"), 1, "no build state in"),
        (("save", "--python", "3.12"), 1, "has no .ninja_log: not a finished Ninja build dir"),
        (("restore", "--python", "3"), 2, "expected a Python version X.Y"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: tuple[str, ...], code: int, message: str) -> None:
    (tmp_path / "build").mkdir()
    proc = run_megabuild("build-state", args[0], "--build-dir", tmp_path / "build", "--state",
                         tmp_path / "state", *args[1:])  # fmt: skip
    assert proc.returncode == code, proc
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert message in proc.stderr.strip().splitlines()[-1]  # the error is one line (after usage)
    assert not (tmp_path / "state").exists()


def test_a_state_of_another_build_dir_is_refused(tree: Tree, tmp_path: Path) -> None:
    moved = tmp_path / "elsewhere"
    shutil.copytree(tree.build, moved, symlinks=True)
    with pytest.raises(MegabuildError, match=r"is of .*/build, not .*/elsewhere"):
        restore.plan(moved, tree.state, "3.12")


def test_a_state_on_another_file_system_keeps_nothing_and_rebuilds(tmp_path: Path) -> None:
    """No hard link across devices (here: the state on /dev/shm's tmpfs). Copying instead would
    double a CUDA build's disk use, so nothing is kept: the replaced outputs are removed at the
    restore, Ninja rebuilds them (the old cost), and the result is still right."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs /dev/shm on another file system than the temp dir")
    tree = Tree(tmp_path)
    tree.ninja()
    tree.state = Path(tempfile.mkdtemp(dir=shm)) / "state"
    try:
        proc = run_megabuild("build-state", "save", "--build-dir", tree.build, "--state", tree.state,
                             "--python", "3.12")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert re.search(r"\(\d+ outputs, 0 hard-linked, \d+ not \(another file system", proc.stdout), (
            proc.stdout
        )
        assert not any((tree.state / "files").iterdir())
        tree.switch("3.13")
        tree.ninja()
        tree.switch("3.12")
        planned = tree.restore()
        assert not planned.put_back and {rec.path for rec in planned.dropped} >= PYEXT_OBJECTS
        assert tree.ninja() >= PYEXT_OBJECTS
        assert tree.py_version() == 312
    finally:
        shutil.rmtree(tree.state.parent, ignore_errors=True)
