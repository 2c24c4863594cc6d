"""check-binaries on the real torch 2.14.1 wheels from PyPI, as the feedstock's split packs them.

Each wheel (linux-64 and linux-aarch64 CUDA 13.0, osx-arm64, win-64; from the shared wheel cache,
``~/.cache/pytorch-feedstock/wheels/<pip tag>``) goes through the build pipeline on placeholders
(``support.wheel_binaries``); every packaged file is then checked with its real bytes where the
split put it, with the c_stdlib_version of the config its layout renders. Every finding must be
explained by ``tests/data/binary-check-upstream-wheels.json`` (a dependency the wheel takes from
elsewhere than a conda environment), and every explanation that names the platform must explain
something there. The CUDA fatbin check needs cuobjdump over 500 MB (about 100 s) and is left to
the first real build (docs/first-real-build.md). Without a wheel the test skips with one line; under
``FEEDSTOCK_REQUIRE_REAL_WHEELS=1`` it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from feedstock.bump.platforms import BY_NAME
from feedstock.bump.tools import wheel_cache_dir
from megabuild.binaries.checks import Options
from megabuild.binaries.findings import judge, load_explanations
from megabuild.model import PYTORCH
from support.wheel_binaries import check_split, split_wheel

EXPLAINED = Path(__file__).parent / "data" / "binary-check-upstream-wheels.json"
VERSION = "2.14.1"
REQUIRE_ENV = "FEEDSTOCK_REQUIRE_REAL_WHEELS"

pytestmark = pytest.mark.slow  # reads ~1.3 GB of libraries out of each Linux wheel


def cached_wheel(subdir: str) -> Path:
    tag = BY_NAME[subdir].pip_tag
    found = sorted((wheel_cache_dir() / tag).glob(f"torch-{VERSION}-cp312-cp312-*.whl"))
    if found:
        return found[0]
    reason = (
        f"no torch {VERSION} cp312 wheel for {subdir} in {wheel_cache_dir() / tag} (pip download --no-deps "
        f"--only-binary=:all: --platform {tag} --python-version 3.12 torch=={VERSION} -d <that dir>)"
    )
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.mark.parametrize("subdir", ["linux-64", "linux-aarch64", "osx-arm64", "win-64"])
def test_the_split_wheel_has_only_explained_findings(subdir: str, tmp_path: Path) -> None:
    split = split_wheel(cached_wheel(subdir), BY_NAME[subdir], tmp_path)
    torch_lib = [
        f.rsplit("/", 1)[0] for f in split.packages[PYTORCH] if f.endswith("torch/lib/torch_python.dll")
    ]
    options = Options(subdir, c_stdlib_version=split.c_stdlib_version)
    per_package = check_split(split, options, tuple(torch_lib))
    findings = [f for found in per_package.values() for f in found]
    verdict = judge(findings, load_explanations(EXPLAINED, subdir))
    for finding, why in verdict.explained:
        print(f"explained: {finding.line()} -- {why.reason[:80]}")
    assert not verdict.unexplained, "\n".join(verdict.lines())
    # the fatbin check is not run here (cuobjdump needs ~100 s): its explanations are the rehearsal's
    unused = [e for e in verdict.unused if e.check != "cuda-arch"]
    assert not unused, [e.detail for e in unused]
    # the checks ran on the real bytes: the libraries are there and were read
    assert sum(len(files) for files in split.packages.values()) > 10_000
    assert findings, "an upstream wheel always takes something from outside a conda environment"
