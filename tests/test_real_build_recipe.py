"""What ``python -m feedstock real-build`` hands the real conda-build, checked without it: the
two configs it builds resolve to the rerendered ``.ci_support`` files it means, and its copy of
``recipe/`` differs from the real one only by the changes it reports (``CHANGES``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from feedstock.conda_build_standin.conda_build import find_config
from feedstock.conda_build_standin.source import MIRRORED_PATCHES
from feedstock.cross_checks import real_build
from feedstock.paths import REPO


@pytest.mark.parametrize(("name", "cuda"), [("cpu", "None"), ("cuda", "13.0")])
def test_each_config_resolves_to_the_generic_blas_linux_64_config(name: str, cuda: str) -> None:
    config = find_config(real_build.CONFIGS[name])
    variant = yaml.safe_load(config.read_text())
    assert config.parent == REPO / ".ci_support", config
    assert variant["cuda_compiler_version"] == [cuda], config.name
    assert variant["blas_impl"] == ["generic"], config.name
    assert variant["target_platform"] == ["linux-64"], config.name


def test_the_recipe_copy_differs_only_by_the_reported_changes(tmp_path: Path) -> None:
    tarball, sha = real_build.make_tarball(tmp_path / "source")
    recipe = real_build.prepare_recipe(tmp_path / "recipe", tarball, sha)
    meta = (recipe / "meta.yaml").read_text()
    assert f"url: {tarball.as_uri()}" in meta and f"sha256: {sha}" in meta
    assert "https://github.com/pytorch/pytorch/" not in meta
    patches = [line.split()[1] for line in meta.splitlines() if line.strip().startswith("- patches/")]
    assert patches and all(Path(p).name in MIRRORED_PATCHES for p in patches), patches
    for text, _ in real_build.LEFT_OUT_TESTS:
        assert text not in meta, text
    check = "- python -m megabuild check-binaries"
    checks = [line for line in meta.splitlines() if line.strip().startswith(check)]
    assert checks and all("--explained megabuild/" in line for line in checks), checks
    original = (REPO / "recipe" / "meta.yaml").read_text().splitlines()
    kept = set(meta.splitlines())
    removed = [line for line in original if line not in kept]
    reasons = ("- patches/", "url: https://", "sha256:", check)
    texts = [text for text, _ in real_build.LEFT_OUT_TESTS]
    unexplained = [
        line for line in removed if not line.strip().startswith(reasons) and not any(t in line for t in texts)
    ]
    assert not unexplained, unexplained
