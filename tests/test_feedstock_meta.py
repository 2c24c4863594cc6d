"""What conda-forge's infrastructure checks against this feedstock, beyond the recipe itself.

* Output validation: conda-forge only accepts an upload of a package name from the feedstock that
  name is registered to in conda-forge/feedstock-outputs, and conda-smithy's linter (CF-013) wants
  ``extra: feedstock-name`` to name the GitHub repository (``<name>-feedstock``).
* pybind11 ABI: PyTorch 2.13 bundles pybind11 3 (internals version 11). Every config has to build
  against ``pybind11_abi`` 11 (conda-forge-pinning's ``pybind11_abi11`` migration, carried in
  ``.ci_support/migrations``), or every package requires pybind11-abi 4 and cannot be installed
  next to the rest of the ecosystem's pybind11 3 extensions.
"""

from __future__ import annotations

import re
from functools import cache

import pytest
import yaml
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config

META = RECIPE / "meta.yaml"
CONFIGS = list_configs(REPO)

# Registrations in conda-forge/feedstock-outputs (outputs/<a>/<b>/<c>/<name>.json, e.g.
# outputs/l/i/b/libtorch.json = {"feedstocks": ["pytorch-cpu"]}): output validation rejects
# an upload of one of these names from any other feedstock. libtorch-split, the recipe's top
# level, is never built as a package.
REGISTERED_FEEDSTOCK = {
    "libtorch": "pytorch-cpu",
    "libtorch-cuda-linalg": "pytorch-cpu",
    "pytorch": "pytorch-cpu",
    "pytorch-cpu": "pytorch-cpu",
    "pytorch-gpu": "pytorch-cpu",
}
PYBIND11_ABI = "11"  # pybind11 3.x internals, as bundled by PyTorch 2.13
MIGRATION = REPO / ".ci_support" / "migrations" / "pybind11_abi11.yaml"

needs_configs = pytest.mark.skipif(not CONFIGS, reason=".ci_support has no configs yet (rerender pending)")


def meta_extra() -> dict:
    """The `extra:` section of meta.yaml (plain YAML there: no jinja, no selectors)."""
    match = re.search(r"^extra:\n((?:[ #].*\n|\n)*)", META.read_text(), re.M)
    assert match, "recipe/meta.yaml has no top-level extra: section"
    return yaml.safe_load("extra:\n" + match.group(1))["extra"] or {}


@cache
def rendered(name: str) -> tuple[RenderedOutput, ...]:
    config = next(c for c in CONFIGS if c.name == name)
    return tuple(render_config(config.path, RECIPE))


def test_feedstock_name_is_the_registered_one() -> None:
    name = meta_extra().get("feedstock-name")
    assert name == "pytorch-cpu", (
        f"extra: feedstock-name is {name!r}; the outputs are registered to pytorch-cpu "
        "(conda-forge/feedstock-outputs), uploads from another feedstock name are rejected"
    )
    assert not name.endswith("-feedstock")  # conda-smithy lint: the name without the suffix


@needs_configs
@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_every_output_is_registered_to_this_feedstock(config: str) -> None:
    feedstock = meta_extra().get("feedstock-name")
    for output in rendered(config):
        assert output.name in REGISTERED_FEEDSTOCK, (
            f"{output.name} is not registered in conda-forge/feedstock-outputs: register it "
            "for pytorch-cpu before the first upload"
        )
        assert REGISTERED_FEEDSTOCK[output.name] == feedstock, (
            f"{output.name} is registered to {REGISTERED_FEEDSTOCK[output.name]}, "
            f"extra: feedstock-name is {feedstock!r}"
        )


def test_conda_forge_yml_names_the_same_repository() -> None:
    forge = yaml.safe_load((REPO / "conda-forge.yml").read_text()) or {}
    repo_name = (forge.get("github") or {}).get("repo_name")
    if repo_name:
        assert repo_name == f"{meta_extra()['feedstock-name']}-feedstock"


def test_maintainer_team_owns_the_feedstock() -> None:
    """CODEOWNERS is rendered from recipe-maintainers: the team of the pytorch-cpu feedstock."""
    maintainers = meta_extra().get("recipe-maintainers") or []
    assert f"conda-forge/{meta_extra()['feedstock-name']}" in maintainers
    codeowners = REPO / ".github" / "CODEOWNERS"
    if codeowners.is_file():
        owners = codeowners.read_text().split()
        assert owners[0] == "*"
        assert sorted(owners[1:]) == sorted(f"@{m}" for m in maintainers), "rerender needed"


def test_pybind11_abi11_migration_is_carried() -> None:
    assert MIGRATION.is_file(), (
        "copy recipe/migrations/pybind11_abi11.yaml from conda-forge-pinning to "
        ".ci_support/migrations/ and rerender"
    )
    migration = yaml.safe_load(MIGRATION.read_text())
    assert [str(v) for v in migration["pybind11_abi"]] == [PYBIND11_ABI]
    assert "migrator_ts" in migration  # conda-smithy drops a timestamped migration the pinning lacks


@needs_configs
@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_every_config_builds_against_pybind11_abi_11(config: str) -> None:
    values = next(c for c in CONFIGS if c.name == config).get("pybind11_abi")
    assert [str(v) for v in values] == [PYBIND11_ABI], (
        f"{config}: pybind11_abi {values}; PyTorch 2.13 bundles pybind11 3 (ABI {PYBIND11_ABI})"
    )


@needs_configs
@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_pytorch_host_pins_pybind11_abi_11(config: str) -> None:
    pytorch = [o for o in rendered(config) if o.name == "pytorch"]
    assert pytorch, f"{config}: no pytorch output"
    for output in pytorch:
        pins = [r for r in output.requirements.get("host", []) if r.split()[0] == "pybind11-abi"]
        assert pins, f"{output.build_string}: host lacks pybind11-abi"
        assert all(re.fullmatch(rf"pybind11-abi {PYBIND11_ABI}(\.\*)?", p) for p in pins), (
            f"{config} {output.build_string}: host pins {pins}"
        )


@needs_configs
@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_pytorch_requirements_a_user_needs(config: str) -> None:
    """What the rendered pytorch and libtorch packages require beyond upstream's Requires-Dist, as
    conda-forge's do: pybind11 (``<torch/extension.h>`` includes it; the build uses conda-forge's,
    so torch/include has no copy), optree (upstream's extra), pytest <9.1 for the tests (pytorch);
    OpenBLAS's OpenMP build only (libtorch, unix, generic BLAS: "Detect OpenMP Loop and this
    application may hang" with the pthreads one) and the host's cuda-cupti on win-64 CUDA
    (pin_compatible, to x.x.x; both)."""
    outputs = rendered(config)
    pytorch = [o for o in outputs if o.name == "pytorch"]
    assert pytorch, f"{config}: no pytorch output"
    (libtorch,) = [o for o in outputs if o.name == "libtorch"]
    for output in [*pytorch, libtorch]:
        win = output.subdir.startswith("win-")
        cuda = output.variant["cuda_compiler_version"] != "None"
        depends = {d.split()[0]: d for d in output.depends}
        assert ("cuda-cupti" in depends) == (win and cuda), (output.build_string, depends.get("cuda-cupti"))
        openmp = {"libopenblas * openmp_*", "openblas * openmp_*"}
        generic_unix = output.variant["blas_impl"] != "mkl" and not win and output is libtorch
        assert (openmp <= set(output.constrains)) == generic_unix, (output.build_string, output.constrains)
    for output in pytorch:
        depends = {d.split()[0]: d for d in output.depends}
        assert "pybind11" in depends, (output.build_string, sorted(depends))
        assert depends.get("optree") == "optree >=0.13.0", (output.build_string, depends.get("optree"))
        assert "pytest <9.1" in output.test["requires"], (output.build_string, output.test["requires"])
