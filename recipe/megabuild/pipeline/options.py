"""What every build step needs, resolved once from conda-build's environment (cibuildwheel's habit:
options are read in one place, and the steps only use this object).

The megabuild Python (the top level's) is not an option: the top level records the Python it built
with in its work dir (:mod:`megabuild.pipeline.top_level_record`), and every output reads it there;
``megabuild_python`` in ``recipe/meta.yaml`` is the one place that writes it."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from megabuild import compiler_cache
from megabuild.errors import MegabuildError
from megabuild.model import LinalgVariant
from megabuild.pipeline.description import Target
from megabuild.pipeline.wheel_settings import SIX_DIR


@dataclass(frozen=True)
class BuildOptions:
    pkg_name: str
    src_dir: Path
    recipe_dir: Path
    prefix: Path
    sp_dir: Path
    py_ver: str
    target_platform: str
    cuda: bool
    magma_home: Path | None
    telemetry_dir: Path
    compiler_cache: bool
    linalg_variant: LinalgVariant | None = None  # the linalg output's, from ``with_magma``

    @property
    def build_dir(self) -> Path:
        return self.src_dir / "build"

    @property
    def work(self) -> Path:
        """Where the steps keep what later outputs need ($SRC_DIR is shared by all of them)."""
        return self.src_dir / "_megabuild"

    @property
    def staging(self) -> Path:
        return self.work / "staging"

    @property
    def build_state(self) -> Path:
        return self.work / "build-state"

    @property
    def six_dir(self) -> Path:
        """NNPACK's six (``PYTHON_SIX_SOURCE_DIR``): one path for every pass (wheel_settings)."""
        return self.work / SIX_DIR

    @property
    def split_spec(self) -> Path:
        return self.recipe_dir / "split_spec.json"

    @property
    def python(self) -> Path:
        """The host env's interpreter: scikit-build-core runs in it (no build isolation).
        On Windows conda puts it at the prefix's top (%PREFIX%\\python.exe)."""
        if self.is_windows:
            return self.prefix / "python.exe"
        return self.prefix / "bin" / "python"

    @property
    def is_windows(self) -> bool:
        """win-64: no symlinks (no link-back) and no lazy CUDA linalg library (no magma pass)."""
        return self.target_platform.startswith("win-")

    @property
    def target(self) -> Target:
        """What the pipeline's platform rules look at."""
        return Target(self.target_platform, self.cuda)


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise MegabuildError(f"{name} is not set (build steps run inside conda-build's environment)")
    return value


def _linalg_variant(env: Mapping[str, str]) -> LinalgVariant | None:
    """conda-build exports the linalg output's ``with_magma`` variant value; other outputs have none."""
    value = env.get("with_magma")
    return None if value is None else LinalgVariant.from_with_magma(value)


def _abi_flag(env: Mapping[str, str]) -> str:
    """``t`` for a free-threaded Python, whose steps are then named ``3.14t``.

    conda-build's ``PY_VER`` is ``3.14`` for both builds of 3.14; the variant's ``python``
    (exported to the script: ``3.14.* *_cp314t``) or ``SP_DIR`` (``lib/python3.14t/...``) tells.
    """
    spec = env.get("python", "").split()
    if len(spec) > 1 and spec[-1].endswith("t"):
        return "t"
    return "t" if re.fullmatch(r"python\d+\.\d+t", Path(env.get("SP_DIR", "")).parent.name) else ""


def _host_python(prefix: Path, target_platform: str) -> tuple[str, Path] | None:
    """(``3.12`` / ``3.13t``, its site-packages) of the python package installed in ``prefix``.

    conda-build's ``PY_VER`` and ``SP_DIR`` do not always name it: the top level gets the
    ``PY_VER`` of the python variant it is built for (its host python is ``megabuild_python``),
    and ``SP_DIR`` is the first ``lib/python?.*`` directory of the host prefix, which every output
    reuses (the top level's ``lib/python3.12`` stays). None without a python record (no conda)."""
    records = sorted((prefix / "conda-meta").glob("python-[0-9]*.json"))
    if not records:
        return None
    record = json.loads(records[0].read_text(encoding="utf-8"))
    short = ".".join(str(record["version"]).split(".")[:2])
    freethreaded = str(record.get("build", "")).endswith("t") or "py_freethreading" in str(
        record.get("track_features", "")
    )
    py_ver = short + ("t" if freethreaded else "")
    if record.get("python_site_packages_path"):
        return py_ver, prefix / record["python_site_packages_path"]
    if target_platform.startswith("win-"):
        return py_ver, prefix / "Lib" / "site-packages"
    return py_ver, prefix / "lib" / f"python{py_ver}" / "site-packages"


def from_environment(env: Mapping[str, str] | None = None) -> BuildOptions:
    """The options of this step; a missing or malformed variable is one error naming it."""
    env = os.environ if env is None else env
    py_ver = _required(env, "PY_VER")
    if not re.fullmatch(r"\d+\.\d+", py_ver):
        raise MegabuildError(f"PY_VER must be X.Y, got {py_ver!r}")
    py_ver += _abi_flag(env)
    sp_dir = Path(_required(env, "SP_DIR"))
    host = _host_python(Path(_required(env, "PREFIX")), env.get("target_platform", ""))
    if host is not None:
        py_ver, sp_dir = host
    cuda_version = _required(env, "cuda_compiler_version")
    cuda = cuda_version != "None"
    magma_home = env.get("MAGMA_HOME")
    src_dir = Path(_required(env, "SRC_DIR"))
    return BuildOptions(
        pkg_name=_required(env, "PKG_NAME"),
        src_dir=src_dir,
        recipe_dir=Path(_required(env, "RECIPE_DIR")),
        prefix=Path(_required(env, "PREFIX")),
        sp_dir=sp_dir,
        py_ver=py_ver,
        target_platform=_required(env, "target_platform"),
        cuda=cuda,
        magma_home=Path(magma_home) if cuda and magma_home else None,
        telemetry_dir=Path(env.get("FEEDSTOCK_BUILD_TELEMETRY") or src_dir / "_megabuild" / "telemetry"),
        compiler_cache=bool(env.get(compiler_cache.ACTIVE)),  # this step's sccache server is up
        linalg_variant=_linalg_variant(env),
    )
