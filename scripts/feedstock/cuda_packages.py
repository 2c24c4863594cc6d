"""conda-forge's CUDA packages, as the harness's toolchain and the rehearsal lay them out."""

from __future__ import annotations

# conda-forge's cuda-nvcc-impl patches nvcc.profile so that TOP is the targets dir of the env
# nvcc lives in (recipe/nvcc.profile.patch); these are the values it ends up with.
NVCC_PROFILE = """
TOP              = $(_HERE_)/../$(_TARGET_DIR_)

CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice

LD_LIBRARY_PATH += $(TOP)/lib:
PATH            += $(TOP)/bin:$(CICC_PATH):$(TOP)/../../bin:$(TOP)/../../$(_NVVM_BRANCH_)/bin:

INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/include/cccl" $(_SPACE_)

LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib/stubs" "-L$(TOP)/lib"

CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
"""
