"""Release candidates as conda-forge builds them: the version alone picks the upload label.

recipe/conda_build_config.yaml zips ``channel_targets`` with ``is_rc`` (every config exists for
``conda-forge main`` and for ``conda-forge pytorch_rc``) and meta.yaml skips the one that does not
match the version. Rendered here with the render library on a copy of the recipe; the real
rerender with an rc version is a cross-check (tests/test_ci_scripts.py).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml
from feedstock.paths import REPO
from feedstock.render import render_config

RC_VERSION = "2.16.0rc1"
TARGETS = {"False": "conda-forge main", "True": "conda-forge pytorch_rc"}
_VERSION_LINE = re.compile(r'^\{% set version = "[^"]+" %\}$', re.MULTILINE)


def test_channel_targets_are_zipped_with_is_rc() -> None:
    cbc = yaml.safe_load((REPO / "recipe" / "conda_build_config.yaml").read_text())
    assert ["channel_targets", "is_rc"] in cbc["zip_keys"]
    assert dict(zip(map(str, cbc["is_rc"]), cbc["channel_targets"])) == TARGETS


def with_version(tmp_path: Path, version: str) -> Path:
    recipe = tmp_path / version / "recipe"
    shutil.copytree(REPO / "recipe", recipe, ignore=shutil.ignore_patterns("__pycache__"))
    meta = recipe / "meta.yaml"
    text, count = _VERSION_LINE.subn(f'{{% set version = "{version}" %}}', meta.read_text())
    assert count == 1, "meta.yaml's version line changed: update this test"
    meta.write_text(text)
    return recipe


def both_labels(tmp_path: Path) -> dict[str, Path]:
    """The osx-arm64 config (one Python kept: fast) once per ``is_rc`` value."""
    source = next((REPO / ".ci_support").glob("osx_arm64_*.yaml"), None)
    if source is None:
        pytest.skip(".ci_support has no osx-arm64 config (rerender pending)")
    text = source.read_text()
    assert "channel_targets:\n- conda-forge main\n" in text and "is_rc:\n- 'False'\n" in text, source.name
    paths = {}
    for is_rc, target in TARGETS.items():
        path = tmp_path / f"{source.stem}_{is_rc}.yaml"
        path.write_text(
            text.replace("- conda-forge main\n", f"- {target}\n").replace("- 'False'\n", f"- '{is_rc}'\n")
        )
        paths[target] = path
    return paths


@pytest.mark.parametrize(
    ("version", "label"), [(None, "conda-forge main"), (RC_VERSION, "conda-forge pytorch_rc")]
)
def test_the_version_selects_the_label(tmp_path: Path, version: str | None, label: str) -> None:
    """A release builds only for main, an rc only for pytorch_rc: the other config renders nothing."""
    recipe = with_version(tmp_path, version) if version else REPO / "recipe"
    rendered = {target: render_config(path, recipe) for target, path in both_labels(tmp_path).items()}
    assert {t for t, outputs in rendered.items() if outputs} == {label}
    if version:
        assert {o.version for o in rendered[label]} == {version}
