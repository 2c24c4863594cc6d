# libtorch (CUDA): removes CF_TORCH_CUDA_ARCH_LIST only if libtorch_activate.sh set it.
if [ "${CF_TORCH_CUDA_ARCH_LIST_BACKUP:-}" = NOT_SET ]; then
    unset CF_TORCH_CUDA_ARCH_LIST CF_TORCH_CUDA_ARCH_LIST_BACKUP
fi
