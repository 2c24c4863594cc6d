"""The platforms the recipe builds, as upstream's wheels and this feedstock's listings name them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError

# Files the repair step of upstream's aarch64 wheel build copies into torch/lib
# (.ci/aarch64_linux/aarch64_wheel_ci_build.py: update_wheel). A conda build never has them, so
# the split leaves them out of the tree; a real build that produced one must fail the strict lib/.
AARCH64_WHEEL_REPAIR = {
    "torch/lib/libgfortran.so.*": "GNU Fortran runtime of the bundled NVPL LAPACK; conda has libgfortran",
    "torch/lib/libnvpl_*.so.*": "NVIDIA Performance Libraries (BLAS/LAPACK); conda links libblas/liblapack",
    "torch/lib/libarm_compute*.so": "Arm Compute Library for oneDNN (USE_MKLDNN_ACL, not set by build.sh)",
}


@dataclass(frozen=True)
class Platform:
    subdir: str
    """conda's target_platform, as the split commands and .ci_support name it."""
    pip_tag: str
    """``pip download --platform``, and the cache sub-directory (tests/test_patches_wheel.py's)."""
    listing_tag: str
    """The platform part of a listing name: ``torch-<version>-cp312-<listing_tag>[-cu130]-files.tsv``."""
    shlib_ext: str
    stood_in_by: str = ""
    """Upstream may publish no wheel for it (osx-64: none since 2.3); then this platform's stands in."""
    not_in_conda_build: dict[str, str] = field(default_factory=dict)
    """Globs of wheel files a conda build never has (left out of the split), each with the reason."""


PLATFORMS = (
    Platform("linux-64", "manylinux_2_28_x86_64", "linux_x86_64", ".so"),
    Platform(
        "linux-aarch64",
        "manylinux_2_28_aarch64",
        "linux_aarch64",
        ".so",
        not_in_conda_build=AARCH64_WHEEL_REPAIR,
    ),
    Platform("osx-arm64", "macosx_14_0_arm64", "macosx_arm64", ".dylib"),
    Platform("osx-64", "macosx_14_0_x86_64", "macosx_x86_64", ".dylib", stood_in_by="osx-arm64"),
    Platform("win-64", "win_amd64", "win_amd64", ".dll"),
)
BY_NAME = {p.subdir: p for p in PLATFORMS}


def parse_platforms(text: str | None) -> tuple[Platform, ...]:
    """``linux-64,osx-arm64`` -> those platforms (all when ``None``); unknown names are bad input."""
    if text is None:
        return PLATFORMS
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise UsageError(
            f"--platforms: unknown platform(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(BY_NAME)}"
        )
    return tuple(BY_NAME[name] for name in dict.fromkeys(names))
