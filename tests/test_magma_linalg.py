"""``megabuild magma-linalg`` on a real CMake/Ninja build: linalg's compiles and one link, nothing else."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
from megabuild.binaries.elf import read_elf_file
from megabuild.errors import MegabuildError
from megabuild.magma import replay
from support.megabuild_cli import run_megabuild

pytestmark = pytest.mark.slow

CMAKE = """
cmake_minimum_required(VERSION 3.18)
project(mini CXX)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
set(CMAKE_INSTALL_RPATH "$ORIGIN")
configure_file(Config.h.in ${PROJECT_BINARY_DIR}/gen/ATen/cuda/CUDAConfig.h)
include_directories(${PROJECT_BINARY_DIR}/gen)
add_library(torch_cuda SHARED kernel.cpp)
add_library(torch_cuda_linalg SHARED linalg.cpp lib.cpp)
target_link_libraries(torch_cuda_linalg PRIVATE torch_cuda)
install(TARGETS torch_cuda torch_cuda_linalg LIBRARY DESTINATION lib)
"""
LINALG_WITH_MAGMA_CALL = """
#include <ATen/cuda/CUDAConfig.h>
#if AT_MAGMA_ENABLED()
#include <magma.h>
#endif
extern "C" int linalg_has_magma() {
#if AT_MAGMA_ENABLED()
  return magma_version() > 0;
#else
  return 0;
#endif
}
"""
SOURCES = {
    "Config.h.in": "#pragma once\n#define AT_CUDNN_ENABLED() 1\n#define AT_MAGMA_ENABLED() 0\n",
    "kernel.cpp": (
        '#include <ATen/cuda/CUDAConfig.h>\nextern "C" int kernel() { return AT_MAGMA_ENABLED(); }\n'
    ),
    "lib.cpp": 'extern "C" int kernel();\nextern "C" int lib() { return kernel(); }\n',
    "linalg.cpp": LINALG_WITH_MAGMA_CALL,
}


def _make_magma(prefix: Path) -> Path:
    (prefix / "include").mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "include/magma.h").write_text('extern "C" int magma_version();\n')
    src = prefix / "magma.cpp"
    src.write_text('extern "C" int magma_version() { return 20900; }\n')
    lib = prefix / "lib/libmagma.so"
    subprocess.run(["c++", "-shared", "-fPIC", "-Wl,-soname,libmagma.so", "-o", lib, src], check=True)
    return prefix


def _build(tmp_path: Path, linalg: str = LINALG_WITH_MAGMA_CALL, link_flags: str = "") -> Path:
    if shutil.which("c++") is None or shutil.which("ninja") is None:
        pytest.skip("needs a C++ compiler and ninja")
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE)
    for name, text in {**SOURCES, "linalg.cpp": linalg}.items():
        (src / name).write_text(text)
    build = tmp_path / "build"
    configure = ["cmake", "-G", "Ninja", "-S", src, "-B", build, f"-DCMAKE_SHARED_LINKER_FLAGS={link_flags}"]
    subprocess.run(configure, check=True, capture_output=True)
    subprocess.run(["ninja", "-C", build], check=True, capture_output=True)
    return build


def _replay(tmp_path: Path, build: Path, magma: Path) -> replay.Replay:
    return replay.plan(build, tmp_path / "out", "lib/libtorch_cuda_linalg.so", "torch_cuda_linalg", magma, [])


def test_replays_only_the_linalg_objects_and_links_magma(tmp_path: Path) -> None:
    build = _build(tmp_path)
    magma = _make_magma(tmp_path / "magma")
    ninja_log = (build / ".ninja_log").read_bytes()
    built = {p: p.read_bytes() for p in (build / "lib").iterdir()}
    planned = _replay(tmp_path, build, magma)
    assert sorted(Path(c.output).name for c in planned.compiles) == ["lib.cpp.o", "linalg.cpp.o"]
    lines = replay.run(planned)
    assert "2 compiles + 1 link" in lines[0]
    assert "libmagma.so" in read_elf_file(planned.library).needed
    # its dependencies by soname, as an installed env provides them
    for dependency in (magma / "lib/libmagma.so", build / "lib/libtorch_cuda.so"):
        ctypes.CDLL(str(dependency), mode=ctypes.RTLD_GLOBAL)
    assert ctypes.CDLL(str(planned.library)).linalg_has_magma() == 1
    # the build tree is only read: no ninja edge, no library of it changed
    assert (build / ".ninja_log").read_bytes() == ninja_log
    assert {p: p.read_bytes() for p in (build / "lib").iterdir()} == built
    assert "libmagma.so" not in read_elf_file(build / "lib/libtorch_cuda_linalg.so").needed
    # linked with the install RPATH, as `cmake --install` would leave it
    assert read_elf_file(planned.library).search_path == ("$ORIGIN",)
    assert read_elf_file(build / "lib/libtorch_cuda_linalg.so").search_path == (str(build / "lib"),)


def test_fails_when_magma_does_not_end_up_linked(tmp_path: Path) -> None:
    # --as-needed drops libmagma when no MAGMA symbol is used: the variant would be nomagma
    build = _build(
        tmp_path,
        linalg="#include <ATen/cuda/CUDAConfig.h>\nint unused() { return 0; }\n",
        link_flags="-Wl,--as-needed",
    )
    with pytest.raises(MegabuildError, match="does not link libmagma"):
        replay.run(_replay(tmp_path, build, _make_magma(tmp_path / "magma")))


def test_fails_when_no_linalg_object_sees_the_config_header(tmp_path: Path) -> None:
    build = _build(tmp_path, linalg="int nothing() { return 0; }\n")
    with pytest.raises(MegabuildError, match=r"see 0 copies of ATen/cuda/CUDAConfig\.h"):
        _replay(tmp_path, build, _make_magma(tmp_path / "magma"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--library", "lib/libnope.so"], "ninja -t"),
        (["--target", "torch_nope"], "takes no object of target torch_nope"),
    ],
)
def test_cli_fails_in_one_line_when_the_linalg_commands_are_not_found(
    tmp_path: Path, args: list[str], message: str
) -> None:
    build = _build(tmp_path)
    proc = run_megabuild(
        "magma-linalg",
        "--build-dir",
        str(build),
        "--out",
        str(tmp_path / "out"),
        "--magma-home",
        str(_make_magma(tmp_path / "magma")),
        *args,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("megabuild: error: ") and message in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("text", ["#define AT_CUDNN_ENABLED() 1\n", "#define AT_MAGMA_ENABLED() 0\n" * 2])
def test_config_header_must_have_exactly_one_magma_define(text: str) -> None:
    with pytest.raises(MegabuildError, match="expected one"):
        replay.magma_config(text)


def test_config_header_gets_magma_enabled() -> None:
    text = "#pragma once\n#define AT_MAGMA_ENABLED() 0\n#define X 0\n"
    assert replay.magma_config(text) == "#pragma once\n#define AT_MAGMA_ENABLED() 1\n#define X 0\n"
