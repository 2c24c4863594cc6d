@echo on
setlocal
@REM The environment of every build step on Windows (top level and each pytorch output), then
@REM the same `python -m megabuild build` steps as build.sh. PyTorch 2.14's EnvVarForwarding.cmake
@REM writes every USE_*/BUILD_*/CMAKE_* variable into the cache on each configure, and the pytorch
@REM step refuses an environment that differs from the top level's: `megabuild env` gives the same
@REM environment to every step, and to build.sh (recipe/megabuild/buildenv).
@REM No sed and no inline programs: cache edits and the split go through `python -m megabuild`.

@REM `megabuild env` reads the variant keys cuda_compiler_version and blas_impl (and target_platform,
@REM which conda-build always counts) from the environment; conda-build counts a key as used by
@REM the output only where the script names it as %key% (tests/test_render_used_vars.py): this line
@REM is that use.
echo Building %PKG_NAME% %PKG_VERSION% (python %PY_VER%, cuda %cuda_compiler_version%, blas %blas_impl%)

@REM ---- the build environment: PyTorch's switches, BLAS, CUDA, MAX_JOBS, CMake's paths ----
@REM `set "K=V"` lines, applied by FOR /F after cmd's expansion passes, so a value stays literal.
@REM Through a file: FOR /F over a command would not see the command fail (unknown platform, CUDA
@REM version or BLAS: one error line and exit status 1, which stop the build here).
set "PYTHONPATH=%RECIPE_DIR%"
"%PREFIX%\python.exe" -m megabuild env --shell cmd > "%SRC_DIR%\_megabuild_env.cmd"
if errorlevel 1 exit 1
for /f "usebackq delims=" %%L in ("%SRC_DIR%\_megabuild_env.cmd") do %%L
echo compile jobs: MAX_JOBS=%MAX_JOBS% (CPU_COUNT=%CPU_COUNT%, CI=%CI%)

if "%PKG_NAME%" == "libtorch-split" (
    set "STEP=top-level"
) else if "%PKG_NAME%" == "pytorch" (
    set "STEP=pytorch"
) else (
    echo bld.bat: unexpected PKG_NAME '%PKG_NAME%' ^(libtorch-split or pytorch^) 1>&2
    exit 1
)
@REM The step runs inside the compiler cache a local build names (FEEDSTOCK_COMPILER_CACHE, ...), as
@REM build.sh's: a cache it cannot use is one warning, never a failed build (megabuild.compiler_cache).
"%PREFIX%\python.exe" -m megabuild build %STEP%
if errorlevel 1 exit 1
