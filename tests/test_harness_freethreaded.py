"""The conda-build harness keeps a free-threaded Python apart from the GIL build of its version.

Fast checks of the pieces ``test_e2e_megabuild`` runs with the real 3.13t interpreter: the config's
``3.14.* *_cp314t`` entry retargeted to the free-threaded CPython here, the output order GIL -> t
-> GIL, the host Python picked by build, conda-build's ``PY_VER``/``SP_DIR`` for it, and the
stand-in channel's ``python_abi`` for it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from feedstock.channel import stand_in_records
from feedstock.conda_build_standin.conda_build import (
    HarnessError,
    find_config,
    order_pythons,
    restrict_pythons,
    script_env,
    variant_python,
    variant_value,
)
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.prefix import pick_python

CUDA_CONFIG = "linux_64_cuda12.6"


@pytest.mark.parametrize(
    ("value", "python"),
    [("3.12.* *_cpython", "3.12"), ("3.13.* *_cp313", "3.13"), ("3.13.* *_cp313t", "3.13t"),
     ("3.14.* *_cp314t", "3.14t"), ("3.12", "3.12"), ("3.13t", "3.13t")],
)  # fmt: skip
def test_variant_python_names_the_build(value: str, python: str) -> None:
    assert variant_python(value) == python


def test_variant_value_round_trips() -> None:
    assert variant_value("3.13t") == "3.13.* *_cp313t"
    assert variant_python(variant_value("3.13t")) == "3.13t"
    assert variant_python(variant_value("3.12")) == "3.12"


def test_the_configs_freethreaded_entry_is_retargeted_to_the_one_here(tmp_path: Path) -> None:
    """The configs build 3.14t; here the free-threaded CPython is 3.13t: it takes 3.14t's place,
    and the GIL 3.13 entry stays the GIL build."""
    config = find_config(CUDA_CONFIG)
    assert "3.14.* *_cp314t" in yaml.safe_load(config.read_text())["python"]
    dest, pythons, retargeted = restrict_pythons(config, ["3.12", "3.13", "3.13t"], tmp_path / "c.yaml")
    assert pythons == ["3.12", "3.13", "3.13t"]
    assert retargeted == {"3.14t": "3.13t"}
    assert yaml.safe_load(dest.read_text())["python"] == [
        "3.12.* *_cpython",
        "3.13.* *_cp313",
        "3.13.* *_cp313t",
    ]


def test_without_a_freethreaded_python_only_gil_builds_remain(tmp_path: Path) -> None:
    dest, pythons, retargeted = restrict_pythons(
        find_config(CUDA_CONFIG), ["3.12", "3.13"], tmp_path / "c.yaml"
    )
    assert pythons == ["3.12", "3.13"] and not retargeted
    assert yaml.safe_load(dest.read_text())["python"] == ["3.12.* *_cpython", "3.13.* *_cp313"]


def _outputs(*values: str) -> list[SimpleNamespace]:
    return [SimpleNamespace(name="pytorch", variant={"python": v}) for v in values]


def _order(outputs: list[SimpleNamespace]) -> list[str]:
    return [variant_python(o.variant["python"]) for o in outputs]


def test_megabuild_last_goes_gil_then_freethreaded_then_gil() -> None:
    outs = _outputs("3.12.* *_cpython", "3.13.* *_cp313t", "3.13.* *_cp313")
    assert _order(order_pythons(outs, "3.12", "megabuild-last")) == ["3.13", "3.13t", "3.12"]
    assert _order(order_pythons(outs, "3.12", "ascending")) == ["3.12", "3.13", "3.13t"]
    assert _order(order_pythons(outs, "3.12", "3.13t,3.12,3.13")) == ["3.13t", "3.12", "3.13"]


@pytest.mark.parametrize("order", ["3.13,3.13,3.12", "3.13,3.12", "3.13t,3.13t,3.12"])
def test_an_explicit_order_tells_the_two_builds_apart(order: str) -> None:
    outs = _outputs("3.12.* *_cpython", "3.13.* *_cp313t", "3.13.* *_cp313")
    with pytest.raises(HarnessError, match="does not list exactly this run's Pythons"):
        order_pythons(outs, "3.12", order)


def _cpython(version: tuple[int, int, int], freethreaded: bool = False) -> CPython:
    return CPython(version, Path(f"/py{version}{freethreaded}/bin/python"), Path("/py"), freethreaded)


def test_pick_python_takes_the_build_asked_for() -> None:
    gil12, gil13, ft13 = _cpython((3, 12, 1)), _cpython((3, 13, 0)), _cpython((3, 13, 5), True)
    pythons = [gil12, gil13, ft13]
    assert pick_python("3.13", pythons) is gil13
    assert pick_python("3.13t", pythons) is ft13
    assert pick_python("3.14t", pythons) is ft13  # the closest free-threaded one
    assert pick_python("3.12", [gil12, ft13]) is gil12
    assert pick_python("3.12", [ft13]) is ft13  # only when there is no GIL build at all


def test_conda_build_variables_of_a_freethreaded_host(tmp_path: Path) -> None:
    """conda-build 26.7.1: PY_VER is X.Y for both builds; SP_DIR is the build's own lib dir."""
    if any(shutil.which(t) is None for t in ("cmake", "ninja", "cc", "c++", "gcc", "g++", "ld")):
        pytest.skip("the harness's build tools are not on PATH")

    def env(python: str) -> dict[str, str]:
        return script_env(
            work=tmp_path, src_dir=tmp_path / "work", prefix=tmp_path / "h", build_prefix=tmp_path / "b",
            pkg_name="pytorch", version="2.14.1", build_number=0, build_string="x", python=python,
            variant={"python": variant_value(python)}, extra_keys=(), cpu_count=2,
        )  # fmt: skip

    ft, gil = env("3.13t"), env("3.13")
    assert ft["PY_VER"] == gil["PY_VER"] == "3.13"
    assert ft["SP_DIR"] == str(tmp_path / "h" / "lib" / "python3.13t" / "site-packages")
    assert gil["SP_DIR"] == str(tmp_path / "h" / "lib" / "python3.13" / "site-packages")
    # conda-build hands a script no `python` variable (seen by the real conda-build cross-check)
    assert "python" not in ft and "python" not in gil


def test_the_stand_in_channel_offers_the_harness_freethreaded_abi() -> None:
    records = [{"name": "pytorch", "depends": ["python_abi 3.13.* *_cp313t", "numpy"]}]
    default = {(r["name"], r["build"]) for r in stand_in_records(records, "linux-64")}
    assert ("python_abi", "8_cp313t") not in default and ("python_abi", "8_cp314t") in default
    extended = stand_in_records(records, "linux-64", ("3.14", "3.13"))
    abi = [r for r in extended if r["name"] == "python_abi" and r["build"] == "8_cp313t"]
    assert len(abi) == 1 and abi[0]["track_features"] == "py_freethreading"
    assert ("numpy", "py313t_h0_0") in {(r["name"], r["build"]) for r in extended}
