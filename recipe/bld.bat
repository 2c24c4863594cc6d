@echo on
setlocal
@REM The environment of every build step on Windows (top level and each pytorch output), then
@REM the same `python -m megabuild build` steps as build.sh. PyTorch 2.14's EnvVarForwarding.cmake
@REM writes every USE_*/BUILD_*/CMAKE_* variable into the cache on each configure, and the pytorch
@REM step refuses an environment that differs from the top level's: set them all, in every step.
@REM No sed and no inline programs: cache edits and the split go through `python -m megabuild`.

echo Building %PKG_NAME% %PKG_VERSION% (python %PY_VER%, cuda %cuda_compiler_version%, blas %blas_impl%)
echo megabuild: %megabuild%

@REM ---- compiler cache (local builds only: FEEDSTOCK_COMPILER_CACHE, see build-locally.py) ----
if defined FEEDSTOCK_COMPILER_CACHE (
    set "SCCACHE_DIR=%FEEDSTOCK_COMPILER_CACHE%"
    set "CMAKE_C_COMPILER_LAUNCHER=sccache"
    set "CMAKE_CXX_COMPILER_LAUNCHER=sccache"
    set "CMAKE_CUDA_COMPILER_LAUNCHER=sccache"
    sccache --start-server
)

@REM ---- CMake: MSVC (vs2022 activation) with Ninja, conda's Library layout ----
set "CMAKE_GENERATOR=Ninja"
set "CMAKE_GENERATOR_TOOLSET="
set "CMAKE_GENERATOR_PLATFORM="
set "CMAKE_BUILD_TYPE=Release"
set "CMAKE_PREFIX_PATH=%LIBRARY_PREFIX%"
set "CMAKE_INCLUDE_PATH=%LIBRARY_INC%"
set "CMAKE_LIBRARY_PATH=%LIBRARY_LIB%"
set "Python_ROOT_DIR=%PREFIX%"
set "libuv_ROOT=%LIBRARY_PREFIX%"
set "DISTUTILS_USE_SDK=1"

@REM ---- compile jobs: 16-CPU runners, but MSVC + nvcc run out of memory above 4 jobs ----
set "MAX_JOBS=%CPU_COUNT%"
if "%CI%" == "github_actions" set "MAX_JOBS=4"
echo compile jobs: MAX_JOBS=%MAX_JOBS% (CPU_COUNT=%CPU_COUNT%, CI=%CI%)

@REM ---- the same PyTorch options as build.sh, where they apply on Windows ----
set "PYTORCH_BUILD_VERSION=%PKG_VERSION%"
set "PYTORCH_BUILD_NUMBER=0"
set "PACKAGE_TYPE=conda"
set "BUILD_TEST=0"
set "INSTALL_TEST=0"
set "PYTORCH_BLAS_USE_CBLAS_DOT=ON"
set "USE_SYSTEM_SLEEF=1"
set "USE_SYSTEM_PYBIND11=1"
set "USE_SYSTEM_EIGEN_INSTALL=1"
set "BUILD_CUSTOM_PROTOBUF=OFF"
set "USE_LITE_PROTO=ON"
set "USE_MKLDNN=1"
set "USE_KINETO=1"
set "USE_DISTRIBUTED=1"
set "USE_GLOO=1"
set "USE_MPI=0"
set "USE_NUMA=0"
set "USE_ITT=0"
set "USE_NNPACK=1"
set "USE_PYTORCH_QNNPACK=1"
set "USE_FBGEMM=1"
set "USE_XNNPACK=0"
set "USE_OPENMP=ON"

if "%blas_impl%" == "mkl" (
    set "BLAS=MKL"
) else (
    echo bld.bat: unsupported blas_impl '%blas_impl%' on Windows ^(MKL only^) 1>&2
    exit 1
)

if "%cuda_compiler_version%" == "None" goto :cpu
set "USE_CUDA=1"
set "USE_CUDNN=1"
set "USE_CUSPARSELT=1"
@REM no NCCL on Windows (distributed uses gloo over libuv)
set "USE_NCCL=0"
set "USE_STATIC_NCCL=0"
set "USE_STATIC_CUDNN=0"
set "USE_SYSTEM_NVTX=1"
set "USE_CUFILE=0"
set "CUDA_VERSION=%cuda_compiler_version%"
@REM no lazy linalg library on Windows (BUILD_LAZY_CUDA_LINALG is Linux only): torch_cuda.dll links MAGMA
set "USE_MAGMA=1"
set "MAGMA_HOME=%LIBRARY_PREFIX%"
set "CUDNN_INCLUDE_DIR=%LIBRARY_INC%"
set "CMAKE_ARGS=%CMAKE_ARGS% -DCUDAToolkit_ROOT=%LIBRARY_PREFIX% -DCUDAToolkit_ROOT_DIR=%LIBRARY_PREFIX% -DCUDA_TOOLKIT_ROOT_DIR=%LIBRARY_PREFIX% -DCUDAToolkit_BIN_DIR=%BUILD_PREFIX%\Library\bin"
set "TORCH_NVCC_FLAGS=-Xfatbin -compress-all"
set "CMAKE_CUDA_FLAGS=-w -Xptxas -w"
if "%cuda_compiler_version%" == "12.9" (
    set "TORCH_CUDA_ARCH_LIST=5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX"
) else if "%cuda_compiler_version%" == "13.0" (
    set "TORCH_CUDA_ARCH_LIST=7.5;8.0;8.6;9.0;10.0;12.0+PTX"
    set "TORCH_NVCC_FLAGS=-Xfatbin -compress-all -compress-mode=size"
) else (
    echo bld.bat: no CUDA architecture list for CUDA %cuda_compiler_version% on Windows 1>&2
    exit 1
)
goto :step

:cpu
set "USE_CUDA=0"
set "USE_MAGMA=0"
set "TORCH_CUDA_ARCH_LIST="
@REM environment variables are case-insensitive on Windows, and CUDA_* would be forwarded
set "CUDA_VERSION="

:step
if "%PKG_NAME%" == "libtorch-split" (
    set "STEP=top-level"
) else if "%PKG_NAME%" == "pytorch" (
    set "STEP=pytorch"
) else (
    echo bld.bat: unexpected PKG_NAME '%PKG_NAME%' ^(libtorch-split or pytorch^) 1>&2
    exit 1
)
set "PYTHONPATH=%RECIPE_DIR%"
"%PREFIX%\python.exe" -m megabuild build %STEP%
if errorlevel 1 exit 1
