@REM libtorch (CUDA): removes CF_TORCH_CUDA_ARCH_LIST only if libtorch_activate.bat set it.
@if "%CF_TORCH_CUDA_ARCH_LIST_BACKUP%" == "NOT_SET" (
    set "CF_TORCH_CUDA_ARCH_LIST="
    set "CF_TORCH_CUDA_ARCH_LIST_BACKUP="
)
