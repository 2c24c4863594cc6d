"""``megabuild cmake-args add-find-root``: $SRC_DIR into every find root of the activation's CMAKE_ARGS.

The CMAKE_ARGS shapes are those of conda-forge's real activation scripts (tests/harness/activation.py):
Linux CPU has one ``-DCMAKE_FIND_ROOT_PATH=`` (ctng-compiler-activation), CUDA a second one from
cuda-nvcc's activation (CMake uses the last), macOS none (clang-compiler-activation). The real-CMake
test shows what goes wrong without the edit: a find_path() into the source tree, as PyTorch's
FindMKLDNN does, finds nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from feedstock.conda_build_standin.compiler_activation import cmake_args
from megabuild.cmake_args import add_find_root
from megabuild.errors import MegabuildError
from support.megabuild_cli import run_megabuild

PREFIX = "/home/conda/feedstock_root/build_artifacts/pytorch_1/_h_env_placehold_placehold"
BUILD_PREFIX = "/home/conda/feedstock_root/build_artifacts/pytorch_1/_build_env"
SRC_DIR = "/home/conda/feedstock_root/build_artifacts/pytorch_1/work"
FIND_ROOT = "-DCMAKE_FIND_ROOT_PATH="


def _roots(value: str) -> list[list[str]]:
    """The entries of each -DCMAKE_FIND_ROOT_PATH= in ``value``, split the way patch 0002 does."""
    return [arg[len(FIND_ROOT) :].split(";") for arg in value.split() if arg.startswith(FIND_ROOT)]


def _others(value: str) -> list[str]:
    return [arg for arg in value.split() if not arg.startswith(FIND_ROOT)]


def test_linux_cpu_one_entry() -> None:
    before = cmake_args("linux-64", PREFIX, BUILD_PREFIX)
    assert _roots(before) == [[PREFIX, f"{BUILD_PREFIX}/x86_64-conda-linux-gnu/sysroot"]]
    after, seen = add_find_root(before, SRC_DIR)
    assert seen == 1
    assert _roots(after) == [[PREFIX, f"{BUILD_PREFIX}/x86_64-conda-linux-gnu/sysroot", SRC_DIR]]
    assert _others(after) == _others(before)
    # the find-root modes are other variables: untouched
    assert "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY" in after.split()
    assert after == before.replace("/sysroot ", f"/sysroot;{SRC_DIR} ", 1)


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_cuda_both_entries(platform: str) -> None:
    """nvcc's activation appends a second find root; CMake uses the last, so both get SRC_DIR."""
    before = cmake_args(platform, PREFIX, BUILD_PREFIX, cuda=True, cross=platform == "linux-aarch64")
    assert len(_roots(before)) == 2
    after, seen = add_find_root(before, SRC_DIR)
    assert seen == 2
    for old, new in zip(_roots(before), _roots(after)):
        assert new == [*old, SRC_DIR]
    assert _others(after) == _others(before)
    assert _roots(after)[-1][-1] == SRC_DIR  # the entry CMake keeps


@pytest.mark.parametrize("platform", ["osx-64", "osx-arm64"])
def test_macos_no_entry_is_left_alone(platform: str) -> None:
    before = cmake_args(platform, PREFIX, BUILD_PREFIX, cross=platform == "osx-arm64")
    assert not _roots(before)
    assert add_find_root(before, SRC_DIR) == (before, 0)


def test_every_other_character_is_kept() -> None:
    before = f"  -DA=1\t{FIND_ROOT}/p;/q  -DB='x y'\n{FIND_ROOT}/p -DC=;\n"
    after, seen = add_find_root(before, SRC_DIR)
    assert seen == 2
    assert after == f"  -DA=1\t{FIND_ROOT}/p;/q;{SRC_DIR}  -DB='x y'\n{FIND_ROOT}/p;{SRC_DIR} -DC=;\n"


def test_no_shell_quoting_reaches_the_consumers() -> None:
    """Patch 0002 and ``cmake $CMAKE_ARGS`` split on whitespace and keep quotes: shlex.join would
    turn the ';' entries into quoted words that reach cmake with their quotes."""
    before = cmake_args("linux-64", PREFIX, BUILD_PREFIX, cuda=True)
    after, _ = add_find_root(before, SRC_DIR)
    assert not any(q in after for q in "'\"\\")
    assert len(after.split()) == len(before.split())


def test_other_spellings() -> None:
    assert add_find_root("-DCMAKE_FIND_ROOT_PATH:PATH=/p -D CMAKE_FIND_ROOT_PATH=/q", "/s") == (
        "-DCMAKE_FIND_ROOT_PATH:PATH=/p;/s -D CMAKE_FIND_ROOT_PATH=/q;/s",
        2,
    )
    assert add_find_root(f"{FIND_ROOT}", "/s") == (f"{FIND_ROOT}/s", 1)
    # a variable whose name only starts the same is not a find root
    assert add_find_root("-DCMAKE_FIND_ROOT_PATHS=/p CMAKE_FIND_ROOT_PATH=/q", "/s")[1] == 0


def test_idempotent() -> None:
    before = cmake_args("linux-64", PREFIX, BUILD_PREFIX, cuda=True)
    once, _ = add_find_root(before, SRC_DIR)
    assert add_find_root(once, SRC_DIR) == (once, 2)
    assert add_find_root(once, SRC_DIR + "/") == (once, 2)


@pytest.mark.parametrize(
    ("root", "message"),
    [
        ("work", "not an absolute path"),
        ("/build artifacts/work", "whitespace"),
        ("/a;/b", "separates CMake list entries"),
        ("", "empty"),
    ],
)
def test_roots_that_cannot_be_expressed(root: str, message: str) -> None:
    with pytest.raises(MegabuildError, match=message):
        add_find_root(f"{FIND_ROOT}/p", root)


def test_quoted_entry_is_refused() -> None:
    with pytest.raises(MegabuildError, match="quoted"):
        add_find_root(f"'{FIND_ROOT}/p;/q'", SRC_DIR)
    with pytest.raises(MegabuildError, match="quoted"):
        add_find_root(f'{FIND_ROOT}"/p;/q"', SRC_DIR)


# ------------------------------------------------------------------------------------------------
# command line, as build.sh runs it
# ------------------------------------------------------------------------------------------------


def _cli(*args: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    saved = {k: os.environ.get(k) for k in env}
    try:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        return run_megabuild("cmake-args", *args)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def test_cli_reads_cmake_args_and_prints_the_new_value() -> None:
    before = cmake_args("linux-64", PREFIX, BUILD_PREFIX, cuda=True)
    proc = _cli("add-find-root", SRC_DIR, env={"CMAKE_ARGS": before})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == add_find_root(before, SRC_DIR)[0] + "\n"
    assert "2 -DCMAKE_FIND_ROOT_PATH entries" in proc.stderr


def test_cli_without_cmake_args() -> None:
    proc = _cli("add-find-root", SRC_DIR, env={"CMAKE_ARGS": None})
    assert (proc.returncode, proc.stdout) == (0, "\n")
    assert "unchanged" in proc.stderr


def test_cli_error_is_one_line() -> None:
    proc = _cli("add-find-root", "relative/dir", env={"CMAKE_ARGS": f"{FIND_ROOT}/p"})
    assert proc.returncode == 1
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        "megabuild: error: add-find-root: 'relative/dir' is not an absolute path"
    ]


# ------------------------------------------------------------------------------------------------
# real CMake: what the find roots do to a lookup into the source tree
# ------------------------------------------------------------------------------------------------

PROBE = """cmake_minimum_required(VERSION 3.18)
project(find_root_probe NONE)
# like PyTorch's FindMKLDNN: oneDNN's headers come from the source tree
find_path(IDEEP_INCLUDE_DIR ideep.hpp PATHS ${PROJECT_SOURCE_DIR}/third_party/ideep PATH_SUFFIXES include)
find_path(PREFIX_INCLUDE_DIR prefix.h)
message(STATUS "IDEEP_INCLUDE_DIR=${IDEEP_INCLUDE_DIR}")
message(STATUS "PREFIX_INCLUDE_DIR=${PREFIX_INCLUDE_DIR}")
"""


@pytest.mark.slow
@pytest.mark.parametrize("cuda", [False, True])
def test_real_cmake_finds_the_source_tree_only_with_the_edit(tmp_path: Path, cuda: bool) -> None:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not on PATH")
    src, prefix, build_prefix = tmp_path / "work", tmp_path / "h_env", tmp_path / "build_env"
    (src / "third_party/ideep/include").mkdir(parents=True)
    (src / "third_party/ideep/include/ideep.hpp").write_text("")
    (src / "CMakeLists.txt").write_text(PROBE)
    (prefix / "include").mkdir(parents=True)
    (prefix / "include/prefix.h").write_text("")
    activation = cmake_args("linux-64", prefix, build_prefix, cuda=cuda, host_has_python=False)

    def found(value: str, name: str) -> dict[str, str]:
        build = tmp_path / f"build-{name}"
        args = [a for a in value.split() if not a.startswith("-DCMAKE_INSTALL_PREFIX=")]
        # build.sh exports CMAKE_PREFIX_PATH=$PREFIX
        env = {**os.environ, "CMAKE_PREFIX_PATH": str(prefix)}
        proc = subprocess.run(
            [cmake, "-S", str(src), "-B", str(build), *args],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = [ln.split(" ", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("-- ") and "=" in ln]
        return dict(line.split("=", 1) for line in lines)

    without = found(activation, "without")
    assert without["IDEEP_INCLUDE_DIR"].endswith("-NOTFOUND")  # re-rooted under $PREFIX
    assert without["PREFIX_INCLUDE_DIR"] == str(prefix / "include")
    edited, _ = add_find_root(activation, str(src))
    with_edit = found(edited, "with")
    assert with_edit["IDEEP_INCLUDE_DIR"] == str(src / "third_party/ideep/include")
    assert with_edit["PREFIX_INCLUDE_DIR"] == str(prefix / "include")
    if cuda:  # only the first entry edited: CMake uses nvcc's second one and finds nothing
        sysroot = f"{build_prefix}/x86_64-conda-linux-gnu/sysroot"
        only_first = activation.replace(f"{sysroot} ", f"{sysroot};{src} ", 1)
        assert _roots(only_first)[0][-1] == str(src) and _roots(only_first)[-1][-1] != str(src)
        assert found(only_first, "first-only")["IDEEP_INCLUDE_DIR"].endswith("-NOTFOUND")
