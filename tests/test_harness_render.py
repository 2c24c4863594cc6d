"""The harness stops on a render error with one line naming the config; it never builds from
requirements or patches it made up itself (it once carried on with hard-coded host requirements
and no recipe patches, leaving only a note)."""

from __future__ import annotations

import inspect
import shutil
from pathlib import Path

import pytest
from feedstock.conda_build_standin import conda_build
from feedstock.conda_build_standin.conda_build import HarnessError, find_config, run_config
from feedstock.conda_build_standin.cpythons import find_cpythons
from feedstock.paths import RECIPE
from megabuild.model import TOP_LEVEL

CONFIG = "linux_64_cpu_generic"


def _broken_recipe(tmp_path: Path) -> Path:
    """A copy of recipe/ whose meta.yaml no longer renders (an unclosed Jinja block)."""
    copy = tmp_path / "recipe"
    shutil.copytree(RECIPE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    meta = copy / "meta.yaml"
    meta.write_text(meta.read_text() + "\n{% if cuda_compiler_version != 'None' %}\n")
    return copy


def test_render_error_stops_the_run_with_one_line_naming_the_config(tmp_path: Path) -> None:
    pythons = [c for c in find_cpythons() if c.short == "3.12"][:1] or find_cpythons()[:1]
    if not pythons:
        pytest.skip("needs a CPython >= 3.10")
    config = find_config(CONFIG)
    work = tmp_path / "work"
    with pytest.raises(HarnessError) as caught:
        run_config(config, work, pythons=pythons, cpu_count=1, log=lambda _: None,
                   recipe_dir=_broken_recipe(tmp_path))  # fmt: skip
    message = str(caught.value)
    assert "\n" not in message, message
    assert message.startswith(f"{config.name}: the recipe does not render: "), message
    assert "Jinja" in message, message
    # stopped before building anything: no build folder (source, host prefix) made
    assert not list(work.glob(f"{TOP_LEVEL}_*"))


def test_no_substituted_requirements_remain() -> None:
    """The fallback's traces: a rendered top level carrying an ``_error``, and host requirements
    spelled in the harness instead of read from the render."""
    source = inspect.getsource(conda_build)
    assert '"_error"' not in source and "not rendered" not in source
    assert '["python 3.12"' not in source and '"setuptools"]' not in source
