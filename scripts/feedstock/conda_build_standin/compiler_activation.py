"""What conda-forge's compiler activation exports into a conda-build script, per platform.

conda-build activates the build env (where the compiler packages live, so ``CONDA_PREFIX`` is
``$BUILD_PREFIX``) with ``CONDA_BUILD=1`` before the script runs; the activation scripts of the
compiler packages then set ``CMAKE_ARGS``, ``CFLAGS`` & co. Reproduced here from the real scripts:

* Linux, ``conda-forge/ctng-compiler-activation-feedstock`` ``recipe/activate-gcc.sh`` (CFLAGS,
  CPPFLAGS, LDFLAGS, CMAKE_ARGS, CMAKE_PREFIX_PATH, HOST, ...) and ``recipe/activate-g++.sh``
  (CXXFLAGS), with the flag values of ``recipe/build_scripts.sh`` (``FINAL_*_linux_64``; gcc >= 11
  drops ``-std=c++17``) and ``@AR@``/``@RANLIB@`` = ``<triplet>-gcc-ar``/``-gcc-ranlib``. The gcc
  activation *sets* CMAKE_ARGS (whatever was there before is replaced), including
  ``-DCMAKE_FIND_ROOT_PATH=$PREFIX;$BUILD_PREFIX/<triplet>/sysroot`` and the find-root modes
  ``PROGRAM=NEVER``, ``LIBRARY=ONLY``, ``INCLUDE=ONLY``.
* CUDA, ``conda-forge/cuda-nvcc-feedstock`` ``recipe/activate.sh`` (installed as
  ``etc/conda/activate.d/~cuda-nvcc_activate.sh``, so it runs after the compilers): *appends* a
  second ``-DCMAKE_FIND_ROOT_PATH=`` (``$PREFIX;$BUILD_PREFIX/$HOST/sysroot;$PREFIX/<targets>;``
  ``$BUILD_PREFIX/<targets>``; CMake uses the last) and ``-I``/``-L`` flags for the CUDA targets dir.
* macOS, ``conda-forge/clang-compiler-activation-feedstock`` ``recipe/activate-clang.sh``: no
  find-root settings at all (``CMAKE_FIND_FRAMEWORK=LAST``/``CMAKE_FIND_APPBUNDLE=LAST``).

The harness uses :func:`activation_env` for its linux-64 runs; :func:`cmake_args` also gives the
other platforms' shapes for unit tests.

:func:`run_activation_scripts` is what ``conda activate`` / ``conda deactivate`` do with the
packages' own scripts (conda's ``activate.py``, ``_get_activate_scripts``): source every
``$CONDA_PREFIX/etc/conda/activate.d/*.sh`` in sorted order (deactivation: ``deactivate.d/*.sh``,
reverse sorted) in the activating shell, with ``CONDA_PREFIX`` set.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

TRIPLETS = {
    "linux-64": "x86_64-conda-linux-gnu",
    "linux-aarch64": "aarch64-conda-linux-gnu",
    "osx-64": "x86_64-apple-darwin13.4.0",
    "osx-arm64": "arm64-apple-darwin20.0.0",
}
# cuda-nvcc's targetsDir per cross_target_platform
CUDA_TARGETS = {"linux-64": "targets/x86_64-linux", "linux-aarch64": "targets/sbsa-linux"}

# recipe/build_scripts.sh, FINAL_*_linux_64 / _linux_aarch64 (CXXFLAGS without -std=c++17: gcc >= 11)
_CFLAGS = {
    "linux-64": "-march=nocona -mtune=haswell -ftree-vectorize -fPIC -fstack-protector-strong -fno-plt "
    "-O2 -ffunction-sections -pipe",
    "linux-aarch64": "-ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O3 -pipe",
}
_CXXFLAGS = {
    "linux-64": "-fvisibility-inlines-hidden -fmessage-length=0 -march=nocona -mtune=haswell "
    "-ftree-vectorize -fPIC -fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe",
    "linux-aarch64": "-fvisibility-inlines-hidden -fmessage-length=0 -ftree-vectorize -fPIC "
    "-fstack-protector-strong -fno-plt -O3 -pipe",
}
_LDFLAGS = {
    "linux-64": "-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now "
    "-Wl,--disable-new-dtags -Wl,--gc-sections -Wl,--allow-shlib-undefined",
    "linux-aarch64": "-Wl,-O2 -Wl,--sort-common -Wl,--as-needed -Wl,-z,relro -Wl,-z,now "
    "-Wl,--allow-shlib-undefined",
}
_CPPFLAGS = "-DNDEBUG -D_FORTIFY_SOURCE=2 -O2"
# build-env tools the Linux CMAKE_ARGS name: <triplet>-<tool> -> the tool to stand in for it
BINUTILS = {"ar": "ar", "gcc-ar": "gcc-ar", "ranlib": "ranlib", "gcc-ranlib": "gcc-ranlib", "ld": "ld",
            "strip": "strip"}  # fmt: skip
# the compilers the activation names in CC and CXX (gcc_linux-64, gxx_linux-64): <triplet>-<name>
COMPILERS = {"CC": ("gcc", "gcc"), "CXX": ("c++", "c++")}


def cmake_args(
    target_platform: str,
    prefix: Path | str,
    build_prefix: Path | str,
    *,
    cuda: bool = False,
    cross: bool = False,
    host_has_python: bool = True,
) -> str:
    """``$CMAKE_ARGS`` after the activation of the compilers (and nvcc when ``cuda``)."""
    p, b = str(prefix), str(build_prefix)
    host = TRIPLETS[target_platform]
    if target_platform.startswith("linux-"):
        tool = f"{b}/bin/{host}"
        args = [
            f"-DCMAKE_AR={tool}-ar",
            f"-DCMAKE_CXX_COMPILER_AR={tool}-gcc-ar",
            f"-DCMAKE_C_COMPILER_AR={tool}-gcc-ar",
            f"-DCMAKE_RANLIB={tool}-ranlib",
            f"-DCMAKE_CXX_COMPILER_RANLIB={tool}-gcc-ranlib",
            f"-DCMAKE_C_COMPILER_RANLIB={tool}-gcc-ranlib",
            f"-DCMAKE_LINKER={tool}-ld",
            f"-DCMAKE_STRIP={tool}-strip",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCMAKE_FIND_ROOT_PATH_MODE_PROGRAM=NEVER",
            "-DCMAKE_FIND_ROOT_PATH_MODE_LIBRARY=ONLY",
            "-DCMAKE_FIND_ROOT_PATH_MODE_INCLUDE=ONLY",
            f"-DCMAKE_FIND_ROOT_PATH={p};{b}/{host}/sysroot",
            f"-DCMAKE_INSTALL_PREFIX={p}",
            "-DCMAKE_INSTALL_LIBDIR=lib",
            f"-DCMAKE_PROGRAM_PATH={b}/bin;{p}/bin",
        ]
        if host_has_python:  # conda-forge/cmake-feedstock#196: prefer the host env's Python
            args.append("-DCMAKE_POLICY_DEFAULT_CMP0094=NEW")
        if cross:
            args += ["-DCMAKE_SYSTEM_NAME=Linux", f"-DCMAKE_SYSTEM_PROCESSOR={host.split('-')[0]}"]
        value = " ".join(args)
        if cuda:
            targets = CUDA_TARGETS[target_platform]
            value += f" -DCMAKE_FIND_ROOT_PATH={p};{b}/{host}/sysroot;{p}/{targets};{b}/{targets}"
        return value
    if target_platform.startswith("osx-"):
        if cuda:
            raise ValueError("no CUDA on macOS")
        tool = f"{b}/bin/{host}"
        args = [
            f"-DCMAKE_AR={tool}-ar",
            f"-DCMAKE_CXX_COMPILER_AR={tool}-ar",
            f"-DCMAKE_C_COMPILER_AR={tool}-ar",
            f"-DCMAKE_RANLIB={tool}-ranlib",
            f"-DCMAKE_CXX_COMPILER_RANLIB={tool}-ranlib",
            f"-DCMAKE_C_COMPILER_RANLIB={tool}-ranlib",
            f"-DCMAKE_LINKER={tool}-ld",
            f"-DCMAKE_STRIP={tool}-strip",
            f"-DCMAKE_INSTALL_NAME_TOOL={tool}-install_name_tool",
            f"-DCMAKE_LIBTOOL={tool}-libtool",
            "-DCMAKE_OSX_DEPLOYMENT_TARGET=11.0",
            "-DCMAKE_BUILD_TYPE=Release",
            "-DCMAKE_FIND_FRAMEWORK=LAST",
            "-DCMAKE_FIND_APPBUNDLE=LAST",
            f"-DCMAKE_INSTALL_PREFIX={p}",
            "-DCMAKE_INSTALL_LIBDIR=lib",
            f"-DCMAKE_PROGRAM_PATH={b}/bin;{p}/bin",
        ]
        if cross:
            machine, release = ("arm64", "20.0.0") if target_platform == "osx-arm64" else ("x86_64", "13.4.0")
            args += ["-DCMAKE_SYSTEM_NAME=Darwin", f"-DCMAKE_SYSTEM_PROCESSOR={machine}",
                     f"-DCMAKE_SYSTEM_VERSION={release}"]  # fmt: skip
        return " ".join(args)
    raise ValueError(f"no activation model for {target_platform}")


def activation_env(
    target_platform: str,
    *,
    prefix: Path,
    build_prefix: Path,
    src_dir: Path,
    pkg_name: str,
    pkg_version: str,
    cuda: bool,
) -> dict[str, str]:
    """The variables the Linux compiler activation (and nvcc's when ``cuda``) exports for one script."""
    if target_platform not in _CFLAGS:
        raise ValueError(f"no activation model for {target_platform}")
    p, b = str(prefix), str(build_prefix)
    host = TRIPLETS[target_platform]
    # -fdebug-prefix-map carries PKG_NAME: the flags differ per output, as in conda-build
    debug_map = (
        f"-fdebug-prefix-map={src_dir}=/usr/local/src/conda/{pkg_name}-{pkg_version} "
        f"-fdebug-prefix-map={p}=/usr/local/src/conda-prefix"
    )
    cflags = f"{_CFLAGS[target_platform]} -fno-merge-constants -isystem {p}/include {debug_map}"
    cxxflags = f"{_CXXFLAGS[target_platform]} -fno-merge-constants -isystem {p}/include {debug_map}"
    cppflags = f"{_CPPFLAGS} -isystem {p}/include"
    ldflags = f"{_LDFLAGS[target_platform]} -Wl,-rpath,{p}/lib -Wl,-rpath-link,{p}/lib -L{p}/lib"
    if cuda:
        targets = CUDA_TARGETS[target_platform]
        cuda_cflags = " ".join(
            f"-I{root}/{targets}/include{sub}" for root in (p, b) for sub in ("", "/cccl")
        )  # order as in activate.sh: PREFIX, PREFIX/cccl, BUILD_PREFIX, BUILD_PREFIX/cccl
        cuda_ldflags = " ".join(f"-L{root}/{targets}/lib{sub}" for root in (p, b) for sub in ("", "/stubs"))
        cflags, cppflags, cxxflags = (f"{v} {cuda_cflags}" for v in (cflags, cppflags, cxxflags))
        ldflags = f"{ldflags} {cuda_ldflags}"
    return {
        # full paths into the build env, as the activation exports them: CMake records that path
        # (CMAKE_CXX_COMPILER; PyTorch's build settings carry it)
        **{var: f"{b}/bin/{host}-{name}" for var, (name, _tool) in COMPILERS.items()},
        "HOST": host,
        "BUILD": host,
        "CONDA_TOOLCHAIN_HOST": host,
        "CONDA_TOOLCHAIN_BUILD": host,
        "build_alias": host,
        "host_alias": host,
        "CFLAGS": cflags,
        "CXXFLAGS": cxxflags,
        "CPPFLAGS": cppflags,
        "LDFLAGS": ldflags,
        "CMAKE_PREFIX_PATH": f"{p}:{b}/{host}/sysroot/usr",
        "CONDA_BUILD_SYSROOT": f"{b}/{host}/sysroot",
        "MESON_ARGS": f"-Dbuildtype=release --prefix={p} -Dlibdir=lib",
        "CMAKE_ARGS": cmake_args(
            target_platform, prefix, build_prefix, cuda=cuda, host_has_python=(prefix / "bin/python").exists()
        ),
    }


# cuda-nvcc_linux-64 13.0.88's activation: CUDAARCHS for conda-build (its DEFAULT_CUDAARCHS on linux-64)
NVCC_DEFAULT_CUDAARCHS = {
    "linux-64": "75-real;80-real;86-real;89-real;90a-real;100f-real;103f-real;120a-real;121f-real;"
    "121-virtual",
}


def nvcc_env(target_platform: str, *, prefix: Path, cxx: str) -> dict[str, str]:
    """What cuda-nvcc's activation adds once a real nvcc is in the build env: ``-ccbin`` before and
    the host env's targets dir after nvcc's own flags, and the default ``CUDAARCHS`` (which CMake
    takes as ``CMAKE_CUDA_ARCHITECTURES`` unless the project decides itself, as PyTorch does). It
    exports no ``CUDA_HOME``/``CUDA_PATH``; ``CFLAGS``/``LDFLAGS``/``CMAKE_ARGS``: :func:`activation_env`."""
    targets = f"{prefix}/{CUDA_TARGETS[target_platform]}"
    return {
        "NVCC_PREPEND_FLAGS": f" -ccbin={cxx}",
        "NVCC_PREPEND_FLAGS_BACKUP": "UNSET",
        "NVCC_APPEND_FLAGS": f" -I{targets}/include -L{targets}/lib -L{targets}/lib/stubs",
        "CUDAARCHS": NVCC_DEFAULT_CUDAARCHS[target_platform],
        "CUDAARCHS_BACKUP": "UNSET",
    }


def install_binutils(build_prefix: Path, target_platform: str) -> list[str]:
    """Put ``<triplet>-ar`` & co. (as CMAKE_ARGS names them) and the compilers (``<triplet>-gcc``,
    ``<triplet>-c++``, as CC and CXX name them) into the build env, as symlinks to the tools on
    PATH; returns the names that have no tool here (their CMAKE_ARGS entries dangle, which only
    matters for static libraries)."""
    missing = []
    bindir = build_prefix / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    for suffix, tool in [*BINUTILS.items(), *COMPILERS.values()]:
        link = bindir / f"{TRIPLETS[target_platform]}-{suffix}"
        found = shutil.which(tool)
        if found is None:
            missing.append(link.name)
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.realpath(found))
    return missing


# what a shell sets by itself; not an effect of the scripts
_SHELL_OWN = ("PWD", "OLDPWD", "SHLVL", "_")


def run_activation_scripts(
    prefix: Path, env: Mapping[str, str], *, deactivate: bool = False, shell: str = "bash"
) -> dict[str, str]:
    """``env`` after ``shell`` (``bash``, ``dash``, ``zsh``: conda's posix activator) sourced the
    env's ``activate.d`` (or ``deactivate.d``) ``*.sh`` scripts as conda does. ``CONDA_PREFIX`` is
    set while they run, stays set after an activation and is removed by a deactivation; a script
    that fails raises."""
    kind = "deactivate" if deactivate else "activate"
    folder = prefix / "etc" / "conda" / f"{kind}.d"
    scripts = sorted((str(p) for p in folder.glob("*.sh")), reverse=deactivate) if folder.is_dir() else []
    run_env = {**env, "CONDA_PREFIX": str(prefix)}
    # set -u: a script must not rely on an unset variable expanding to nothing
    program = 'set -eu; for script in "$@"; do . "$script"; done; env -0'
    proc = subprocess.run(
        [shell, "-c", program, shell, *scripts], env=run_env, capture_output=True, timeout=60, check=False
    )
    if proc.returncode != 0:
        error = proc.stderr.decode(errors="replace")
        raise RuntimeError(f"{kind} scripts {scripts} failed in {shell}: {error}")
    after = dict(item.split("=", 1) for item in proc.stdout.decode().split("\0") if "=" in item)
    for name in _SHELL_OWN:
        after.pop(name, None)
        if name in run_env:
            after[name] = run_env[name]
    if deactivate:  # conda unsets it after the scripts (a stacked env's comes back: not modelled)
        after.pop("CONDA_PREFIX", None)
    return after
