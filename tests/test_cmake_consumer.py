"""Build recipe/cmake_test against real PyTorch wheels; patch 0003 on the 2.14.1 TorchConfig.cmake.

Which wheels, and why: the recipe builds 2.14.1, but the only Linux x86_64
2.14.1 wheel on PyPI is the CUDA 13.0 one. Its Caffe2Config.cmake includes
public/cuda.cmake (find_package(CUDAToolkit REQUIRED): nvcc and the CUDA
headers at configure time) and its libtorch_cuda.so needs libcudart.so.13,
cuBLAS, cuDNN, NCCL, ... from pip's nvidia-* packages at link and run time;
with none of that here, a consumer could at best be linked with
-Wl,--allow-shlib-undefined and never run. So the C++ consumer is compiled,
linked and run against the libraries of the 2.13.0 CPU wheel in pip's
find-links (``PIP_FIND_LINKS`` or ``pip config list``; on these machines it holds
torch 2.13.0+cpu cp311), and the file patch 0003 changes is the real 2.14.1
one: TorchConfig.cmake of the 2.14.1 macOS arm64 wheel (python -m feedstock check-patches's
cache). For a shared, CPU-only torch it differs from a Linux CPU one only in
configured values of the static-library and CUDA branches that are not taken
here, and it loads the 2.13.0 Caffe2Config.cmake next to it through
find_dependency(Caffe2). The tests skip when a wheel is unreachable or when
cmake, ninja, a C++ compiler or Python's embedding library are missing.

* ``test_consumer_builds_against_wheel``: configure with
  ``Torch_DIR=<wheel>/torch/share/cmake/Torch`` and ``-DWITH_TORCH_PYTHON=ON``,
  build (one small file including <ATen/Parallel.h> and
  <torch/csrc/Layout.h>, not <torch/torch.h>, to keep it short) and run it
  (2.13.0 throughout).
* ``test_patch_0003_context_is_in_every_torchconfig``: the lines patch 0003
  replaces are in the 2.13.0 TorchConfig.cmake and in that of every 2.14.1
  wheel at hand (macOS arm64, Windows x86_64 and Linux x86_64 where cached),
  so the behaviour tested below is that of 2.14.1.
* ``test_conda_layout_configures``: lays the wheel's files out like the
  feedstock installs them (headers only in $PREFIX/include, libraries in
  $PREFIX/lib, an otherwise empty $SP_DIR/torch/include) with patch 0003
  applied to both TorchConfig.cmake copies (2.13.0's and 2.14.1's, one run
  each), and checks that configuring with Torch_DIR from $PREFIX/share and
  from site-packages both find the headers in $PREFIX/include and
  libtorch_python next to the config.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from feedstock import patch_check
from feedstock.paths import REPO as ROOT

PROJECT = ROOT / "recipe" / "cmake_test"
PATCH_0003 = next((ROOT / "recipe" / "patches").glob("0003-*TorchConfig*.patch"), None)
WHEEL_GLOB = "torch-2.13.0*-manylinux*_x86_64.whl"
MEMBERS = ("torch/include/", "torch/share/", "torch/lib/")
PY_TAG = "cp311"


def find_links() -> list[Path]:
    dirs: list[str] = []
    env = os.environ.get("PIP_FIND_LINKS")
    if env:
        dirs += env.split()
    try:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith("find-links"):
            dirs += value.strip().strip("'\"").split()
    paths = []
    for d in dirs:
        d = d.removeprefix("file://")
        if Path(d).is_dir():
            paths.append(Path(d))
    return paths


def find_wheel() -> Path | None:
    for d in find_links():
        hits = sorted(d.glob(WHEEL_GLOB))
        if hits:
            return hits[0]
    return None


def python_for_wheel(wheel: Path) -> Path | None:
    """A Python matching the wheel's tag, to find its headers and libpython."""
    m = re.search(r"-cp(\d)(\d+)-", wheel.name)
    ver = f"{m.group(1)}.{m.group(2)}" if m else "3.11"
    if f"{sys.version_info.major}.{sys.version_info.minor}" == ver:
        return Path(sys.executable)
    exe = shutil.which(f"python{ver}")
    return Path(exe) if exe else None


def python_root(python: Path) -> str:
    return subprocess.run(
        [str(python), "-c", "import sys; print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


pytestmark = pytest.mark.slow  # configures and builds a real CMake project against the wheel


@pytest.fixture(scope="module")
def tools():
    missing = [t for t in ("cmake", "ninja") if shutil.which(t) is None]
    if not (shutil.which("c++") or shutil.which("g++")):
        missing.append("c++")
    if missing:
        pytest.skip(f"missing tools: {missing}")


@pytest.fixture(scope="module")
def wheel_tree(tmp_path_factory, tools) -> Path:
    wheel = find_wheel()
    if wheel is None:
        pytest.skip("no torch 2.13.0 wheel in pip's find-links")
    dest = tmp_path_factory.mktemp("wheel")
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(dest, [n for n in zf.namelist() if n.startswith(MEMBERS)])
    # zipfile drops the executable bit; shared libraries do not need it.
    yield dest / "torch"
    shutil.rmtree(dest, ignore_errors=True)


@pytest.fixture(scope="module")
def python_dev():
    wheel = find_wheel()
    py = python_for_wheel(wheel) if wheel else None
    if py is None:
        pytest.skip("no Python matching the wheel's tag")
    root = python_root(py)
    libdir = Path(root) / "lib"
    if not any(libdir.glob("libpython3*.so*")):
        pytest.skip(f"no shared libpython under {libdir}")
    return root


def configure(build: Path, torch_dir: Path, python_root_dir: str, with_python: bool = True):
    cmd = [
        "cmake",
        "-S",
        str(PROJECT),
        "-B",
        str(build),
        "-G",
        "Ninja",
        f"-DTorch_DIR={torch_dir}",
        f"-DWITH_TORCH_PYTHON={'ON' if with_python else 'OFF'}",
        f"-DPython3_ROOT_DIR={python_root_dir}",
        "-DCMAKE_BUILD_TYPE=Release",
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_consumer_builds_against_wheel(wheel_tree: Path, python_dev: str, tmp_path: Path):
    build = tmp_path / "build"
    out = configure(build, wheel_tree / "share" / "cmake" / "Torch", python_dev)
    assert f"TORCH_PYTHON_LIBRARY: {wheel_tree}/lib/libtorch_python.so" in out
    r = subprocess.run(["ninja", "-C", str(build)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    exe = build / "torch_consumer"
    needed = (
        subprocess.run(["readelf", "-d", str(exe)], capture_output=True, text=True).stdout
        if shutil.which("readelf")
        else ""
    )
    if needed:
        assert "[libtorch_python.so]" in needed and "[libtorch_cpu.so]" in needed, needed
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch 2.13.0: at::get_num_threads() = " in run.stdout
    assert "torch_python: THPLayoutType at 0x" in run.stdout


def patch_0003_replacement() -> tuple[str, str]:
    """(old, new) text of patch 0003's hunk, as generated into TorchConfig.cmake."""
    assert PATCH_0003 is not None, "patch 0003 (TorchConfig) missing"
    text = PATCH_0003.read_text()
    hunk = text.split("\n@@ ", 1)[1].split("\n", 1)[1].split("\n-- \n", 1)[0]
    old, new = [], []
    for line in hunk.splitlines():
        tag, body = line[:1], line[1:]
        if tag in (" ", ""):
            old.append(body)
            new.append(body)
        elif tag == "-":
            old.append(body)
        elif tag == "+":
            new.append(body)

    def sub(s):
        return "\n".join(s).replace("@BUILD_SHARED_LIBS@", "ON")

    return sub(old), sub(new)


def torchconfig_2_14_1() -> str:
    """TorchConfig.cmake of the 2.14.1 macOS arm64 wheel (cached by python -m feedstock check-patches)."""
    try:
        wheel = patch_check.download_wheel()
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} wheel not reachable: {exc}")
    with zipfile.ZipFile(wheel) as zf:
        return zf.read("torch/share/cmake/Torch/TorchConfig.cmake").decode()


def test_patch_0003_context_is_in_every_torchconfig(wheel_tree: Path) -> None:
    old, _ = patch_0003_replacement()
    configs = {
        "2.13.0 (find-links)": (wheel_tree / "share/cmake/Torch/TorchConfig.cmake").read_text(),
        "2.14.1 macOS arm64": torchconfig_2_14_1(),
    }
    for cached in sorted(patch_check.cache_dir().glob(f"*/torch-{patch_check.TORCH_VERSION}-*.whl")):
        with zipfile.ZipFile(cached) as zf:
            text = zf.read("torch/share/cmake/Torch/TorchConfig.cmake").decode()
        configs[cached.name] = text.replace("\r\n", "\n")  # the Windows wheel has CRLF endings
    missing = [name for name, text in configs.items() if old not in text]
    assert not missing, f"patch 0003's context is not in the TorchConfig.cmake of {missing}"


@pytest.mark.parametrize("config_version", ["2.13.0", "2.14.1"])
def test_conda_layout_configures(wheel_tree: Path, python_dev: str, tmp_path: Path, config_version: str):
    torchconfig = (
        (wheel_tree / "share/cmake/Torch/TorchConfig.cmake").read_text()
        if config_version == "2.13.0"
        else torchconfig_2_14_1()
    )
    prefix = tmp_path / "prefix"
    sp_torch = prefix / "lib" / "python3.11" / "site-packages" / "torch"
    (prefix / "lib").mkdir(parents=True)
    (prefix / "include").symlink_to(wheel_tree / "include", target_is_directory=True)
    for lib in (wheel_tree / "lib").glob("*.so*"):
        (prefix / "lib" / lib.name).symlink_to(lib)
    (sp_torch / "lib").mkdir(parents=True)
    (sp_torch / "include").mkdir()  # pytorch keeps no copy of libtorch's headers
    for lib in (wheel_tree / "lib").glob("*.so*"):
        (sp_torch / "lib" / lib.name).symlink_to(prefix / "lib" / lib.name)

    old, new = patch_0003_replacement()
    assert old in torchconfig, f"patch 0003 context does not match the {config_version} TorchConfig.cmake"
    for share in (prefix / "share", sp_torch / "share"):
        shutil.copytree(wheel_tree / "share", share, symlinks=True)
        cfg = share / "cmake" / "Torch" / "TorchConfig.cmake"
        cfg.write_text(torchconfig.replace(old, new, 1))

    for name, torch_dir in (
        ("prefix", prefix / "share" / "cmake" / "Torch"),
        ("site-packages", sp_torch / "share" / "cmake" / "Torch"),
    ):
        out = configure(tmp_path / f"build-{name}", torch_dir, python_dev)
        inc = re.search(r"TORCH_INCLUDE_DIRS: (.*)", out).group(1).split(";")
        assert inc == [f"{prefix}/include", f"{prefix}/include/torch/csrc/api/include"], (name, inc)
        lib = re.search(r"TORCH_PYTHON_LIBRARY: (.*)", out).group(1).strip()
        assert Path(lib).parent == torch_dir.parents[2] / "lib", (name, lib)


def test_a_free_threaded_python_is_found_in_a_conda_env(wheel_tree: Path, tmp_path: Path) -> None:
    """The consumer in a conda env whose only Python is free-threaded (the pytorch 3.14t test env):
    FindPython searches ``libpython3.Yt`` and the ``t`` interpreter names only when its
    ``Python3_FIND_ABI`` asks (the fourth element defaults to OFF), so without it the configure
    ends in ``Could NOT find Python3 (missing: Python3_LIBRARIES ... Development.Embed)``.

    The prefix is the provisioned free-threaded CPython found the way conda's activation finds a
    test env's: first on ``PATH``, libraries and headers only under the find roots (the prefix;
    here also the wheel's libtorch, which conda installs in the same prefix)."""
    from support.freethreaded import freethreaded_or_skip

    ft = freethreaded_or_skip()
    root = ft.root
    env = dict(os.environ, PATH=f"{root}/bin{os.pathsep}{os.environ['PATH']}")
    cmd = [
        "cmake", "-S", str(PROJECT), "-B", str(tmp_path / "build"), "-G", "Ninja",
        f"-DTorch_DIR={wheel_tree / 'share' / 'cmake' / 'Torch'}", "-DWITH_TORCH_PYTHON=ON",
        f"-DCMAKE_FIND_ROOT_PATH={root};{wheel_tree}", "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY",
        "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY", "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER",
    ]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    cache = (tmp_path / "build" / "CMakeCache.txt").read_text()
    assert f"{ft.dirname}" in re.search(r"_Python3_INCLUDE_DIR:\w+=(.*)", cache).group(1), cache
