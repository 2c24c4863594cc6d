"""What the feedstock produces: the one place that names its outputs and their variants.

Every other module reads these names from here; ``recipe/meta.yaml`` (which conda-build reads, and
which cannot import Python) is the only other place that spells them, and a test keeps it equal to
this module (tests/test_model.py).

The per-platform facts are one :class:`PlatformFacts` per conda target platform (:data:`PLATFORMS`):
shared-library suffixes, whether the lazy CUDA linalg library and link-back exist, what upstream's
wheel repair adds, and how upstream's wheels and this feedstock's listings name the platform. Where
``split install`` puts each file (``Library/`` on Windows) is file placement, like the split rules:
it stays data in ``recipe/split_spec.json`` (``install_roots``), read by ``megabuild.split.spec``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from megabuild.errors import MegabuildError

TOP_LEVEL = "libtorch-split"
"""The top-level build of meta.yaml: builds libtorch once; not a package."""
LIBTORCH = "libtorch"
"""C++ libraries, headers and CMake config."""
LINALG = "libtorch-cuda-linalg"
"""CUDA on Linux: the lazily loaded linear-algebra library, one package per :class:`LinalgVariant`."""
PYTORCH = "pytorch"
"""The torch Python package, one per Python."""
PYTORCH_CPU = "pytorch-cpu"
PYTORCH_GPU = "pytorch-gpu"
METAPACKAGES = (PYTORCH_CPU, PYTORCH_GPU)
"""Metapackages that force the CPU or the CUDA build."""


class LinalgVariant(enum.Enum):
    """The two builds of :data:`LINALG`; the value is the variant's name in build strings and staging."""

    MAGMA = "magma"
    NOMAGMA = "nomagma"

    @property
    def with_magma(self) -> str:
        """The value of conda-build's ``with_magma`` variant key for this variant."""
        return "true" if self is LinalgVariant.MAGMA else "false"

    @property
    def staged_name(self) -> str:
        """Where the top level stages this variant's files (``libtorch-cuda-linalg-magma``)."""
        return f"{LINALG}-{self.value}"

    @classmethod
    def from_with_magma(cls, value: str) -> LinalgVariant:
        """``with_magma`` as conda-build exports it (``true``/``false``) -> the variant."""
        for variant in cls:
            if variant.with_magma == value.strip().lower():
                return variant
        raise MegabuildError(f"with_magma must be true or false, got {value!r}")


DROPPED = "_dropped"
"""The split's name for files no package takes (staged under ``STAGING/_dropped``)."""


ARM_VARIANT_KEY = "arm_variant_type"
"""conda-forge's variant key for the two kinds of linux-aarch64 CUDA machines."""


@dataclass(frozen=True)
class ArmVariant:
    """A value of :data:`ARM_VARIANT_KEY`: which CUDA packages (and so which machines) a
    linux-aarch64 CUDA build is for. The recipe's ``arm-variant * <name>`` build requirement picks
    the CUDA packages of the variant and exports ``arm-variant * <name>`` to the packages, so a
    machine with the other variant installed never gets this build."""

    name: str
    cuda_target_dir: str
    """Where the variant's CUDA packages put headers and libraries: ``$PREFIX/targets/<dir>``."""
    cuda_versions: tuple[str, ...] = ()
    """The CUDA versions built for it; empty: every CUDA version of the platform."""
    c_stdlib_version: str = ""
    """The glibc its CUDA packages need, where that is above the CUDA version's own."""


SBSA = ArmVariant("sbsa", "sbsa-linux")
"""Server Base System Architecture (Grace Hopper, GB200, cloud aarch64): conda-forge's default."""
TEGRA = ArmVariant("tegra", "aarch64-linux", cuda_versions=("12.9",), c_stdlib_version="2.34")
"""Jetson Orin (sm_87, JetPack 6): CUDA 12 compiles Tegra as its own target, and conda-forge's
Tegra CUDA packages exist for 12.9 and need glibc 2.34. From CUDA 13.0 on Tegra devices (Thor,
Orin with JetPack 7) are SBSA-compliant: the sbsa 13.0 build covers them."""
ARM_VARIANTS = (SBSA, TEGRA)
ARM_VARIANT_NAMES = tuple(v.name for v in ARM_VARIANTS)
"""``arm_variant_type`` values, the default first."""


def arm_variant(name: str) -> ArmVariant:
    """The arm variant called ``name``; an unknown one is a one-line error."""
    for variant in ARM_VARIANTS:
        if variant.name == name:
            return variant
    known = ", ".join(ARM_VARIANT_NAMES)
    raise MegabuildError(f"{ARM_VARIANT_KEY} {name!r} is not one the feedstock builds ({known})")


MKL_BLAS, GENERIC_BLAS = "mkl", "generic"
BLAS_IMPLS = (MKL_BLAS, GENERIC_BLAS)
"""conda_build_config.yaml's ``blas_impl`` values: MKL, or the netlib-named libblas/libcblas/
liblapack that conda-forge can switch at install time."""


@dataclass(frozen=True)
class PlatformFacts:
    """What differs between the conda target platforms the feedstock builds."""

    subdir: str
    """conda's ``target_platform``: ``linux-64``."""
    shlib_globs: tuple[str, ...]
    """What ``{shlib}`` stands for in the split spec's patterns; the first is ``$SHLIB_EXT``."""
    lazy_linalg: bool
    """CUDA builds have the lazily loaded :data:`LINALG` library: a magma pass and a linalg package
    (``BUILD_LAZY_CUDA_LINALG`` is Linux only; torch_cuda.dll links MAGMA itself)."""
    symlinks: bool
    """The pytorch output links libtorch's files back into site-packages (no symlinks on Windows:
    torch adds ``Library\\bin`` to the DLL search path instead)."""
    pip_tag: str
    """``pip download --platform``, and the wheel cache's sub-directory."""
    listing_tag: str
    """The platform part of a listing's name: ``torch-<version>-cp312-<listing_tag>[-cu130]-files.tsv``."""
    wheel_repair: dict[str, str] = field(default_factory=dict)
    """Globs of files upstream's wheel repair copies into the wheel and a conda build never has
    (left out of the split), each with the reason."""
    stood_in_by: str = ""
    """Upstream publishes no wheel for it (osx-64: none since 2.3); this platform's stands in."""
    arm_variants: tuple[ArmVariant, ...] = ()
    """The :data:`ARM_VARIANT_KEY` values of the platform's CUDA builds, the default first (none:
    the platform has no such key)."""
    blas_impls: tuple[str, ...] = (GENERIC_BLAS,)
    """conda_build_config.yaml's ``blas_impl`` values here: MKL exists for x86_64 only, and
    conda-forge's pytorch builds only MKL on Windows (no OpenBLAS with OpenMP there)."""

    @property
    def family(self) -> str:
        """``linux``, ``osx`` or ``win``: what split rules' ``platforms`` lists name."""
        return self.subdir.split("-", 1)[0]

    @property
    def shlib_ext(self) -> str:
        """conda-build's ``$SHLIB_EXT``: ``.so``, ``.dylib``, ``.dll``."""
        return self.shlib_globs[0]

    @property
    def windows(self) -> bool:
        return self.family == "win"


_LINUX_SHLIB = (".so", ".so.*")  # libfoo.so and versioned names (libfoo.so.1, libfoo.so.2.14.1)
# libfoo.dylib and versioned names (libfoo.1.dylib): a literal '.' after the name, so
# lib/libtorch{shlib} never matches libtorch_cpu.dylib
_OSX_SHLIB = (".dylib", ".*.dylib")
# Files the repair step of upstream's aarch64 wheel build copies into torch/lib
# (.ci/aarch64_linux/aarch64_wheel_ci_build.py: update_wheel). A conda build never has them, so
# the split leaves them out of the tree; a real build that produced one must fail the strict lib/.
AARCH64_WHEEL_REPAIR = {
    "torch/lib/libgfortran.so.*": "GNU Fortran runtime of the bundled NVPL LAPACK; conda has libgfortran",
    "torch/lib/libnvpl_*.so.*": "NVIDIA Performance Libraries (BLAS/LAPACK); conda links libblas/liblapack",
    "torch/lib/libarm_compute*.so": "Arm Compute Library for oneDNN (USE_MKLDNN_ACL, not set by build.sh)",
}

PLATFORMS = (
    PlatformFacts(
        "linux-64", _LINUX_SHLIB, lazy_linalg=True, symlinks=True,
        pip_tag="manylinux_2_28_x86_64", listing_tag="linux_x86_64", blas_impls=BLAS_IMPLS,
    ),
    PlatformFacts(
        "linux-aarch64", _LINUX_SHLIB, lazy_linalg=True, symlinks=True,
        pip_tag="manylinux_2_28_aarch64", listing_tag="linux_aarch64", wheel_repair=AARCH64_WHEEL_REPAIR,
        arm_variants=ARM_VARIANTS,
    ),
    PlatformFacts(
        "osx-arm64", _OSX_SHLIB, lazy_linalg=False, symlinks=True,
        pip_tag="macosx_14_0_arm64", listing_tag="macosx_arm64",
    ),
    PlatformFacts(
        "osx-64", _OSX_SHLIB, lazy_linalg=False, symlinks=True,
        pip_tag="macosx_14_0_x86_64", listing_tag="macosx_x86_64", stood_in_by="osx-arm64",
        blas_impls=BLAS_IMPLS,
    ),
    PlatformFacts(
        "win-64", (".dll",), lazy_linalg=False, symlinks=False, pip_tag="win_amd64", listing_tag="win_amd64",
        blas_impls=(MKL_BLAS,),
    ),
)  # fmt: skip
"""Every platform the feedstock builds, with its facts."""


def platform(subdir: str) -> PlatformFacts:
    """The facts of conda target platform ``subdir``; an unknown one is a one-line error."""
    for facts in PLATFORMS:
        if facts.subdir == subdir:
            return facts
    known = ", ".join(p.subdir for p in PLATFORMS)
    raise MegabuildError(f"target platform {subdir!r} is not one the feedstock builds ({known})")


def families() -> dict[str, tuple[str, ...]]:
    """Platform family -> its shared-library globs (the split spec's ``{shlib}``)."""
    return {p.family: p.shlib_globs for p in PLATFORMS}
