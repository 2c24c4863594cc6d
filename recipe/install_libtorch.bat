@echo on
@REM Script of the libtorch output: one pipeline call (recipe/megabuild/pipeline/description.py)
@REM that moves libtorch's staged files into %PREFIX% (conda's Library layout: split_spec.json's
@REM "install_roots" for win).
set "PYTHONPATH=%RECIPE_DIR%"
"%BUILD_PREFIX%\python.exe" -m megabuild build %PKG_NAME%
if errorlevel 1 exit 1
