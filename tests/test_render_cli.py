"""python -m feedstock render: aliases, --json, and the one-line error for unknown configs."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from feedstock.paths import REPO as ROOT
from support.tools import tool_argv

TOY = ROOT / "tests" / "projects" / "render_recipe"


def run(*args: str, feedstock: Path = TOY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        tool_argv("render", *args, "--feedstock", str(feedstock)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_alias_text_output() -> None:
    proc = run("linux_64_cuda12.6")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("== linux_64_cuda_compiler_version12.6  (linux_64_cuda12.6, 7 outputs)\n")
    assert "toy 1.2.0 cuda126_mkl_py312_h" in proc.stdout
    assert "(build number 353)" in proc.stdout  # the magma linalg
    assert "      - libmagma <0.0a0\n" in proc.stdout


def test_platform_alias_selects_every_matching_config() -> None:
    proc = run("linux_64")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("\n== ") + proc.stdout.startswith("== ") == 2


def test_json_output() -> None:
    proc = run("linux_64_cpu", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [(o["config"], o["name"]) for o in data] == [
        ("linux_64_cuda_compiler_versionNone", "toylib"),
        ("linux_64_cuda_compiler_versionNone", "toy"),
        ("linux_64_cuda_compiler_versionNone", "toy"),
        ("linux_64_cuda_compiler_versionNone", "toy"),
        ("linux_64_cuda_compiler_versionNone", "toy-cpu"),
    ]
    assert data[-1]["track_features"] == ["toy-cpu"]
    assert data[1]["variant"]["python"] == "3.11.* *_cpython"
    assert data[1]["subdir"] == "linux-64"


def test_unknown_config_is_a_one_line_error_with_exit_2() -> None:
    proc = run("linux_64_cuda11.8")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "unknown config 'linux_64_cuda11.8'" in proc.stderr
    assert proc.stderr.startswith("feedstock render: error: ")
    assert proc.stderr.endswith("aliases: linux_64, osx_64, linux_64_cuda12.6, linux_64_cpu\n")


def test_render_error_is_reported_without_traceback(tmp_path: Path) -> None:
    (tmp_path / "recipe").mkdir()
    (tmp_path / "recipe" / "meta.yaml").write_text("package:\n  name: x  # [not_a_selector_name]\n")
    (tmp_path / ".ci_support").mkdir()
    (tmp_path / ".ci_support" / "linux_64_.yaml").write_text("target_platform:\n- linux-64\n")
    proc = run("linux_64", feedstock=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "unknown name 'not_a_selector_name'" in proc.stderr


@pytest.mark.skipif(not list((ROOT / ".ci_support").glob("*.yaml")), reason=".ci_support/ has no configs yet")
def test_real_feedstock_cuda_alias_and_json() -> None:
    text = run("linux_64_cuda12.6", feedstock=ROOT)
    assert text.returncode == 0, text.stderr
    assert "libtorch-cuda-linalg 2." in text.stdout and "pytorch-gpu 2." in text.stdout
    proc = run("linux_64_cuda12.6", "--json", feedstock=ROOT)
    assert proc.returncode == 0, proc.stderr
    names = {o["name"] for o in json.loads(proc.stdout)}
    assert names == {"libtorch-cuda-linalg", "libtorch", "pytorch", "pytorch-gpu"}
