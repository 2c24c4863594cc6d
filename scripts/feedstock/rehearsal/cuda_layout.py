"""NVIDIA's CUDA runtime wheels laid out where conda-forge's CUDA packages put their files.

conda-forge's ``cuda-cudart``, ``libcublas``, ``libcudnn``, ``nccl``, ... install their libraries
into ``$PREFIX/lib`` and the toolkit's headers and tools (``cuda-nvcc``, ``*-dev``) under
``$PREFIX/targets/x86_64-linux``. The wheels keep them in ``site-packages/nvidia/<lib>/``; left
there, the recipe's CMake consumer test configures and compiles but does not link: upstream's
RPATH ``$ORIGIN/../../nvidia/...`` leads nowhere from ``$PREFIX/lib``, where libtorch lives.
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path, PurePosixPath

from feedstock.cuda_packages import NVCC_PROFILE

TARGET_DIR = "targets/x86_64-linux"  # conda-forge's CUDA layout on linux-64


def destination(member: str) -> str | None:
    """Where a member of an ``nvidia-*`` wheel goes in the env, or ``None`` (not a CUDA file)."""
    parts = PurePosixPath(member).parts
    if len(parts) < 4 or parts[0] != "nvidia":
        return None
    kind, rest = parts[2], parts[3:]  # nvidia/<cu13|cudnn|nccl|...>/<lib|include|bin|nvvm>/...
    if kind == "lib":
        return "/".join(("lib", *rest))
    if kind == "include":
        return "/".join((TARGET_DIR, "include", *rest))
    if kind in ("bin", "nvvm"):  # cuda-nvcc's $PREFIX/bin/nvcc finds cicc in $PREFIX/nvvm
        return "/".join((kind, *rest))
    return None


def lay_out(wheels: list[Path], prefix: Path) -> int:
    """Unpack the CUDA files of ``wheels`` into ``prefix``; returns the bytes written. The toolkit
    dir gets ``lib`` (a link to ``$PREFIX/lib``) and ``lib64`` (nvcc.profile's name) as conda's has."""
    written = 0
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                dest = destination(info.filename)
                if dest is None or info.is_dir():
                    continue
                target = prefix / dest
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(info))
                if info.external_attr >> 16 & 0o111:
                    target.chmod(0o755)
                written += info.file_size
    _links(prefix)
    return written


def _links(prefix: Path) -> None:
    lib = prefix / "lib"
    toolkit = prefix / TARGET_DIR
    toolkit.mkdir(parents=True, exist_ok=True)
    for name in ("lib", "lib64"):
        if not os.path.lexists(toolkit / name):
            (toolkit / name).symlink_to(os.path.relpath(lib, toolkit))
    # cicc where conda-forge's nvcc.profile looks for it ($(TOP)/nvvm, TOP being the targets dir)
    if (prefix / "nvvm").is_dir() and not os.path.lexists(toolkit / "nvvm"):
        (toolkit / "nvvm").symlink_to(os.path.relpath(prefix / "nvvm", toolkit))
    profile = prefix / "bin" / "nvcc.profile"
    if profile.parent.is_dir() and (profile.parent / "nvcc").exists():
        # conda-forge's cuda-nvcc-impl patches the profile so that TOP is the env's targets dir: the
        # wheel's own (TOP = $PREFIX) would send nvcc and CMake's FindCUDAToolkit to
        # $PREFIX/include, where conda's CUDA packages put no header
        if profile.is_symlink() or profile.exists():
            profile.unlink()
        profile.write_text(NVCC_PROFILE)
    # the unversioned names a `-dev` package adds (CMake's FindCUDAToolkit links them)
    for versioned in sorted(lib.glob("lib*.so.*")):
        plain = lib / (versioned.name.split(".so.")[0] + ".so")
        if not os.path.lexists(plain):
            plain.symlink_to(versioned.name)
