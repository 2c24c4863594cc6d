"""The requirements compared with conda-forge's pytorch-cpu feedstock (``feedstock.requirements_compare``).

The cross-check (:func:`test_conda_forge_differs_only_as_recorded`, run by
``python -m feedstock cross-check``) renders both recipes with conda-build and fails on any
difference ``tests/data/requirements-vs-conda-forge.json`` does not explain. The other tests need
no conda-build: the committed data is complete and agrees with docs/packages.md and the configs,
and the comparison finds planted differences in synthetic rendered metadata.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from feedstock import doc_tables, parity
from feedstock import requirements_compare as rc
from feedstock.configs import list_configs
from feedstock.cross_checks.run_cross_checks import SOURCES
from feedstock.paths import REPO
from support.cross_checks import import_tool, unavailable

SOURCE = next(s for s in SOURCES if s.repo == rc.CONDA_FORGE_REPO)
BLOCK = "<!-- generated: requirements-vs-conda-forge -->"


# -- the cross-check -----------------------------------------------------------------------------


def test_conda_forge_differs_only_as_recorded() -> None:
    """Both recipes rendered by conda-build: every difference is recorded, with its reason."""
    import_tool("conda_build.api")
    where = os.environ.get(rc.CONDA_FORGE_ENV, "")
    if not where or not (Path(where) / "recipe" / "meta.yaml").is_file():
        unavailable(f"${rc.CONDA_FORGE_ENV} names no checkout of {rc.CONDA_FORGE_REPO} ({where or 'unset'})")
    found = rc.compare_feedstocks(Path(where))
    recorded = rc.load()
    problems = rc.check(found, recorded.comparison)
    assert not problems, (
        f"{len(problems)} differences from conda-forge's requirements that {rc.DATA.name} does not "
        "explain (python -m feedstock requirements-compare --write, then give each a "
        "reason and run python -m feedstock update-doc-tables):\n" + "\n".join(problems)
    )


# -- the committed data --------------------------------------------------------------------------


def test_every_recorded_difference_has_a_reason() -> None:
    recorded = rc.load()
    assert recorded.comparison.differences
    missing = [d.describe() for d in recorded.comparison.differences if not d.reason.strip()]
    assert not missing
    keys = [d.key for d in recorded.comparison.differences]
    assert len(keys) == len(set(keys))


def test_the_data_names_the_commit_the_cross_check_renders() -> None:
    recorded = rc.load()
    assert recorded.commit == SOURCE.ref
    assert recorded.commit.startswith(parity.CONDA_FORGE_COMMIT)
    assert SOURCE.paths == ("recipe", ".ci_support")


def test_the_data_pairs_every_config_of_this_feedstock() -> None:
    """A rerender that adds, drops or renames a config makes the data stale before the cross-check runs."""
    pairs = rc.load().comparison.pairs
    assert sorted(ours for _, ours, _ in pairs if ours) == sorted(c.name for c in list_configs(REPO))
    assert all(ours and theirs for _, ours, theirs in pairs), "a config without a counterpart"


def test_every_where_names_a_pair_that_builds_the_package() -> None:
    comparison = rc.load().comparison
    labels = {label for label, _, _ in comparison.pairs}
    for d in comparison.differences:
        built = set(comparison.outputs[d.output])
        assert built <= labels
        for place in d.where:
            pair = next((b for b in built if place == b or place.startswith(b + " ")), None)
            assert pair is not None, (d.describe(), place)


def test_the_docs_table_is_generated_from_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    text = doc_tables.PACKAGES.read_text(encoding="utf-8")
    assert text.count(BLOCK) == 1
    assert doc_tables.refresh(text, "docs/packages.md") == text
    recorded = rc.load()
    block = text.split(BLOCK, 1)[1].split(doc_tables.END, 1)[0]
    rows = block.strip().splitlines()[2:]
    assert len(rows) == len(rc.table_rows(recorded))
    assert sum(row.count("`") for row in rows) >= 2 * len(recorded.comparison.differences)
    first = recorded.comparison.differences[0]
    assert first.reason in rows[0].replace("&gt;", ">").replace("&lt;", "<")
    planted = dataclasses.replace(first, reason="a planted reason")
    changed = dataclasses.replace(
        recorded,
        comparison=dataclasses.replace(
            recorded.comparison, differences=(planted, *recorded.comparison.differences[1:])
        ),
    )
    monkeypatch.setattr(rc, "load", lambda path=rc.DATA: changed)
    assert "a planted reason" in doc_tables.refresh(text, "docs/packages.md")


def test_the_data_round_trips(tmp_path: Path) -> None:
    recorded = rc.load()
    rc.dump(recorded, tmp_path / "data.json")
    assert rc.load(tmp_path / "data.json") == recorded
    assert (tmp_path / "data.json").read_text(encoding="utf-8") == rc.DATA.read_text(encoding="utf-8")


# -- the comparison on synthetic rendered metadata -----------------------------------------------


def _raw(
    name: str,
    build: str,
    sections: Mapping[str, Sequence[str]],
    *,
    version: str = "2.14.1",
    number: int = 300,
    cuda: str = "12.6",
    python: str = "3.12.* *_cpython",
    subdir: str = "linux-64",
    arm: str | None = None,
) -> rc.RawOutput:
    variant = {"target_platform": subdir, "cuda_compiler_version": cuda, "blas_impl": "mkl", "python": python}
    if arm is not None:
        variant["arm_variant_type"] = arm
    return rc.RawOutput(name, version, build, number, variant, sections)


def _ours(extra_run: Sequence[str] = ()) -> list[rc.Rendered]:
    raws = [
        _raw(
            "libtorch", "cuda126_mkl_h0123456_300", {"run": ["libblas * *mkl"], "run_exports": ["libtorch"]}
        ),
        _raw(
            "pytorch",
            "cuda126_mkl_py312_habcdef0_300",
            {"run": ["libtorch", "python", "sympy >=1.13.3", *extra_run], "test.requires": ["pytest"]},
        ),
        _raw(
            "pytorch",
            "cuda126_mkl_py314_habcdef1_300",
            {"run": ["libtorch", "python"]},
            python="3.14.* *_cp314t",
        ),
        _raw("pytorch-gpu", "cuda126_mkl_h0000000_300", {"run": ["pytorch 2.14.1 cuda126_mkl_py*_300"]}),
    ]
    return [rc.normalize("ours", raws)]


def _theirs() -> list[rc.Rendered]:
    raws = [
        _raw(
            "libtorch",
            "cuda129_mkl_h7654321_302",
            {"run": ["libblas * *mkl"], "run_exports": ["libtorch"]},
            version="2.13.0",
            number=302,
            cuda="12.9",
        ),
        _raw(
            "pytorch",
            "cuda129_mkl_py312_h1111111_302",
            {"run": ["libtorch", "python", "sympy >=1.13.3"]},
            version="2.13.0",
            number=302,
            cuda="12.9",
        ),
        _raw(
            "pytorch-tests",
            "cuda129_mkl_py312_h2222222_302",
            {"test.requires": ["pytest"]},
            version="2.13.0",
            number=302,
            cuda="12.9",
        ),
        _raw(
            "pytorch-gpu",
            "cuda129_mkl_h3333333_302",
            {"run": ["pytorch 2.13.0 cuda129_mkl_py*_302"]},
            version="2.13.0",
            number=302,
            cuda="12.9",
        ),
    ]
    return [rc.normalize("theirs", raws)]


def _explained(comparison: rc.Comparison) -> rc.Comparison:
    return rc.Comparison(
        comparison.pairs,
        comparison.outputs,
        tuple(dataclasses.replace(d, reason="recorded") for d in comparison.differences),
    )


def test_versions_build_numbers_and_cuda_versions_are_no_difference() -> None:
    found = rc.compare(_ours(), _theirs())
    assert found.pairs == (("linux-64 cuda12 mkl", "ours", "theirs"),)
    assert {d.describe() for d in found.differences} == {
        "pytorch variant: ours py3.14t, conda-forge's -",
        "pytorch-tests package: ours -, conda-forge's built",
    }
    # pytorch-tests' test requirements count as pytorch's: pytest on both sides
    assert not [d for d in found.differences if d.field == "test.requires"]


def test_a_planted_difference_without_a_reason_fails() -> None:
    recorded = _explained(rc.compare(_ours(), _theirs()))
    assert rc.check(rc.compare(_ours(), _theirs()), recorded) == []
    found = rc.compare(_ours(extra_run=["optree >=0.13.0"]), _theirs())
    problems = rc.check(found, recorded)
    assert problems == [
        "new difference, no reason recorded: pytorch run optree: ours optree >=0.13.0, conda-forge's - "
        "(in linux-64 cuda12 mkl)"
    ]
    # recorded without a reason: still unexplained
    with_empty = rc.with_reasons(found, recorded)
    assert [d.reason for d in with_empty.differences if d.name == "optree"] == [""]
    assert rc.check(found, with_empty) == [
        "no reason recorded: pytorch run optree: ours optree >=0.13.0, conda-forge's -"
    ]
    # with a reason it passes
    assert rc.check(found, _explained(found)) == []


def test_a_recorded_difference_that_no_longer_occurs_or_moved_fails() -> None:
    recorded = _explained(rc.compare(_ours(extra_run=["optree >=0.13.0"]), _theirs()))
    assert rc.check(rc.compare(_ours(), _theirs()), recorded) == [
        "recorded, no longer found: pytorch run optree: ours optree >=0.13.0, conda-forge's -"
    ]
    moved = rc.Comparison(
        recorded.pairs,
        recorded.outputs,
        tuple(dataclasses.replace(d, where=("linux-64 cuda13 mkl",)) for d in recorded.differences),
    )
    problems = rc.check(rc.compare(_ours(extra_run=["optree >=0.13.0"]), _theirs()), moved)
    assert (
        "pytorch run optree: ours optree >=0.13.0, conda-forge's -: recorded in ['linux-64 cuda13 mkl'], "
        "found in ['linux-64 cuda12 mkl']"
    ) in problems


def test_a_changed_version_constraint_is_a_new_difference() -> None:
    recorded = _explained(rc.compare(_ours(), _theirs()))
    ours = _ours()
    pytorch = next(o for o in ours[0].outputs if o.name == "pytorch" and o.variant == "py3.12")
    sections = dict(pytorch.sections)
    sections["run"] = tuple(s.replace("sympy >=1.13.3", "sympy >=1.14") for s in sections["run"])
    changed = dataclasses.replace(pytorch, sections=sections)
    ours = [
        dataclasses.replace(ours[0], outputs=tuple(changed if o is pytorch else o for o in ours[0].outputs))
    ]
    problems = rc.check(rc.compare(ours, _theirs()), recorded)
    assert problems == [
        "new difference, no reason recorded: pytorch run sympy: ours sympy >=1.14, "
        "conda-forge's sympy >=1.13.3 (in linux-64 cuda12 mkl)"
    ]


def test_a_config_without_a_counterpart_makes_its_packages_differences() -> None:
    theirs = [dataclasses.replace(_theirs()[0], pair=rc.Pair("linux-64", "cuda13", "", "mkl"))]
    found = rc.compare(_ours(), theirs)
    packages = {
        (d.output, d.ours, d.conda_forge, d.where) for d in found.differences if d.field == rc.PACKAGE
    }
    assert ("libtorch", "built", None, ("linux-64 cuda12 mkl",)) in packages
    assert ("libtorch", None, "built", ("linux-64 cuda13 mkl",)) in packages
    problems = rc.check(found, _explained(rc.compare(_ours(), _theirs())))
    assert "paired configs not recorded: ('linux-64 cuda13 mkl', None, 'theirs')" in problems
    assert "paired configs recorded, no longer found: ('linux-64 cuda12 mkl', 'ours', 'theirs')" in problems


# -- normalization -------------------------------------------------------------------------------


def _normalized(spec: str, **kw: str | int) -> str:
    ctx = dict(subdir="linux-aarch64", version="2.14.1", build=300, cuda="12.9", blas="generic", arm="tegra")
    ctx.update(kw)
    return rc.normalize_spec(spec, rc.SpecContext(**ctx))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("spec", "normalized"),
    [
        ("pytorch 2.14.1 cuda129_generic_*_300", "pytorch {version} cuda{XY}_{blas}_*_{build}"),
        ("pytorch 2.14.1 cuda*_generic*300", "pytorch {version} cuda*_{blas}*{build}"),
        ("pytorch-cpu 2.14.1", "pytorch-cpu {version}"),
        ("pytorch-gpu <0.0a0", "pytorch-gpu <0.0a0"),
        ("gxx_linux-aarch64 14.*", "gxx_linux-aarch64"),
        ("cuda-nvcc_linux-aarch64 12.9.*", "cuda-nvcc_linux-aarch64"),
        ("cuda-version 12.9", "cuda-version {cuda}"),
        ("arm-variant * tegra", "arm-variant * {arm}"),
        ("libtorch", "libtorch"),
        ("libopenblas * openmp_*", "libopenblas * openmp_*"),
        ("python 3.12", "python 3.12"),
        ("triton 3.8.*", "triton 3.8.*"),
        ("libtorch 2.14.1 cuda129_generic_h*_3000", "libtorch {version} cuda{XY}_{blas}_h*_3000"),
    ],
)
def test_normalize_spec(spec: str, normalized: str) -> None:
    assert _normalized(spec) == normalized


def test_normalize_build_string_and_variants() -> None:
    ctx = rc.SpecContext("linux-64", "2.14.1", 300, "12.6", "mkl")
    assert (
        rc.normalize_build_string("cuda126_mkl_py312_h0f6a710_300", ctx)
        == "cuda{XY}_{blas}_py{py}_h{hash}_{build}"
    )
    assert (
        rc.normalize_build_string("cuda126_mkl_magma_hc4bf373_300", ctx)
        == "cuda{XY}_{blas}_magma_h{hash}_{build}"
    )
    raws = [
        _raw("libtorch-cuda-linalg", "cuda126_mkl_magma_hc4bf373_300", {}, number=350),
        _raw("libtorch-cuda-linalg", "cuda126_mkl_nomagma_h2cb625e_300", {}),
        _raw("pytorch", "cuda126_mkl_py314_h7cf39f7_300", {}, python="3.14.* *_cp314t"),
        _raw("pytorch", "cuda126_mkl_py314_h97a13dc_300", {}, python="3.14.* *_cp314"),
    ]
    rendered = rc.normalize("c", raws)
    assert [(o.name, o.variant) for o in rendered.outputs] == [
        ("libtorch-cuda-linalg", "magma"),
        ("libtorch-cuda-linalg", "nomagma"),
        ("pytorch", "py3.14"),
        ("pytorch", "py3.14t"),
    ]


@pytest.mark.parametrize(
    ("platform", "cuda", "blas", "arm", "label"),
    [
        ("linux-64", "None", "mkl", None, "linux-64 cpu mkl"),
        ("linux-aarch64", "None", None, "sbsa", "linux-aarch64 cpu generic"),
        ("linux-aarch64", "12.6", None, "sbsa", "linux-aarch64 cuda12 generic"),
        ("linux-aarch64", "12.9", None, "tegra", "linux-aarch64 cuda12 tegra generic"),
        ("win-64", "13.0", "mkl", None, "win-64 cuda13 mkl"),
    ],
)
def test_configs_pair_by_platform_cuda_major_arm_variant_and_blas(
    platform: str, cuda: str, blas: str | None, arm: str | None, label: str
) -> None:
    variant = {"target_platform": platform, "cuda_compiler_version": cuda}
    variant.update({"blas_impl": blas} if blas else {})
    variant.update({"arm_variant_type": arm} if arm else {})
    assert rc.pair_of(variant).label == label


def test_where_cell_names_groups() -> None:
    built = [
        "linux-64 cpu generic",
        "linux-64 cpu mkl",
        "linux-64 cuda12 generic",
        "linux-64 cuda12 mkl",
        "osx-arm64 cpu generic",
    ]
    assert rc.where_cell(built, built) == "all"
    assert rc.where_cell(["linux-64 cuda12 generic", "linux-64 cuda12 mkl"], built) == "linux-64 CUDA"
    assert rc.where_cell(
        ["linux-64 cpu generic", "linux-64 cuda12 generic", "osx-arm64 cpu generic"], built
    ) == ("linux-64 generic; osx-arm64")
    assert rc.where_cell(["linux-64 cpu mkl py3.12"], built) == "linux-64 (cpu mkl py3.12)"
