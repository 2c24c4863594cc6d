"""C++/CUDA extensions and inductor's C++ JIT find libtorch's and the CUDA packages' files in the
conda prefix (patch 0004).

conda-forge's CUDA packages install their headers and libraries into ``$PREFIX/targets/<target>``
on Linux (``megabuild.buildenv.cuda.target_dir``: ``x86_64-linux``, ``sbsa-linux``, and
``aarch64-linux`` on Tegra) and the driver stub ``libcuda.so`` into its ``lib/stubs``; on Windows
everything is in ``%PREFIX%\\Library``. The real 2.14.1 ``torch/utils/cpp_extension.py`` (read from
the macOS arm64 wheel on PyPI at test time; its Python files are the other wheels' too) is patched
with ``patch`` as conda-build does, and its ``include_paths()`` / ``library_paths()`` run here
against a prefix laid out so. Real code, fake runtime: the module's globals that need a working
torch (``_TORCH_PATH``, ``CUDA_HOME``, ``IS_WINDOWS``, ...) are set, and
``sysconfig.get_config_var("prefix")`` answers the laid-out prefix (conda rewrites it to the env's).
Inductor's ``cpp_builder.get_cpp_torch_device_options("cuda")`` (the same wheel's code) then runs
with its configuration stubbed and the patched functions as ``torch.utils.cpp_extension``.

Without the patch's CUDA lines the CUDA dirs are missing (``nvcc``'s prefix, ``CUDA_HOME``, names
neither ``targets/`` nor ``Library``); the C++ part (libtorch's headers) is checked too.
"""

from __future__ import annotations

import ast
import glob
import os
import subprocess
import sys
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from feedstock import patch_check
from feedstock.paths import RECIPE
from megabuild import model
from megabuild.buildenv.cuda import target_dir

pytestmark = pytest.mark.slow  # may fetch the real macOS arm64 wheel (127 MB) once

PATCH = next((RECIPE / "patches").glob("0004-cpp_extension-*.patch"), None)
CPP_EXTENSION = "torch/utils/cpp_extension.py"
CPP_BUILDER = "torch/_inductor/cpp_builder.py"
# the functions of cpp_extension.py this test runs (the rest needs a working torch)
FUNCTIONS = ("_conda_prefix_dir", "_conda_cuda_dirs", "include_paths", "library_paths", "_join_cuda_home")
# (platform, arm variant) of every Linux CUDA build: each has its own targets/ directory
LINUX_CUDA = [("linux-64", None), ("linux-aarch64", model.SBSA.name), ("linux-aarch64", model.TEGRA.name)]


@pytest.fixture(scope="module")
def wheel_files() -> dict[str, str]:
    try:
        path = patch_check.download_wheel(patch_check.DEFAULT_PLATFORM)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} macOS wheel not reachable on PyPI: {exc}")
    with zipfile.ZipFile(path) as zf:
        return {name: zf.read(name).decode("utf-8") for name in (CPP_EXTENSION, CPP_BUILDER)}


def patched(text: str, root: Path, patch: Path) -> str:
    """``text`` (the wheel's cpp_extension.py) with ``patch`` applied by ``patch -p1 --fuzz=0``."""
    target = root / CPP_EXTENSION
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    proc = subprocess.run(
        ["patch", "-p1", "--fuzz=0", "--no-backup-if-mismatch", "-i", str(patch)],
        cwd=root, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return target.read_text()


def functions(source: str, names: tuple[str, ...]) -> str:
    """The source of the module-level functions ``names`` that ``source`` defines."""
    tree = ast.parse(source)
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    return "\n\n".join(ast.get_source_segment(source, n) or "" for n in found)


def cpp_extension(source: str, prefix: Path, *, windows: bool = False) -> types.ModuleType:
    """The patched functions of ``source`` as a module whose globals describe a conda env at
    ``prefix`` with pytorch's package in its site-packages and nvcc in its ``bin`` (CUDA_HOME)."""
    module = types.ModuleType("torch.utils.cpp_extension")
    sysconfig = types.SimpleNamespace(get_config_var=lambda name: str(prefix) if name == "prefix" else None)
    sp_torch = prefix / "lib" / "python3.12" / "site-packages" / "torch"
    module.__dict__.update(
        os=os, glob=glob, sysconfig=sysconfig, IS_WINDOWS=windows, IS_HIP_EXTENSION=False,
        CUDA_HOME=str(prefix / "Library" if windows else prefix), CUDNN_HOME=None,
        _TORCH_PATH=str(sp_torch), TORCH_LIB_PATH=str(sp_torch / "lib"),
    )  # fmt: skip
    exec(compile(functions(source, FUNCTIONS), CPP_EXTENSION, "exec"), module.__dict__)
    return module


def conda_prefix(root: Path, target: str | None) -> Path:
    """A pytorch env: libtorch's headers in ``include`` (Windows: ``Library/include``), site-packages
    without them, and (Linux, ``target``) the CUDA packages' ``targets/<target>`` layout."""
    prefix = root / "env"
    include = prefix / ("include" if target else "Library/include")
    (include / "torch/csrc/api/include/torch").mkdir(parents=True)
    (prefix / "lib/python3.12/site-packages/torch/include").mkdir(parents=True)
    (prefix / "lib/python3.12/site-packages/torch/lib").mkdir(parents=True)
    if target is not None:
        for sub in ("include", "lib/stubs"):
            (prefix / "targets" / target / sub).mkdir(parents=True)
        (prefix / "targets" / target / "include/cuda_runtime_api.h").touch()
        (prefix / "targets" / target / "lib/stubs/libcuda.so").touch()
    else:  # Windows: the CUDA packages' headers next to libtorch's
        (include / "cuda_runtime_api.h").touch()
        (prefix / "Library/lib").mkdir(parents=True)
    return prefix


@pytest.mark.parametrize(("platform", "arm_variant"), LINUX_CUDA)
def test_linux_cuda_extension_finds_the_targets_headers_and_stubs(
    wheel_files: dict[str, str], tmp_path: Path, platform: str, arm_variant: str | None
) -> None:
    assert PATCH is not None, "recipe/patches/0004-cpp_extension-*.patch is missing"
    target = target_dir(platform, arm_variant)
    prefix = conda_prefix(tmp_path, target)
    ext = cpp_extension(patched(wheel_files[CPP_EXTENSION], tmp_path / "src", PATCH), prefix)
    include = ext.include_paths("cuda")
    print(f"\n{platform} {arm_variant or ''}: include_paths('cuda') = {include}")
    # libtorch's headers (the C++ part), then the CUDA headers where conda-forge's CUDA packages put them
    assert str(prefix / "include") in include and str(prefix / "include/torch/csrc/api/include") in include
    assert str(prefix / "targets" / target / "include") in include, include
    cuda_include = str(prefix / "targets" / target / "include")
    assert include.index(str(prefix / "include")) < include.index(cuda_include)
    libs = ext.library_paths("cuda")
    assert str(prefix / "targets" / target / "lib/stubs") in libs, libs  # -lcuda links the driver stub
    assert str(prefix / "targets" / target / "include") not in ext.include_paths("cpu")
    assert not [p for p in ext.library_paths("cpu") if "targets" in p]


def test_windows_cuda_extension_finds_library_include_and_lib(
    wheel_files: dict[str, str], tmp_path: Path
) -> None:
    """Windows: libtorch's headers and the CUDA packages' are in %PREFIX%\\Library\\include."""
    assert PATCH is not None
    prefix = conda_prefix(tmp_path, None)
    ext = cpp_extension(patched(wheel_files[CPP_EXTENSION], tmp_path / "src", PATCH), prefix, windows=True)
    include = ext.include_paths("cuda")
    print(f"\nwin-64: include_paths('cuda') = {include}")
    assert str(prefix / "Library/include") in include, include
    assert str(prefix / "Library/include/torch/csrc/api/include") in include, include
    assert str(prefix / "Library/lib") in ext.library_paths("cuda")


def _stub_modules(ext: types.ModuleType) -> dict[str, types.ModuleType]:
    """``torch``, ``torch.utils`` and ``torch.version`` for cpp_builder's ``from torch.utils import
    cpp_extension``: the patched functions as ``torch.utils.cpp_extension``, a CUDA build."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch.utils")
    utils.cpp_extension = ext  # type: ignore[attr-defined]
    torch.utils = utils  # type: ignore[attr-defined]
    torch.version = types.SimpleNamespace(hip=None, cuda="13.0")  # type: ignore[attr-defined]
    return {"torch": torch, "torch.utils": utils, "torch.utils.cpp_extension": ext}


def device_options(builder_source: str, ext: types.ModuleType) -> Callable[..., Any]:
    """cpp_builder's ``get_cpp_torch_device_options`` (the wheel's code) with its configuration
    stubbed: no fbcode, libtorch linked, no cross target, no custom op libraries."""
    config = types.SimpleNamespace(
        is_fbcode=lambda: False,
        aot_inductor=types.SimpleNamespace(link_libtorch=True, cross_target_platform=None, custom_op_libs=[]),
    )
    namespace: dict[str, Any] = {
        "os": os, "Path": Path, "config": config, "torch": _stub_modules(ext)["torch"],
        "_set_gpu_runtime_env": lambda: None, "build_paths": None,
    }  # fmt: skip
    source = functions(builder_source, ("get_cpp_torch_device_options", "_transform_cuda_paths"))
    exec(compile(source, CPP_BUILDER, "exec"), namespace)
    return namespace["get_cpp_torch_device_options"]  # type: ignore[no-any-return]


def test_inductor_cuda_options_take_the_targets_dirs(
    wheel_files: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inductor's C++ wrapper for CUDA (cpp_builder) takes its include and library dirs from the
    patched cpp_extension: the targets' headers, and the stub for its ``-lcuda``."""
    assert PATCH is not None
    target = target_dir("linux-64")
    prefix = conda_prefix(tmp_path, target)
    ext = cpp_extension(patched(wheel_files[CPP_EXTENSION], tmp_path / "src", PATCH), prefix)
    for name, module in _stub_modules(ext).items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    options = device_options(wheel_files[CPP_BUILDER], ext)("cuda")
    _, include_dirs, _, _, libraries_dirs, libraries, _ = options
    print(f"\ninclude_dirs={include_dirs}\nlibraries_dirs={libraries_dirs}\nlibraries={libraries}")
    assert str(prefix / "targets" / target / "include") in include_dirs
    assert "cuda" in libraries and str(prefix / "targets" / target / "lib/stubs") in libraries_dirs
