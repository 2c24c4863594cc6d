"""The environment recipe/build.sh hands to PyTorch's build (scikit-build-core, CMake), for real configs.

build.sh is run for real (bash, the recipe's own helpers) with conda-build's variables for a
rendered config, up to the point where it would start the build: an unknown PKG_NAME makes it
exit there, and an EXIT trap records what it exported. The activation's CMAKE_ARGS are those of
conda-forge's compiler packages (see tests/harness/activation.py when present).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.paths import RECIPE

BUILD_SH = RECIPE / "build.sh"


def run_build_sh(tmp_path: Path, **env: str) -> dict[str, str]:
    """Source build.sh with ``env`` (plus conda-build's basics) and return what it exported."""
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True, exist_ok=True)
    python = prefix / "bin" / "python"
    if not python.exists():
        python.symlink_to(sys.executable)
    build_prefix = tmp_path / "build_env"
    (build_prefix / "bin").mkdir(parents=True, exist_ok=True)
    src = tmp_path / "work"
    src.mkdir(exist_ok=True)
    base = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "PREFIX": str(prefix),
        "BUILD_PREFIX": str(build_prefix),
        "SRC_DIR": str(src),
        "RECIPE_DIR": str(RECIPE),
        "PKG_NAME": "env-probe",  # not a known name: build.sh stops before building
        "PKG_VERSION": "2.13.0",
        "PY_VER": "3.12",
        "SP_DIR": str(prefix / "lib" / "python3.12" / "site-packages"),
        "SHLIB_EXT": ".so",
        "CPU_COUNT": "4",
        "target_platform": "linux-64",
        "build_platform": "linux-64",
        "cuda_compiler_version": "None",
        "blas_impl": "mkl",
        "megabuild": "true",
        "CFLAGS": "-O2",
        "CXXFLAGS": "-O2 -std=c++17",
        "LDFLAGS": "-Wl,-O2 -Wl,--as-needed -Wl,-z,now",
        "CMAKE_ARGS": f"-DCMAKE_INSTALL_PREFIX={prefix} -DCMAKE_FIND_ROOT_PATH={prefix}",
    }
    base.update(env)
    out = tmp_path / "exported.env"
    script = f"trap 'env -0 > {shlex.quote(str(out))}' EXIT; source {shlex.quote(str(BUILD_SH))}"
    proc = subprocess.run(["bash", "-c", script], env=base, capture_output=True, text=True)
    assert "unexpected PKG_NAME 'env-probe'" in proc.stderr, proc.stdout + proc.stderr
    pairs = (item.split("=", 1) for item in out.read_text().split("\0") if "=" in item)
    return dict(pairs)


@pytest.mark.parametrize(
    ("cpu_count", "ci", "expected"),
    [
        ("16", "github_actions", "8"),  # conda-forge's 16-vCPU runners: capped
        ("4", "github_actions", "4"),  # never more than the cores
        ("16", "", "16"),  # build-locally.py's --cpu-count decides
        ("32", "", "32"),
    ],
)
def test_compile_jobs(tmp_path: Path, cpu_count: str, ci: str, expected: str) -> None:
    env = {"CPU_COUNT": cpu_count}
    if ci:
        env["CI"] = ci
    assert run_build_sh(tmp_path, **env)["MAX_JOBS"] == expected


def test_no_use_system_switch_that_2_13_does_not_have(tmp_path: Path) -> None:
    """USE_SYSTEM_* switches of PyTorch 2.13.0's CMakeLists.txt / setup.py. USE_SYSTEM_FMT came
    later (pytorch#166824): exported without a backport it silently does nothing."""
    known = {
        "USE_SYSTEM_LIBS", "USE_SYSTEM_CPUINFO", "USE_SYSTEM_SLEEF", "USE_SYSTEM_GLOO",
        "USE_SYSTEM_FP16", "USE_SYSTEM_PYBIND11", "USE_SYSTEM_PTHREADPOOL", "USE_SYSTEM_PSIMD",
        "USE_SYSTEM_FXDIV", "USE_SYSTEM_BENCHMARK", "USE_SYSTEM_ONNX", "USE_SYSTEM_XNNPACK",
        "USE_SYSTEM_NCCL", "USE_SYSTEM_NVTX", "USE_SYSTEM_EIGEN_INSTALL", "USE_SYSTEM_UCC",
    }  # fmt: skip
    for cuda in ("None", "12.6"):
        exported = run_build_sh(tmp_path, cuda_compiler_version=cuda)
        switches = {k for k, v in exported.items() if k.startswith("USE_SYSTEM_") and v not in ("", "0")}
        assert switches, "build.sh exports no USE_SYSTEM_* at all?"
        assert switches <= known, sorted(switches - known)


def _cmake_defines(cmake_args: str) -> list[tuple[str, str]]:
    return [tuple(a[2:].split("=", 1)) for a in shlex.split(cmake_args) if a.startswith("-D") and "=" in a]


@pytest.mark.parametrize(
    ("target", "cuda", "cross"),
    [("linux-64", "None", False), ("linux-64", "12.6", False), ("linux-aarch64", "12.6", True),
     ("linux-aarch64", "13.0", True), ("osx-arm64", "None", False), ("osx-64", "None", True)],
)  # fmt: skip
def test_cmake_args_from_the_real_activation(tmp_path: Path, target: str, cuda: str, cross: bool) -> None:
    """What conda-forge's compiler (and nvcc) activation exported, after build.sh: the source
    tree is a find root wherever there are roots (third_party lookups), NNPACK does not download
    six, and a cross build runs the build machine's protoc."""
    from harness.activation import cmake_args

    prefix, build_prefix = tmp_path / "prefix", tmp_path / "build_env"
    activated = cmake_args(target, prefix, build_prefix, cuda=cuda != "None", cross=cross)
    exported = run_build_sh(
        tmp_path,
        target_platform=target,
        # conda-forge.yml: osx-64 is cross-compiled on osx-arm64, linux-aarch64 on linux-64
        build_platform="osx-arm64" if target.startswith("osx") else "linux-64",
        cuda_compiler_version=cuda,
        blas_impl="generic",
        CMAKE_ARGS=activated,
    )
    defines = _cmake_defines(exported["CMAKE_ARGS"])
    roots = [v for k, v in defines if k == "CMAKE_FIND_ROOT_PATH"]
    assert len(roots) == activated.count("-DCMAKE_FIND_ROOT_PATH="), defines
    assert all(exported["SRC_DIR"] in r.split(";") for r in roots), roots
    # this Python's six dir is a scikit-build-core setting (megabuild), not in CMAKE_ARGS, which
    # EnvVarForwarding copies into the cache and so must be the same for every Python
    assert not [k for k, _ in defines if k == "PYTHON_SIX_SOURCE_DIR"], defines
    protoc = [v for k, v in defines if k == "CAFFE2_CUSTOM_PROTOC_EXECUTABLE"]
    assert protoc == ([f"{build_prefix}/bin/protoc"] if cross else []), protoc


def test_generic_blas_is_the_netlib_interface(tmp_path: Path) -> None:
    """conda-forge's generic BLAS has no library named openblas (BLAS=OpenBLAS fails configure)."""
    exported = run_build_sh(tmp_path, blas_impl="generic")
    assert exported["BLAS"] == "Generic"
    assert "OpenBLAS_HOME" not in exported
    assert exported["PYTORCH_BLAS_USE_CBLAS_DOT"] == "ON"
    assert run_build_sh(tmp_path, blas_impl="mkl")["BLAS"] == "MKL"


@pytest.mark.parametrize(
    ("target", "targets_dir"), [("linux-64", "x86_64-linux"), ("linux-aarch64", "sbsa-linux")]
)
def test_cuda_toolkit_locations(tmp_path: Path, target: str, targets_dir: str) -> None:
    """nvcc in BUILD_PREFIX, libraries and headers in PREFIX: -D options in CMAKE_ARGS, since
    2.14's EnvVarForwarding.cmake forwards no CUDAToolkit_* variable (patch 0008 lets them win)."""
    exported = run_build_sh(tmp_path, target_platform=target, cuda_compiler_version="12.6")
    prefix = exported["PREFIX"]
    args = exported["CMAKE_ARGS"].split()
    assert f"-DCUDAToolkit_ROOT={prefix}" in args and f"-DCUDAToolkit_ROOT_DIR={prefix}" in args, args
    assert f"-DCUDAToolkit_BIN_DIR={exported['BUILD_PREFIX']}/bin" in args, args
    assert f"-DCUDAToolkit_TARGET_DIR={prefix}/targets/{targets_dir}" in args, args
