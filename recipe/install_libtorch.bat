@echo on
@REM libtorch's files, staged by the top-level build (bld.bat), into %PREFIX%: DLLs and
@REM executables to Library\bin, import libraries to Library\lib, headers to Library\include,
@REM CMake config to Library\share (recipe/split_spec.json: "install_roots" for win).
set "PYTHONPATH=%RECIPE_DIR%"
"%BUILD_PREFIX%\python.exe" -m megabuild split install libtorch --staging "%SRC_DIR%\_megabuild\staging" --prefix "%PREFIX%" --target-platform %target_platform%
if errorlevel 1 exit 1
