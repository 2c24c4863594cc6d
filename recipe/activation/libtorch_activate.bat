@REM libtorch (CUDA): CF_TORCH_CUDA_ARCH_LIST names the CUDA architectures this libtorch was
@REM built for, so that an extension package builds for the same ones:
@REM     set "TORCH_CUDA_ARCH_LIST=%CF_TORCH_CUDA_ARCH_LIST%"
@REM A value already set wins; CF_TORCH_CUDA_ARCH_LIST_BACKUP=NOT_SET tells the deactivation
@REM script that this script set it. No comment inside the block (cmd parses it as one line).
@REM `megabuild activation-scripts` fills in the list (recipe/megabuild/buildenv/activation.py).
@if not defined CF_TORCH_CUDA_ARCH_LIST (
    set "CF_TORCH_CUDA_ARCH_LIST=@CF_TORCH_CUDA_ARCH_LIST@"
    set "CF_TORCH_CUDA_ARCH_LIST_BACKUP=NOT_SET"
)
