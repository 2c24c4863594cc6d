"""Unit tests of scripts/feedstock/channel.py: index records, stand-ins, the local channel, solving."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from feedstock.channel import (
    Channel,
    SolveError,
    index_record,
    satisfying_version,
    stand_in_records,
    write_channel,
)

V = "2.13.0"


def rendered(name: str, build: str, number: int, depends: list[str], constrains: list[str] = ()) -> dict:
    return {
        "config": "linux_64_test",
        "name": name,
        "version": V,
        "build_string": build,
        "build_number": number,
        "subdir": "linux-64",
        "depends": depends,
        "constrains": list(constrains),
        "track_features": [],
        "noarch": None,
    }


def test_index_record_has_conda_build_fields() -> None:
    record = index_record(
        rendered("libtorch", "cpu_mkl_h1_100", 100, ["libblas * *mkl"], ["pytorch-gpu <0.0a0"])
    )
    assert record["name"] == "libtorch"
    assert record["build"] == "cpu_mkl_h1_100"
    assert record["build_number"] == 100
    assert record["depends"] == ["libblas * *mkl"]
    assert record["constrains"] == ["pytorch-gpu <0.0a0"]
    assert record["subdir"] == "linux-64"
    assert "noarch" not in record and "track_features" not in record


def test_index_record_rejects_noarch_outputs() -> None:
    with pytest.raises(ValueError, match="noarch"):
        index_record({**rendered("pytorch-cpu", "cpu_h1_0", 0, []), "noarch": "generic"})


@pytest.mark.parametrize(
    ("spec", "expected"),
    [(None, "1.0.0"), (">=3.9.0,<4.0a0", "3.9.0"), ("2.9.0.*", "2.9.0"), (">1.2", "1.2.1"), ("<2", "0.1")],
)
def test_satisfying_version(spec: str | None, expected: str) -> None:
    assert satisfying_version(spec) == expected


def test_stand_ins_cover_python_blas_cuda_and_generic_names() -> None:
    ours = [
        index_record(
            rendered(
                "pytorch",
                "cuda126_mkl_py312_h1_300",
                300,
                ["libblas * *mkl", "cuda-version >=12.6,<13", "numpy >=1.23,<3", "filelock", "__cuda"],
            )
        )
    ]
    stand_ins = stand_in_records(ours, "linux-64")
    names = {(r["name"], r["build"]) for r in stand_ins}
    assert {("python", "h0_cpython"), ("python_abi", "8_cp310"), ("python_abi", "8_cp314")} <= names
    assert {("python", "h0_cp314t"), ("python_abi", "8_cp314t")} <= names  # the free-threaded 3.14
    assert {
        ("libblas", "35_linux64_mkl"),
        ("libblas", "35_linux64_openblas"),
        ("nomkl", "h0_openblas"),
    } <= names
    assert not any(name.startswith("__") for name, _ in names), "virtual packages are never records"
    cuda = next(r for r in stand_ins if r["name"] == "cuda-version")
    assert cuda["version"] == "12.6" and "__cuda >=12" in cuda["constrains"]
    numpy = [r for r in stand_ins if r["name"] == "numpy"]
    assert len(numpy) == 6, "numpy is built per Python (3.10-3.14 and 3.14t)"
    assert [d for r in numpy for d in r["depends"] if d.endswith("t")] == ["python_abi 3.14.* *_cp314t"]
    filelock = next(r for r in stand_ins if r["name"] == "filelock")
    assert filelock["subdir"] == "noarch" and filelock["depends"] == []


def test_same_file_name_with_different_metadata_is_an_error(tmp_path: Path) -> None:
    a = rendered("libtorch", "cpu_mkl_h1_100", 100, ["libblas * *mkl"])
    b = rendered("libtorch", "cpu_mkl_h1_100", 100, [])
    with pytest.raises(ValueError, match="rendered twice"):
        write_channel([a, b], tmp_path)


def test_channel_layout_and_solve(tmp_path: Path) -> None:
    outputs = [
        rendered("pytorch", "cpu_mkl_py312_h1_100", 100, ["python >=3.12,<3.13.0a0", "libblas * *mkl"]),
        rendered("pytorch", "cuda126_mkl_py312_h1_300", 300, ["python >=3.12,<3.13.0a0", "__cuda"]),
    ]
    write_channel(outputs + outputs, tmp_path)  # identical duplicates (two configs) are fine
    repodata = json.loads((tmp_path / "linux-64" / "repodata.json").read_text())
    assert "pytorch-2.13.0-cpu_mkl_py312_h1_100.conda" in repodata["packages.conda"]
    assert (tmp_path / "noarch" / "repodata.json").is_file()

    channel = Channel(tmp_path)
    assert channel.solve(["pytorch"], "linux-64")["pytorch"].build == "cpu_mkl_py312_h1_100"
    assert channel.solve(["pytorch"], "linux-64", {"__cuda": "12.6"})["pytorch"].build_number == 300
    with pytest.raises(SolveError, match="python"):
        channel.solve(["pytorch", "python=3.11"], "linux-64")
