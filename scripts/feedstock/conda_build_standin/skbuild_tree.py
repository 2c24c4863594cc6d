"""The fixture built by the real scikit-build-core in conda-like host envs at one prefix.

As conda-build does for the pytorch outputs: the host env is recreated at the SAME prefix for each
Python, each time with its own scikit-build-core under ``lib/python3.X/site-packages``. Used by
``tests/test_skbuild_megabuild.py`` (the cache-clearing trap) and ``python -m feedstock bench-extra-python``
(what one more Python costs).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from megabuild import model

from feedstock.conda_build_standin.build_folder import BuildFolder
from feedstock.conda_build_standin.conda_build import skbuild_packages
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.prefix import python_prefix
from feedstock.conda_build_standin.source import MIRRORED_PATCHES, copy_fixture
from feedstock.errors import FeedstockError
from feedstock.paths import RECIPE


@dataclass
class SkbuildTree:
    src: Path  # a copy of the fixture in a build folder's work/ (SRC_DIR); its build/ is the shared tree
    prefix: Path  # the host env's prefix (_h_env_placehold...), the same for every Python
    version: str  # scikit-build-core's
    pip_cache: Path | None = None
    extra_env: dict[str, str] = field(default_factory=dict)  # on top of env(), for one step

    @classmethod
    def create(
        cls, work: Path, version: str, pip_cache: Path | None = None, patched: bool = True
    ) -> SkbuildTree:
        """A fixture copy, patched as the recipe's source is (every patch the fixture mirrors);
        ``patched=False``: upstream's lines as they are."""
        folder = BuildFolder.new(
            work, model.TOP_LEVEL
        )  # conda-build's layout (feedstock.conda_build_standin.build_folder)
        tree = cls(folder.work, folder.host_prefix, version, pip_cache)
        names = MIRRORED_PATCHES if patched else ()
        copy_fixture(tree.src, [RECIPE / "patches" / name for name in names])
        return tree

    @property
    def build(self) -> Path:
        return self.src / "build"

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    def env(self) -> dict[str, str]:
        """What build.sh would export, cut to what the fixture reads (same in every step)."""
        return {
            "PATH": f"{self.prefix / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "HOME": os.environ.get("HOME", str(self.src)),
            "CMAKE_GENERATOR": "Ninja",
            "USE_CUDA": "0",
            "USE_MKLDNN": "0",
            "BUILD_TEST": "0",
            "MAX_JOBS": "2",
            "PYTORCH_BUILD_VERSION": "2.14.1",
        }

    def host_env(self, cpython: CPython) -> None:
        """(Re)create the host env at the same prefix, with its own scikit-build-core."""
        packages = ["numpy", "pip", *skbuild_packages(self.version, cpython.version[:2])]
        python_prefix(cpython, self.prefix, packages, cache_dir=self.pip_cache)

    def run(self, *args: str, python_path: bool = False) -> str:
        env = self.env() | self.extra_env | ({"PYTHONPATH": str(RECIPE)} if python_path else {})
        proc = subprocess.run(
            [str(self.python), *args], cwd=self.src, env=env, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise FeedstockError(
                f"{' '.join(args[:4])} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return proc.stdout + proc.stderr

    def pip_install(self, *settings: str) -> str:
        return self.run("-m", "pip", "install", ".", "--no-deps", "--no-build-isolation", "-v", *settings)

    def megabuild(self, *args: str) -> str:
        return self.run("-m", "megabuild", *args, python_path=True)

    def keep(self, dest: Path) -> None:
        shutil.copytree(self.build, dest, symlinks=True)

    def reset(self, kept: Path) -> None:
        shutil.rmtree(self.build)
        shutil.copytree(kept, self.build, symlinks=True)
