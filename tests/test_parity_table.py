"""docs/packages.md's "What changes for users of conda-forge's current pytorch packages" table.

Its rows that code answers (configs, CUDA versions, BLAS, architectures, switches) are rendered from
the committed ``.ci_support`` configs and ``megabuild.buildenv`` (``scripts/feedstock/parity.py``;
``tests/test_docs.py`` keeps the doc equal to the rendering). Here: the doc's cells agree with what
``megabuild env`` really prints for every config, and a change of the code or a hand edit of the
doc is caught.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from feedstock import doc_tables, parity
from feedstock.configs import Config, list_configs
from feedstock.paths import RECIPE, REPO
from megabuild import model
from megabuild.buildenv import cuda

CONFIGS = list_configs(REPO)
DOC = doc_tables.PACKAGES


def _ids(config: Config) -> str:
    return config.name


def _doc_rows() -> dict[str, list[str]]:
    text = DOC.read_text()
    block = text.split("<!-- generated: conda-forge-changes -->", 1)[1].split(doc_tables.END, 1)[0]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in block.strip().splitlines()[2:]]
    return {row[0]: row for row in rows}


def _megabuild_env(config: Config, cuda_version: str, blas: str, arm: str | None) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"], "PYTHONPATH": str(RECIPE), "target_platform": config.subdir,
        "cuda_compiler_version": cuda_version, "blas_impl": blas, "PREFIX": "/p", "SRC_DIR": "/s",
        "PKG_VERSION": "0", "LIBRARY_PREFIX": "/p/Library", "LIBRARY_INC": "/p/Library/include",
        "LIBRARY_LIB": "/p/Library/lib",
    }  # fmt: skip
    if arm is not None:
        env[model.ARM_VARIANT_KEY] = arm
    proc = subprocess.run(
        [sys.executable, "-m", "megabuild", "env", "--shell", "sh"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return dict(re.findall(r"^export (\w+)='(.*)'$", proc.stdout, re.M))


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_the_doc_says_what_megabuild_env_exports(config: Config) -> None:
    rows = _doc_rows()
    cudas = config.get("cuda_compiler_version") or ["None"]
    arms = config.get(model.ARM_VARIANT_KEY) or [None] * len(cudas)
    variants = model.platform(config.subdir).arm_variants
    for cuda_version, arm in zip(cudas, arms):
        # the arch row names a CUDA version with its arm variant where that is not the default
        label = cuda_version if arm is None or arm == variants[0].name else f"{cuda_version} ({arm})"
        for blas in config.get("blas_impl") or ["generic"]:
            env = _megabuild_env(config, cuda_version, blas, arm)
            configs_cell = rows[f"{config.subdir}: CUDA, BLAS"][2]
            assert (
                blas in configs_cell and (cuda_version if cuda_version != "None" else "CPU") in configs_cell
            )
            assert f"{blas}: `{env['BLAS']}`" in rows["`BLAS`"][2]
            if cuda_version == "None":
                continue
            arch_cell = rows[f"{config.subdir}: architectures"][2]
            assert f"{label}: `{env['TORCH_CUDA_ARCH_LIST']}`" in arch_cell, arch_cell
            for name in ("USE_CUFILE", "USE_MAGMA"):
                cell = rows[f"`{name}`"][2]
                assert re.search(rf"(^|; ){env[name]}: [^;]*\b{config.subdir}\b", cell), (name, cell)


def test_a_changed_arch_list_or_a_hand_edit_makes_the_doc_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text()
    assert doc_tables.refresh(text, "docs/packages.md") == text
    row = next(line for line in text.splitlines() if line.startswith("| linux-64: architectures"))
    edited = text.replace(row, row.replace("9.0+PTX", "9.0;10.0+PTX"))
    assert edited != text and doc_tables.refresh(edited, "docs/packages.md") == text
    planted = dict(cuda.ARCH_LISTS)
    planted["13.0", "linux-64"] = "8.0;12.0+PTX"
    monkeypatch.setattr(cuda, "ARCH_LISTS", planted)
    assert doc_tables.refresh(text, "docs/packages.md") != text


def test_every_conda_forge_fact_is_used() -> None:
    """No recorded conda-forge fact is left without a row (a platform or switch dropped here)."""
    used = {f"configs {c.subdir}" for c in CONFIGS} | {
        f"archs {c.subdir}" for c in CONFIGS if set(c.get("cuda_compiler_version") or ["None"]) != {"None"}
    }
    used |= {"BLAS", *parity.SWITCHES}
    assert set(parity.CONDA_FORGE) == used
