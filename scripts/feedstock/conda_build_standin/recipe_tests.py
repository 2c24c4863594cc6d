"""Run an output's rendered ``test:`` commands the way conda-build runs them, in a test env solved
from the run's channel.

conda-build makes one test env (``PREFIX`` is it; ``BUILD_PREFIX`` too; the build folder's
``_test_env_placehold...``, :mod:`feedstock.conda_build_standin.build_folder`) holding the package, its
run dependencies and the test requirements, activates it (the compilers' and nvcc's activation
scripts among the requirements run, then the installed packages' ``etc/conda/activate.d``
scripts), copies the test ``files`` into a test dir and runs each command there with ``bash -e``.
Here the package and its run dependencies come from the channel (py-rattler), the compiler
requirements are the caller's compilers on ``PATH`` with the activation's variables
(``feedstock.conda_build_standin.compiler_activation``, which also sources the packages'
activation scripts), and
``cuda-nvcc_linux-64`` is the real CUDA 13.0 toolchain laid out by
:mod:`feedstock.conda_build_standin.cuda_toolchain`
when there is one. Other test requirements (``cuda-nvrtc-dev``, ``nvtx-c``, ``pytest``, ...) are not
installed; the caller decides which commands it runs. The test dir and each command are
``feedstock.test_commands``' (the runner the rehearsal on real binaries uses too).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from megabuild import model

from feedstock.conda_build_standin import channel, compiler_activation, cuda_toolchain
from feedstock.conda_build_standin.build_folder import BuildFolder
from feedstock.conda_build_standin.conda_build import TARGET_PLATFORM, tool_dirs
from feedstock.paths import TESTS
from feedstock.test_commands import CommandResult, fresh_test_dir, run_command


@dataclass(frozen=True)
class RecipeTestEnv:
    prefix: Path
    test_dir: Path
    env: dict[str, str]
    dists: dict[str, str]


# what check-binaries finds on the miniature that is the harness's (its compiler, its sysroot)
STAND_IN_EXPLAINED = TESTS / "data" / "binary-check-harness.json"

__all__ = ["CommandResult", "RecipeTestEnv", "make_test_env", "own_output_requires", "run_commands"]


def own_output_requires(test: Mapping[str, Any]) -> list[str]:
    """The test requirements that are outputs of this recipe (libtorch-cuda-linalg's test needs the
    libtorch of its build), as rattler's strict parser wants them (``name ==2.14.1 build``); the
    others are stand-ins or tools on PATH here."""
    own = []
    for spec in (str(r) for r in test.get("requires") or []):
        name, *rest = spec.split()
        if name not in (model.LIBTORCH, model.LINALG, model.PYTORCH):
            continue
        if rest and rest[0][0].isdigit():
            rest[0] = f"=={rest[0]}"
        own.append(" ".join([name, *rest]))
    return own


def make_test_env(
    channel_dir: Path,
    specs: Sequence[str],
    work: Path,
    name: str,
    *,
    folder: BuildFolder,
    recipe_dir: Path,
    test: Mapping[str, Any],
    virtual_packages: Mapping[str, str],
    toolchain: cuda_toolchain.Toolchain | None,
) -> RecipeTestEnv:
    """Solve and install ``specs`` into the build ``folder``'s test prefix (``_test_env_placehold...``,
    made anew for each test as conda-build does), add nvcc when the test requires it, copy the test
    files into its ``test_tmp``; the environment the commands run with (``name``: ``PKG_NAME``).
    ``work`` holds the package cache and ``HOME``."""
    prefix = folder.test_prefix
    wanted = [*specs, *own_output_requires(test)]
    dists = channel.create_env(channel_dir, wanted, prefix, work / "cache" / "rattler", virtual_packages)
    requires = [str(r).split()[0] for r in test.get("requires") or []]
    wants_nvcc = any(r.startswith("cuda-nvcc") for r in requires)
    # compiler('c'/'cxx') renders to gcc_linux-64/gxx_linux-64: its <triplet>-gcc/-c++ (CC, CXX)
    wants_compiler = any(r.startswith(("gcc_", "gxx_")) for r in requires)
    if wants_compiler:
        compiler_activation.install_binutils(prefix, TARGET_PLATFORM)
    if wants_nvcc and toolchain is not None:
        cuda_toolchain.install_build_env(toolchain, prefix)
    test_dir = fresh_test_dir(folder.test_dir, test, recipe_dir)
    py = sorted(prefix.glob("lib/python3*/site-packages"))
    env = {
        "PATH": os.pathsep.join(dict.fromkeys([str(prefix / "bin"), *tool_dirs(), "/usr/bin", "/bin"])),
        "HOME": str(work / "home"),
        "LANG": "C.UTF-8",
        "CONDA_BUILD": "1",
        "PREFIX": str(prefix),
        "BUILD_PREFIX": str(prefix),
        "SHLIB_EXT": ".so",
        "target_platform": TARGET_PLATFORM,
    }
    if py:
        env["SP_DIR"] = str(py[0])
    env.update(
        compiler_activation.activation_env(
            TARGET_PLATFORM, prefix=prefix, build_prefix=prefix, src_dir=test_dir, pkg_name=name,
            pkg_version="0", cuda=wants_nvcc,
        )
    )  # fmt: skip
    if not wants_compiler:
        for var in compiler_activation.COMPILERS:
            env.pop(var)
    if wants_nvcc and toolchain is not None:
        cxx = shutil.which("c++") or "c++"
        env.update(compiler_activation.nvcc_env(TARGET_PLATFORM, prefix=prefix, cxx=cxx))
    # conda-build's test script activates the test env: the installed packages' activate.d scripts
    env = compiler_activation.run_activation_scripts(prefix, env)
    return RecipeTestEnv(prefix, test_dir, env, dists)


def run_commands(
    test_env: RecipeTestEnv, commands: Sequence[str], timeout: float = 600
) -> list[CommandResult]:
    """Each command with ``bash -e`` in the test dir, in order; all of them, whatever fails. The
    binary check is given the harness's own stand-ins, explained (not the recipe's)."""
    env, cwd = test_env.env, test_env.test_dir
    return [
        run_command(command, env, cwd, explained=STAND_IN_EXPLAINED, bash_options=("-e",), timeout=timeout)
        for command in commands
    ]
