"""The environment recipe/build.sh hands to PyTorch's build (scikit-build-core, CMake), for real configs.

build.sh is run for real (bash, the recipe's own helpers) with conda-build's variables for a
rendered config, up to the point where it would start the build: an unknown PKG_NAME makes it
exit there, and an EXIT trap records what it exported. The activation's CMAKE_ARGS are those of
conda-forge's compiler packages (see tests/harness/activation.py when present).
"""

from __future__ import annotations

import os
import shlex
import shutil
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
    from feedstock.conda_build_standin.compiler_activation import cmake_args

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
    exported = run_build_sh(
        tmp_path, target_platform=target, cuda_compiler_version="12.6", blas_impl="generic"
    )
    prefix = exported["PREFIX"]
    args = exported["CMAKE_ARGS"].split()
    assert f"-DCUDAToolkit_ROOT={prefix}" in args and f"-DCUDAToolkit_ROOT_DIR={prefix}" in args, args
    assert f"-DCUDAToolkit_BIN_DIR={exported['BUILD_PREFIX']}/bin" in args, args
    assert f"-DCUDAToolkit_TARGET_DIR={prefix}/targets/{targets_dir}" in args, args


# -- megabuild.buildenv: the one definition, and both scripts taking it ---------------------------

UPSTREAM_ARCHES = {
    # upstream's wheels of the same CUDA version, with PTX for the newest (docs/packages.md)
    ("12.6", "linux-64"): "5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX",
    ("12.6", "linux-aarch64"): "8.0;9.0+PTX",
    ("12.9", "win-64"): "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("13.0", "linux-64"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    # conda-forge adds Jetson Orin (8.7): SBSA-compliant from CUDA 13 on, no Tegra build covers it
    ("13.0", "linux-aarch64"): "8.0;8.7;9.0;10.0;11.0;12.0+PTX",
    ("13.0", "win-64"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}
TEGRA_ARCHES = {"12.9": "8.7+PTX"}  # Jetson Orin only, as conda-forge's Tegra build


def _win_env(tmp_path: Path, **env: str) -> dict[str, str]:
    """conda-build's variables of a win-64 build (paths on this machine, written Windows-style)."""
    prefix = str(tmp_path / "prefix")
    base = {
        "PATH": os.environ["PATH"], "PREFIX": prefix, "BUILD_PREFIX": str(tmp_path / "build_env"),
        "SRC_DIR": str(tmp_path), "RECIPE_DIR": str(RECIPE), "PKG_NAME": "env-probe",
        "PKG_VERSION": "2.14.1", "PY_VER": "3.12", "CPU_COUNT": "16", "target_platform": "win-64",
        "cuda_compiler_version": "None", "blas_impl": "mkl",
        "LIBRARY_PREFIX": prefix + "\\Library",
        "LIBRARY_INC": prefix + "\\Library\\include", "LIBRARY_LIB": prefix + "\\Library\\lib",
        "CMAKE_ARGS": "-DCMAKE_BUILD_TYPE=Release",
    }  # fmt: skip
    base.update(env)
    return base


def run_bld_bat(tmp_path: Path, recipe: Path = RECIPE, **env: str) -> dict[str, str]:
    from support.bld_bat import run_bld_bat as interpret

    run = interpret(recipe / "bld.bat", _win_env(tmp_path, RECIPE_DIR=str(recipe), **env))
    assert run.exit_code is None, run.stderr
    return run.env


@pytest.mark.parametrize(("cuda", "platform"), sorted(UPSTREAM_ARCHES))
def test_cuda_arch_list(cuda: str, platform: str) -> None:
    from megabuild.buildenv import cuda_arch_list

    assert cuda_arch_list(cuda, platform) == UPSTREAM_ARCHES[(cuda, platform)]


@pytest.mark.parametrize(
    ("target", "cuda", "flags", "targets_dir"),
    [("linux-64", "12.6", "-Xfatbin -compress-all", "x86_64-linux"),
     ("linux-64", "13.0", "-Xfatbin -compress-all -compress-mode=size", "x86_64-linux"),
     ("linux-aarch64", "13.0", "-Xfatbin -compress-all -compress-mode=size", "sbsa-linux")],
)  # fmt: skip
def test_cuda_environment_of_build_sh(
    tmp_path: Path, target: str, cuda: str, flags: str, targets_dir: str
) -> None:
    exported = run_build_sh(tmp_path, target_platform=target, cuda_compiler_version=cuda, blas_impl="generic")
    assert exported["TORCH_CUDA_ARCH_LIST"] == UPSTREAM_ARCHES[(cuda, target)]
    assert exported["TORCH_NVCC_FLAGS"] == flags
    assert exported["CMAKE_CUDA_FLAGS"] == "-w -Xptxas -w"
    assert (exported["USE_CUDA"], exported["USE_MAGMA"], exported["CUDA_VERSION"]) == ("1", "0", cuda)
    assert exported.get("USE_PRIORITIZED_TEXT_FOR_LD") == ("1" if target == "linux-aarch64" else None)
    assert exported["CMAKE_ARGS"].endswith(f"/targets/{targets_dir}")


@pytest.mark.parametrize("cuda", sorted(TEGRA_ARCHES))
def test_tegra_environment_of_build_sh(tmp_path: Path, cuda: str) -> None:
    """linux-aarch64 with arm_variant_type=tegra: Orin's architecture, the Tegra CUDA target dir."""
    exported = run_build_sh(
        tmp_path, target_platform="linux-aarch64", cuda_compiler_version=cuda, blas_impl="generic",
        arm_variant_type="tegra",
    )  # fmt: skip
    assert exported["TORCH_CUDA_ARCH_LIST"] == TEGRA_ARCHES[cuda]
    assert exported["CMAKE_ARGS"].endswith(
        f"-DCUDAToolkit_TARGET_DIR={exported['PREFIX']}/targets/aarch64-linux"
    )
    sbsa = run_build_sh(
        tmp_path / "sbsa", target_platform="linux-aarch64", cuda_compiler_version="13.0",
        blas_impl="generic", arm_variant_type="sbsa",
    )  # fmt: skip
    assert sbsa["CMAKE_ARGS"].endswith("/targets/sbsa-linux")


@pytest.mark.parametrize(
    ("target", "switched"),
    [("linux-64", {"USE_FBGEMM": "1", "USE_MKLDNN": "1", "USE_XNNPACK": "0"}),
     ("linux-aarch64", {"USE_FBGEMM": "0", "USE_XNNPACK": "1", "USE_BREAKPAD": "0"}),
     # MPS: upstream's default (on) on Apple silicon; off on Intel Macs, where the Objective-C++
     # MPS sources would see another DispatchStub layout (buildenv/environment.py)
     ("osx-arm64", {"USE_FBGEMM": "0", "USE_MKLDNN": "0", "USE_XNNPACK": "1", "USE_MPS": None}),
     ("osx-64", {"USE_FBGEMM": "1", "USE_MKLDNN": "1", "USE_XNNPACK": "0", "USE_MPS": "0"})],
)  # fmt: skip
def test_platform_switches_of_build_sh(tmp_path: Path, target: str, switched: dict[str, str]) -> None:
    exported = run_build_sh(tmp_path, target_platform=target, blas_impl="generic")
    assert {k: exported.get(k) for k in switched} == switched
    assert (exported["USE_CUDA"], exported["TORCH_CUDA_ARCH_LIST"], exported["BLAS"]) == ("0", "", "Generic")


def test_bld_bat_environment(tmp_path: Path) -> None:
    """bld.bat applies `megabuild env --shell cmd`: Windows' switches, MAGMA linked into torch_cuda."""
    cpu = run_bld_bat(tmp_path)
    assert (cpu["USE_CUDA"], cpu["BLAS"], cpu["USE_LITE_PROTO"], cpu["USE_OPENMP"]) == (
        "0",
        "MKL",
        "ON",
        "ON",
    )
    assert "TORCH_CUDA_ARCH_LIST" not in cpu and "CUDA_VERSION" not in cpu  # `set "K="` removes K
    assert cpu["CMAKE_PREFIX_PATH"] == cpu["LIBRARY_PREFIX"] and cpu["PYTORCH_BUILD_VERSION"] == "2.14.1"
    cuda = run_bld_bat(tmp_path, cuda_compiler_version="13.0", CI="github_actions")
    assert cuda["TORCH_CUDA_ARCH_LIST"] == UPSTREAM_ARCHES[("13.0", "win-64")]
    assert (cuda["USE_MAGMA"], cuda["USE_NCCL"], cuda["MAX_JOBS"]) == ("1", "0", "4")
    assert cuda["TORCH_NVCC_FLAGS"] == "-Xfatbin -compress-all -compress-mode=size"
    assert cuda["CMAKE_ARGS"].endswith(f" -DCUDAToolkit_BIN_DIR={cuda['BUILD_PREFIX']}\\Library\\bin")
    assert "USE_SYSTEM_NCCL" not in cuda and "_GLIBCXX_USE_CXX11_ABI" not in cuda


def test_a_planted_change_reaches_both_scripts(tmp_path: Path) -> None:
    """One definition: an architecture dropped and a switch flipped in megabuild.buildenv (in a
    copy of the recipe) show up in build.sh's and in bld.bat's environment alike."""
    recipe = tmp_path / "recipe"
    shutil.copytree(RECIPE, recipe, ignore=shutil.ignore_patterns("__pycache__"))
    cuda_py = recipe / "megabuild" / "buildenv" / "cuda.py"
    cuda_py.write_text(
        cuda_py.read_text().replace('"7.5;8.0;8.6;9.0;10.0;12.0+PTX"', '"8.0;8.6;9.0;10.0;12.0+PTX"')
    )
    env_py = recipe / "megabuild" / "buildenv" / "environment.py"
    env_py.write_text(env_py.read_text().replace('"USE_KINETO": "1"', '"USE_KINETO": "0"'))
    sh = run_build_sh(
        tmp_path / "sh", RECIPE_DIR=str(recipe), target_platform="linux-64", cuda_compiler_version="13.0"
    )
    bat = run_bld_bat(tmp_path, recipe, cuda_compiler_version="13.0")
    for exported in (sh, bat):
        assert exported["TORCH_CUDA_ARCH_LIST"] == "8.0;8.6;9.0;10.0;12.0+PTX"
        assert exported["USE_KINETO"] == "0"


@pytest.mark.parametrize(
    ("variables", "message"),
    [({"target_platform": "linux-ppc64le"}, "unsupported target_platform 'linux-ppc64le'"),
     ({"cuda_compiler_version": "11.8"}, "no CUDA architecture list for CUDA 11.8 on linux-64"),
     ({"blas_impl": "openblas"}, "unsupported blas_impl 'openblas' on linux-64"),
     ({"target_platform": "linux-aarch64", "blas_impl": "mkl"},
      "unsupported blas_impl 'mkl' on linux-aarch64"),
     ({"target_platform": "linux-aarch64", "blas_impl": "generic", "cuda_compiler_version": "12.6",
       "arm_variant_type": "tegra"}, "the tegra arm variant builds CUDA 12.9 only, not 12.6"),
     ({"target_platform": "linux-aarch64", "blas_impl": "generic", "arm_variant_type": "orin"},
      "arm_variant_type 'orin' is not one the feedstock builds (sbsa, tegra)")],
)  # fmt: skip
def test_build_sh_stops_on_an_unknown_target(tmp_path: Path, variables: dict[str, str], message: str) -> None:
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PREFIX": sys.prefix, "SRC_DIR": str(tmp_path),
            "RECIPE_DIR": str(RECIPE), "PKG_NAME": "pytorch", "PKG_VERSION": "2.14.1",
            "target_platform": "linux-64", "cuda_compiler_version": "None", "blas_impl": "mkl",
            **variables}  # fmt: skip
    proc = subprocess.run(["bash", str(BUILD_SH)], env=base, capture_output=True, text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode == 1 and len(errors) == 1, proc.stderr
    assert errors[0].startswith(f"megabuild: error: env: {message}"), proc.stderr
    assert "Traceback" not in proc.stderr and "-m megabuild build" not in proc.stdout


def test_bld_bat_stops_on_an_unknown_target(tmp_path: Path) -> None:
    from support.bld_bat import run_bld_bat as interpret

    run = interpret(RECIPE / "bld.bat", _win_env(tmp_path, cuda_compiler_version="12.6"))
    assert run.exit_code == 1
    assert run.stderr == "megabuild: error: env: no CUDA architecture list for CUDA 12.6 on win-64\n"
    assert "USE_CUDA" not in run.env, "nothing applied from a failed run"


AWKWARD = 'it\'s a "path" with $HOME, `cmd`, \\back\\slash, %PATH%, !x!, & | < > ^ (;) and  two spaces'


def test_sh_lines_keep_every_character(tmp_path: Path) -> None:
    from megabuild.buildenv.shell import render

    values = {"A": AWKWARD, "EMPTY": "", "MULTI": "line one\nline two", "Q": "'"}
    script = render(values, "sh") + 'printf "%s\\0" "$A" "$EMPTY" "$MULTI" "$Q"'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    assert proc.stdout.split("\0")[:-1] == list(values.values())


def test_cmd_lines_keep_every_character(tmp_path: Path) -> None:
    from megabuild.buildenv.shell import render
    from support.bld_bat import SET, apply_set

    env: dict[str, str] = {"GONE": "x"}
    for line in render({"A": AWKWARD, "GONE": ""}, "cmd").splitlines():
        match = SET.match(line)
        assert match, line
        apply_set(match[1], env)
    assert env == {"A": AWKWARD}


def test_cmd_refuses_what_a_line_cannot_carry() -> None:
    from megabuild.buildenv.shell import render
    from megabuild.errors import MegabuildError

    with pytest.raises(MegabuildError, match="line break"):
        render({"A": "one\ntwo"}, "cmd")
    with pytest.raises(MegabuildError, match="not a variable name"):
        render({"A B": "x"}, "sh")
