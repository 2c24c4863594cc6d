"""check-binaries on the real torch 2.14.1 wheels from PyPI, as the feedstock's split packs them.

Each wheel (linux-64 and linux-aarch64 CUDA 13.0, osx-arm64, win-64; from the shared wheel cache,
``~/.cache/pytorch-feedstock/wheels/<pip tag>``) goes through the build pipeline on placeholders
(``support.wheel_binaries``); every packaged file is then checked with its real bytes where the
split put it, with the c_stdlib_version of the config its layout renders, and upstream's build root
rewritten to a conda-build work dir of the same length (``support.real_gates``), so that the
build-path check meets the paths a conda build embeds: ``__FILE__`` alone and inside the messages of
``TORCH_INTERNAL_ASSERT`` and friends, thousands per library. Every finding must be
explained by ``tests/data/binary-check-upstream-wheels.json`` (a dependency the wheel takes from
elsewhere than a conda environment), and every explanation that names the platform must explain
something there. The CUDA fatbin check needs cuobjdump over 500 MB (about 25 s per library): the
rehearsal step runs it (tests/test_gates_real_binaries.py). Without a wheel the test skips with one
line; under
``FEEDSTOCK_REQUIRE_REAL_WHEELS=1`` it fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from feedstock.split_check.platforms import BY_NAME
from megabuild.binaries.checks import Options
from megabuild.binaries.cli import KNOWN
from megabuild.binaries.findings import judge, load_explanations
from megabuild.model import PYTORCH
from support.real_gates import build_roots, rewrite_roots
from support.wheel_binaries import cached_wheel, check_split, split_wheel

EXPLAINED = Path(__file__).parent / "data" / "binary-check-upstream-wheels.json"

pytestmark = pytest.mark.slow  # reads ~1.3 GB of libraries out of each Linux wheel


@pytest.mark.parametrize("subdir", ["linux-64", "linux-aarch64", "osx-arm64", "win-64"])
def test_the_split_wheel_has_only_explained_findings(subdir: str, tmp_path: Path) -> None:
    split = split_wheel(cached_wheel(subdir), BY_NAME[subdir], tmp_path)
    torch_lib = [
        f.rsplit("/", 1)[0] for f in split.packages[PYTORCH] if f.endswith("torch/lib/torch_python.dll")
    ]
    options = Options(subdir, c_stdlib_version=split.c_stdlib_version)
    roots = build_roots(subdir)
    rewritten = {"roots": 0}

    def rewrite(data: bytes) -> bytes:
        rewritten["roots"] += sum(data.count(root) for root in roots)
        return rewrite_roots(data, roots)

    per_package = check_split(split, options, tuple(torch_lib), rewrite)
    findings = [f for found in per_package.values() for f in found]
    # what check-binaries always applies (known.json) and what the wheel takes from elsewhere
    verdict = judge(findings, load_explanations(KNOWN, subdir) + load_explanations(EXPLAINED, subdir))
    for finding, why in verdict.explained:
        print(f"explained: {finding.line()} -- {why.reason[:80]}")
    assert not verdict.unexplained, "\n".join(verdict.lines())
    # the fatbin check is not run here (cuobjdump needs ~25 s a library): its explanations are the rehearsal's
    unused = [
        e for e in verdict.unused if e.check != "cuda-arch" and e in load_explanations(EXPLAINED, subdir)
    ]
    assert not unused, [e.detail for e in unused]
    # the checks ran on the real bytes: the libraries are there and were read
    assert sum(len(files) for files in split.packages.values()) > 10_000
    assert findings, "an upstream wheel always takes something from outside a conda environment"
    # the build-path check met conda-build work dirs: thousands of source paths, none a finding
    assert rewritten["roots"] > 1000, rewritten
