"""The harness's choice of the pytorch outputs' order (conda-build's own changes from run to run)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from feedstock.conda_build_standin.conda_build import HarnessError, order_linalg, order_pythons, plan
from megabuild.model import LIBTORCH, PYTORCH


def _outputs(*pythons: str) -> list[SimpleNamespace]:
    outs = [SimpleNamespace(name="libtorch", variant={"python": "3.10.* *_cpython"})]
    outs += [SimpleNamespace(name="pytorch", variant={"python": f"{py}.* *_cpython"}) for py in pythons]
    return [*outs, SimpleNamespace(name="pytorch-gpu", variant={"python": "3.10.* *_cpython"})]


def _order(outputs: list[SimpleNamespace]) -> list[str]:
    return [o.variant["python"].split(".*")[0] if o.name == "pytorch" else o.name for o in outputs]


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("megabuild-last", ["libtorch", "3.10", "3.13", "3.12", "pytorch-gpu"]),
        ("ascending", ["libtorch", "3.10", "3.12", "3.13", "pytorch-gpu"]),
        ("3.12,3.13,3.10", ["libtorch", "3.12", "3.13", "3.10", "pytorch-gpu"]),
    ],
)
def test_pytorch_outputs_take_the_chosen_order_in_their_places(order: str, expected: list[str]) -> None:
    assert _order(order_pythons(_outputs("3.12", "3.10", "3.13"), "3.12", order)) == expected


@pytest.mark.parametrize("order", ["3.12,3.13", "3.12,3.13,3.10,3.11", "3.12,3.12,3.10"])
def test_an_explicit_order_must_list_exactly_the_runs_pythons(order: str) -> None:
    with pytest.raises(HarnessError, match="does not list exactly this run's Pythons"):
        order_pythons(_outputs("3.12", "3.10", "3.13"), "3.12", order)


def test_an_order_that_is_no_order_is_one_error() -> None:
    with pytest.raises(HarnessError, match=r"expected megabuild-last, ascending or X\.Y,X\.Y"):
        order_pythons(_outputs("3.12", "3.10"), "3.12", "newest-first")


def _rendered(name: str, build: str, **variant: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, build_string=build, version="2.14.1", variant=variant)


def test_a_libtorch_per_python_is_a_render_anomaly() -> None:
    """Every config is a megabuild: libtorch is built once, so a render that gives one libtorch per
    Python (libtorch "using" python) is reported, not built twice."""
    outputs = [
        _rendered(LIBTORCH, "cpu_generic_h1_0", python="3.12.* *_cpython"),
        _rendered(LIBTORCH, "cpu_generic_h2_0", python="3.13.* *_cpython"),
        _rendered(PYTORCH, "cpu_generic_py312_h3_0", python="3.12.* *_cpython"),
        _rendered(PYTORCH, "cpu_generic_py313_h4_0", python="3.13.* *_cpython"),
    ]
    built, anomalies, rewrites = plan(outputs)
    assert [(o.name, o.build_string) for o in built] == [
        (LIBTORCH, "cpu_generic_h1_0"),
        (PYTORCH, "cpu_generic_py312_h3_0"),
        (PYTORCH, "cpu_generic_py313_h4_0"),
    ]
    assert len(anomalies) == 1 and f"a second {LIBTORCH}" in anomalies[0]
    assert rewrites == {f"{LIBTORCH} 2.14.1 cpu_generic_h2_0": f"{LIBTORCH} 2.14.1 cpu_generic_h1_0"}


@pytest.mark.parametrize(("magma_first", "expected"), [(None, ["false", "true"]), (True, ["true", "false"]),
                                                        (False, ["false", "true"])])  # fmt: skip
def test_linalg_variants_take_the_chosen_order_in_their_places(
    magma_first: bool | None, expected: list[str]
) -> None:
    names = ("false", "true")
    linalg = [SimpleNamespace(name="libtorch-cuda-linalg", variant={"with_magma": m}) for m in names]
    outs = [SimpleNamespace(name="libtorch", variant={}), *linalg]
    outs.append(SimpleNamespace(name="pytorch", variant={}))
    ordered = order_linalg(outs, magma_first)
    assert [o.name for o in ordered] == [o.name for o in outs]
    assert [o.variant["with_magma"] for o in ordered[1:3]] == expected
