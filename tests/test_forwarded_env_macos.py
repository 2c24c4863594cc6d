"""On macOS too, every step forwards the same environment into the cache (EnvVarForwarding).

recipe/build.sh runs for real (tests/test_build_env.py's ``run_build_sh``) for each Python's
step of an osx-arm64 and an osx-64 (cross-compiled on osx-arm64) megabuild, with what
conda-build and the activations export for that step: conda-build's ``PY_VER``/``SP_DIR``;
conda-forge's clang activation (``CMAKE_ARGS`` from tests' harness/activation.py,
``MACOSX_DEPLOYMENT_TARGET``, ``CONDA_BUILD_SYSROOT``, ``_CONDA_PYTHON_SYSCONFIGDATA_NAME``);
and, on osx-64, cross-python's (conda-forge/cross-python-feedstock, activate-cross-python.sh:
``PYO3_CROSS_LIB_DIR``, ``PYO3_CROSS_PYTHON_VERSION``, ... and ``PYTHONPATH``, all naming the
step's Python). What megabuild's guard compares (``forwarded_env.forwarded``) must be the same in
every step, while the Python-dependent variables do differ: a naive step that put one of them
into a ``CMAKE_*`` variable (here ``CMAKE_PREFIX_PATH=$SP_DIR``) is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from feedstock.conda_build_standin.compiler_activation import cmake_args
from megabuild.errors import MegabuildError
from megabuild.pipeline import forwarded_env
from test_build_env import run_build_sh

PYTHONS = ("3.10", "3.12", "3.14")
TRIPLETS = {"osx-64": "x86_64-apple-darwin13.4.0", "osx-arm64": "arm64-apple-darwin20.0.0"}


def step_env(tmp_path: Path, target: str, py: str) -> dict[str, str]:
    """What build.sh exports in the step of Python ``py`` (the same paths for every step)."""
    prefix, build_prefix = tmp_path / "prefix", tmp_path / "build_env"
    cross = target == "osx-64"
    sp_dir = f"{prefix}/lib/python{py}/site-packages"
    env = {
        "target_platform": target,
        "build_platform": "osx-arm64",
        "blas_impl": "mkl" if cross else "generic",
        "PY_VER": py,
        "SP_DIR": sp_dir,
        "SHLIB_EXT": ".dylib",
        "CMAKE_ARGS": cmake_args(target, prefix, build_prefix, cross=cross),
        "MACOSX_DEPLOYMENT_TARGET": "11.0",
        "CONDA_BUILD_SYSROOT": "/opt/conda-sdks/MacOSX14.5.sdk",
        "_CONDA_PYTHON_SYSCONFIGDATA_NAME": "_sysconfigdata_"
        + TRIPLETS[target].replace(".", "_").replace("-", "_"),
    }
    if cross:
        env |= {
            "PYO3_CROSS_LIB_DIR": f"{prefix}/lib/python{py}",
            "PYO3_CROSS_INCLUDE_DIR": f"{prefix}/include",
            "PYO3_CROSS_PYTHON_VERSION": py,
            "PYO3_CROSS_PYTHON_IMPLEMENTATION": "CPython",
            "PYTHONPATH": f"{build_prefix}/venv/lib/python{py}/site-packages",
        }
    return run_build_sh(tmp_path, **env)


@pytest.mark.parametrize("target", ["osx-arm64", "osx-64"])
def test_every_pythons_step_forwards_the_same_environment(tmp_path: Path, target: str) -> None:
    steps = {py: step_env(tmp_path, target, py) for py in PYTHONS}
    first = forwarded_env.forwarded(steps[PYTHONS[0]])
    assert first, "build.sh forwards nothing?"
    record = tmp_path / "forwarded-env.json"
    forwarded_env.record(record, steps["3.12"])  # the top level's Python
    for py, env in steps.items():
        assert forwarded_env.forwarded(env) == first, py
        assert forwarded_env.check_same_as_top_level(record, env) == len(first)
    # the Python-dependent variables are there and differ, but none reaches the cache
    varying = {k for k in steps["3.10"] if steps["3.10"][k] != steps["3.14"].get(k)}
    assert {"PY_VER", "SP_DIR"} <= varying
    if target == "osx-64":
        assert {"PYO3_CROSS_LIB_DIR", "PYO3_CROSS_PYTHON_VERSION", "PYTHONPATH"} <= varying
    assert not varying & set(first), varying & set(first)
    # macOS settings that do reach the cache, the same in every step
    assert "-DCMAKE_OSX_DEPLOYMENT_TARGET=11.0" in first["CMAKE_ARGS"]
    assert ("-DCMAKE_SYSTEM_PROCESSOR=x86_64" in first["CMAKE_ARGS"]) == (target == "osx-64")


def test_a_python_dependent_cmake_variable_is_refused(tmp_path: Path) -> None:
    """The naive step: this Python's site-packages put into a forwarded variable."""
    top = step_env(tmp_path, "osx-64", "3.12")
    record = tmp_path / "forwarded-env.json"
    forwarded_env.record(record, top)
    naive = step_env(tmp_path, "osx-64", "3.13")
    naive["CMAKE_PREFIX_PATH"] = naive["SP_DIR"]
    with pytest.raises(MegabuildError, match="CMAKE_PREFIX_PATH") as err:
        forwarded_env.check_same_as_top_level(record, naive)
    assert "\n" not in str(err.value)
