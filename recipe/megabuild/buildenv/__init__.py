"""The build environment of every build step, defined once as a typed function of the target.

``recipe/build.sh`` and ``recipe/bld.bat`` take it from ``python -m megabuild env --shell sh|cmd``
(:mod:`megabuild.buildenv.cli`): PyTorch's USE_* switches, BLAS, the CUDA switches, the CUDA
architecture lists and nvcc flags per CUDA version and platform, MAX_JOBS and the CMake/packaging
variables. PyTorch 2.14's ``EnvVarForwarding.cmake`` copies every ``BUILD_*``/``USE_*``/``CMAKE_*``
variable into the cache on each configure, so this environment depends on the target only, never
on the output or the Python being built.

- :mod:`megabuild.buildenv.target`: the target (platform, CUDA, BLAS, cores) and the locations,
  resolved once from conda-build's environment;
- :mod:`megabuild.buildenv.cuda`: architectures and nvcc flags per CUDA version and platform;
- :mod:`megabuild.buildenv.environment`: the whole environment;
- :mod:`megabuild.buildenv.shell`: ``export K='V'`` (sh) and ``set "K=V"`` (cmd) lines;
- :mod:`megabuild.buildenv.activation`: the CUDA libtorch's activation scripts, which export the
  same architecture list as ``CF_TORCH_CUDA_ARCH_LIST``.
"""

from __future__ import annotations

from megabuild.buildenv.cuda import cuda_arch_list, nvcc_flags
from megabuild.buildenv.environment import build_environment, switches
from megabuild.buildenv.target import (
    BuildTarget,
    Locations,
    locations_from_environment,
    target_from_environment,
)

__all__ = [
    "BuildTarget",
    "Locations",
    "build_environment",
    "cuda_arch_list",
    "locations_from_environment",
    "nvcc_flags",
    "switches",
    "target_from_environment",
]
