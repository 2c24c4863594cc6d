@echo on
@REM Script of the libtorch output: one pipeline call (recipe/megabuild/pipeline/description.py)
@REM that moves libtorch's staged files into %PREFIX% (conda's Library layout: split_spec.json's
@REM "install_roots" for win), then (CUDA builds) the activation scripts that export the build's
@REM CF_TORCH_CUDA_ARCH_LIST (recipe/megabuild/buildenv/activation.py). `megabuild activation-scripts`
@REM reads the variant keys, which conda-build exports to a script that names them:
echo cuda %cuda_compiler_version%, blas %blas_impl%
set "PYTHONPATH=%RECIPE_DIR%"
"%BUILD_PREFIX%\python.exe" -m megabuild build %PKG_NAME%
if errorlevel 1 exit 1
"%BUILD_PREFIX%\python.exe" -m megabuild activation-scripts --prefix "%PREFIX%"
if errorlevel 1 exit 1
