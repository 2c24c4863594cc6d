# libtorch (CUDA): CF_TORCH_CUDA_ARCH_LIST names the CUDA architectures this libtorch was built
# for, so that an extension package builds for the same ones:
#     export TORCH_CUDA_ARCH_LIST="${CF_TORCH_CUDA_ARCH_LIST}"
# A value already set wins; CF_TORCH_CUDA_ARCH_LIST_BACKUP=NOT_SET tells the deactivation script
# that this script set it. POSIX sh: conda sources it in bash, zsh and dash alike.
# `megabuild activation-scripts` fills in the list (recipe/megabuild/buildenv/activation.py).
if [ -z "${CF_TORCH_CUDA_ARCH_LIST+set}" ]; then
    export CF_TORCH_CUDA_ARCH_LIST='@CF_TORCH_CUDA_ARCH_LIST@'
    export CF_TORCH_CUDA_ARCH_LIST_BACKUP=NOT_SET
fi
