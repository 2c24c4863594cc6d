#!/usr/bin/env bash
# Provision CUDA 13.0's compiler for the real-nvcc tests (tests/support/cuda.py finds it).
#
# pip-downloads NVIDIA's CUDA 13.0 wheels (nvidia-cuda-nvcc, -nvvm, -crt, -runtime, -cccl and
# -cuobjdump; about 105 MB) into the shared wheel cache (~/.cache/pytorch-feedstock/wheels/
# manylinux_2_17_x86_64, or $PYTORCH_FEEDSTOCK_WHEEL_CACHE) and unpacks them into
# ~/.cache/pytorch-feedstock/cuda-toolchain/<release> (scripts/feedstock/conda_build_standin/cuda_toolchain.py); both
# only when missing. Prints the toolchain's directory on stdout. Idempotent: a second run
# downloads nothing and only prints the path.
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m feedstock.conda_build_standin.cuda_toolchain
