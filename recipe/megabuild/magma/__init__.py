"""The MAGMA variant of libtorch_cuda_linalg, from the linalg target's own objects and one link.

Flipping USE_MAGMA in the cache regenerates ATen/cuda/CUDAConfig.h, which the reduction, scan,
sort and jiterator kernels of torch_cuda include: a whole-tree rebuild for every CUDA
architecture. Instead, :mod:`.replay` re-runs only the linalg target's compile commands (taken
from the nomagma build's Ninja graph) with a MAGMA-enabled copy of the config header in front,
plus its link command with libmagma, into a separate directory. The build tree, its cache and
libtorch_cuda stay as the nomagma build left them.
"""
