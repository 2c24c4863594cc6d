"""megabuild.model is the one place naming the outputs, the linalg variants and the per-platform
facts; recipe/meta.yaml (which conda-build reads and which cannot import Python), the variant
values of recipe/conda_build_config.yaml and the split spec must say the same, read from their
real text."""

from __future__ import annotations

import ast
import json
import re

import pytest
from feedstock.paths import RECIPE, REPO
from megabuild import model
from megabuild.errors import MegabuildError

META = RECIPE / "meta.yaml"
# Source trees that must not spell an output or a variant name (only megabuild.model does).
CODE_DIRS = (RECIPE / "megabuild", REPO / "scripts" / "feedstock")
NAMES = {model.TOP_LEVEL, model.LIBTORCH, model.LINALG, model.PYTORCH, *model.METAPACKAGES}
NAMES |= {v.value for v in model.LinalgVariant}


def meta_output_names(text: str) -> set[str]:
    """The package names meta.yaml declares: ``name:`` under package/outputs, and the values of
    ``{% set metapackage = ... %}`` where an output's name is ``{{ metapackage }}``."""
    names = set(re.findall(r"^(?:  |  - )name: ([\w-]+)\s*$", text, re.M))
    if re.search(r"^  - name: \{\{ metapackage \}\}", text, re.M):
        names |= set(re.findall(r'^\{% set metapackage = "([\w-]+)" %\}', text, re.M))
    return names


def meta_variant_selectors(text: str) -> dict[str, str]:
    """Linalg variant name in a build string -> the ``with_magma`` its selector asks for."""
    found = {}
    for variant, selector in re.findall(
        r"_(\w+)_h\{\{ PKG_HASH \}\}.*#\s*\[(not with_magma|with_magma)\]", text
    ):
        found[variant] = "false" if selector.startswith("not") else "true"
    return found


def test_meta_yaml_names_the_models_outputs() -> None:
    text = META.read_text(encoding="utf-8")
    assert meta_output_names(text) == {
        model.TOP_LEVEL, model.LIBTORCH, model.LINALG, model.PYTORCH, *model.METAPACKAGES
    }  # fmt: skip


def test_meta_yaml_builds_each_linalg_variant_for_its_with_magma() -> None:
    text = META.read_text(encoding="utf-8")
    assert meta_variant_selectors(text) == {v.value: v.with_magma for v in model.LinalgVariant}
    config = (RECIPE / "conda_build_config.yaml").read_text(encoding="utf-8")
    values = re.search(r"^with_magma:\n((?:  - .*\n)+)", config, re.M)
    assert values is not None
    assert set(re.findall(r"- (\w+)", values.group(1))) == {v.with_magma for v in model.LinalgVariant}


@pytest.mark.parametrize(
    "planted",
    [
        lambda t: t.replace("- name: libtorch-cuda-linalg", "- name: libtorch-cuda-lin"),
        lambda t: t.replace('set metapackage = "pytorch-gpu"', 'set metapackage = "pytorch-cuda"'),
        lambda t: t.replace("_magma_h{{ PKG_HASH }}_{{ build }}    # [with_magma]",
                            "_magma_h{{ PKG_HASH }}_{{ build }}    # [not with_magma]"),
    ],
)  # fmt: skip
def test_a_renamed_output_or_swapped_variant_in_meta_yaml_is_caught(planted: object) -> None:
    text = META.read_text(encoding="utf-8")
    changed = planted(text)  # type: ignore[operator]
    assert changed != text
    expected = {model.TOP_LEVEL, model.LIBTORCH, model.LINALG, model.PYTORCH, *model.METAPACKAGES}
    variants = {v.value: v.with_magma for v in model.LinalgVariant}
    assert meta_output_names(changed) != expected or meta_variant_selectors(changed) != variants


def test_the_split_spec_declares_the_models_outputs_and_variants() -> None:
    spec = json.loads((RECIPE / "split_spec.json").read_text(encoding="utf-8"))
    assert set(spec["outputs"]) == {model.LIBTORCH, model.LINALG, model.PYTORCH, model.DROPPED}
    assert spec["outputs"][model.LINALG]["variants"] == [v.value for v in model.LinalgVariant]
    assert "platforms" not in spec  # {shlib} comes from the model


def test_one_fact_per_platform() -> None:
    """The model's platforms are those the configs build, and its facts agree with each other; the
    facts themselves are the model's (no copy of them here)."""
    from feedstock.configs import list_configs

    configs = list_configs(REPO)
    assert sorted(p.subdir for p in model.PLATFORMS) == sorted({c.subdir for c in configs})
    extensions = {(p.family, p.shlib_ext) for p in model.PLATFORMS}
    assert len(extensions) == len({p.family for p in model.PLATFORMS}), extensions  # one per family
    for facts in model.PLATFORMS:
        assert facts.symlinks == (facts.family != "win"), facts.subdir
        own = [c for c in configs if c.subdir == facts.subdir]
        cuda = any(c.values.get("cuda_compiler_version") != ["None"] for c in own)
        assert not facts.lazy_linalg or cuda, f"{facts.subdir}: a linalg package without a CUDA config"
        blas = {v for c in own for v in c.values.get("blas_impl", ["generic"])}
        assert blas <= set(facts.blas_impls), (facts.subdir, blas)
    with pytest.raises(MegabuildError, match="'win-arm64' is not one the feedstock builds"):
        model.platform("win-arm64")


def _literals(path: object) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))  # type: ignore[attr-defined]
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_module_but_the_model_spells_an_output_or_a_variant() -> None:
    spelled = [
        f"{path.relative_to(REPO)}:{line}: {value!r}"
        for root in CODE_DIRS
        for path in sorted(root.rglob("*.py"))
        if path != RECIPE / "megabuild" / "model.py"
        for line, value in _literals(path)
        if value in NAMES
    ]
    assert not spelled, "\n".join(spelled)
