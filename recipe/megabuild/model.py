"""What the feedstock produces: the one place that names its outputs and their variants.

Every other module reads these names from here; ``recipe/meta.yaml`` (which conda-build reads, and
which cannot import Python) is the only other place that spells them, and a test keeps it equal to
this module. Per-platform facts join this model as typed descriptions (issue 31).
"""

from __future__ import annotations

import enum

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
