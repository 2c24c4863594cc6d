"""CUDA architectures and nvcc flags per CUDA version and platform.

Architectures as in upstream's wheels of the same CUDA version (``.ci/manywheel/build_cuda.sh``;
aarch64: ``.ci/aarch64_linux/aarch64_ci_build.sh``); conda-forge adds PTX for the newest
architecture so that future GPUs can JIT-compile the kernels. The Tegra build (linux-aarch64,
``arm_variant_type: tegra``) is for Jetson Orin only, as conda-forge's: upstream publishes no
Tegra wheels.
"""

from __future__ import annotations

from megabuild import model
from megabuild.errors import MegabuildError

ARCH_LISTS = {
    ("12.6", "linux-64"): "5.0;6.0;7.0;7.5;8.0;8.6;9.0+PTX",
    ("12.6", "linux-aarch64"): "8.0;9.0+PTX",
    ("12.9", "win-64"): "5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    ("13.0", "linux-64"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
    # upstream's aarch64 cu130 wheels: A100, Grace Hopper, Blackwell (10.0, 12.0) and Thor (11.0);
    # plus Jetson Orin (8.7), SBSA-compliant from CUDA 13 on (JetPack 7), as conda-forge's 13.0 build
    ("13.0", "linux-aarch64"): "8.0;8.7;9.0;10.0;11.0;12.0+PTX",
    ("13.0", "win-64"): "7.5;8.0;8.6;9.0;10.0;12.0+PTX",
}
"""TORCH_CUDA_ARCH_LIST per (cuda_compiler_version, target_platform)."""
TEGRA_ARCH_LISTS = {
    # Jetson Orin only: Thor and later need CUDA 13, whose SBSA build covers them
    "12.9": "8.7+PTX",
}
"""TORCH_CUDA_ARCH_LIST of the linux-aarch64 Tegra build per cuda_compiler_version."""

# where conda-forge's CUDA packages put a platform's headers and libraries: $PREFIX/targets/<dir>;
# linux-aarch64's is its arm variant's (megabuild.model.ArmVariant)
TARGET_DIRS = {"linux-64": "x86_64-linux"}

FATBIN_FLAGS = "-Xfatbin -compress-all"
# CUDA 13's fatbinary compresses for size on request: libtorch_cuda's .nv_fatbin is most of it
SIZE_COMPRESSION = "-compress-mode=size"
SIZE_COMPRESSION_FROM_MAJOR = 13
# device code warnings: thousands of lines per architecture, none actionable here
CUDA_FLAGS = "-w -Xptxas -w"


def cuda_arch_list(cuda_version: str, target_platform: str, arm_variant: str | None = None) -> str:
    """TORCH_CUDA_ARCH_LIST for ``cuda_version`` on ``target_platform`` (and its arm variant),
    e.g. ``"7.5;8.0;8.6;9.0;10.0;12.0+PTX"`` for ``("13.0", "linux-64")``."""
    tegra = arm_variant == model.TEGRA.name
    lists = TEGRA_ARCH_LISTS if tegra else {v: a for (v, p), a in ARCH_LISTS.items() if p == target_platform}
    try:
        return lists[cuda_version]
    except KeyError:
        where = f"{target_platform} ({arm_variant})" if arm_variant else target_platform
        raise MegabuildError(f"env: no CUDA architecture list for CUDA {cuda_version} on {where}") from None


def _major(cuda_version: str) -> int:
    try:
        return int(cuda_version.split(".")[0])
    except ValueError:
        raise MegabuildError(f"env: cuda_compiler_version {cuda_version!r} is not a CUDA version") from None


def nvcc_flags(cuda_version: str) -> str:
    """TORCH_NVCC_FLAGS: compressed fatbinaries (for size from CUDA 13 on)."""
    if _major(cuda_version) >= SIZE_COMPRESSION_FROM_MAJOR:
        return f"{FATBIN_FLAGS} {SIZE_COMPRESSION}"
    return FATBIN_FLAGS


def target_dir(target_platform: str, arm_variant: str | None = None) -> str:
    """The CUDA packages' ``targets/<dir>`` of a Linux platform (``x86_64-linux``; linux-aarch64:
    ``sbsa-linux`` or, for Tegra, ``aarch64-linux``)."""
    if arm_variant is not None:
        return model.arm_variant(arm_variant).cuda_target_dir
    try:
        return TARGET_DIRS[target_platform]
    except KeyError:
        raise MegabuildError(f"env: no CUDA target directory for {target_platform}") from None
