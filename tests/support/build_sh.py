"""recipe/build.sh sourced up to the build: what it exports and what it prints."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

from feedstock.paths import RECIPE

DEBUG_MAP = "-fdebug-prefix-map"


def source_build_sh(tmp_path: Path, **env: str) -> tuple[dict[str, str], str]:
    """What build.sh exports up to the build (an unknown PKG_NAME stops it), and its stderr."""
    prefix, src = tmp_path / "prefix", tmp_path / "work"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(sys.executable)
    src.mkdir()
    base = {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path), "PREFIX": str(prefix),
        "BUILD_PREFIX": str(tmp_path / "build_env"), "SRC_DIR": str(src), "RECIPE_DIR": str(RECIPE),
        "PKG_NAME": "probe", "PKG_VERSION": "2.13.0", "PY_VER": "3.12",
        "SP_DIR": str(prefix / "lib/python3.12/site-packages"), "target_platform": "linux-64",
        "cuda_compiler_version": "None", "blas_impl": "generic", "megabuild": "true",
        "CFLAGS": f"-O2 {DEBUG_MAP}={src}=/usr/local/src/conda/probe-2.13.0",
        "CXXFLAGS": f"-O2 {DEBUG_MAP}={prefix}=/usr/local/src/conda-prefix", "TMPDIR": str(tmp_path),
    }  # fmt: skip
    base.update(env)
    out = tmp_path / "exported.env"
    script = f"trap 'env -0 > {shlex.quote(str(out))}' EXIT; source {shlex.quote(str(RECIPE / 'build.sh'))}"
    proc = subprocess.run(["bash", "-c", script], env=base, capture_output=True, text=True, timeout=120)
    assert "unexpected PKG_NAME 'probe'" in proc.stderr, proc.stdout + proc.stderr
    exported = dict(item.split("=", 1) for item in out.read_text().split("\0") if "=" in item)
    return exported, proc.stderr + proc.stdout
