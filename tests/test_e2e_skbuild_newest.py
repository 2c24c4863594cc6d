"""The end-to-end megabuild again, with PyPI's newest scikit-build-core (1.1.2) in every host env,
a CPU config and the pytorch outputs in ascending Python order (the top level's Python first).

``tests/test_e2e_megabuild.py`` runs the CUDA config with the scikit-build-core conda-forge ships
(1.0.3), the top level's Python last. Between them: both backend versions that matter, both
orders, both config kinds. This run checks what the backend version could change: no cache
clearing, only the Python-dependent targets compile for another Python, the per-Python wheel
holds no libtorch, and the packages install and import.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from feedstock.conda_build_standin import channel, ninja
from feedstock.conda_build_standin.conda_build import RunResult, find_config, run_config
from feedstock.conda_build_standin.cpythons import find_cpythons

pytestmark = pytest.mark.slow
NEWEST = "1.1.2"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    for tool in ("cmake", "ninja", "g++", "gcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    pytest.importorskip("rattler")
    found = {c.short: c for c in find_cpythons()}
    if "3.12" not in found or len(found) < 2:
        pytest.skip(f"needs 3.12 and another CPython, found {sorted(found)}")
    pythons = [found["3.12"], found[next(v for v in found if v != "3.12")]]
    work = tmp_path_factory.mktemp("e2e-newest")
    return run_config(find_config("linux_64_cpu"), work, pythons=pythons, cpu_count=os.cpu_count() or 2,
                      python_order="ascending", skbuild_version=NEWEST)  # fmt: skip


def test_every_step_ran_the_newest_backend_without_clearing(run: RunResult) -> None:
    order = [s.python for s in run.steps if s.name == "pytorch"]
    assert order == sorted(order, key=lambda v: tuple(map(int, v.split(".")))), order
    for step in (s for s in run.steps if s.name in ("libtorch-split", "pytorch")):
        log = step.log.read_text(errors="replace")
        assert f"*** scikit-build-core {NEWEST}" in log, step.name
        assert "cleared the CMake cache" not in log and "clearing cache" not in log, step.name


def test_other_pythons_compile_only_python_targets(run: RunResult) -> None:
    for step in (s for s in run.steps if s.name == "pytorch"):
        compiled = ninja.by_target(o for o in step.ninja_ran if ninja.kind(o) == "compile")
        print(f"\npython {step.python}: compiled {compiled}")
        # "torch" (empty.cpp) too, unless patch 0012 keeps the configure from rewriting it
        assert set(compiled) <= {"torch_python", "_C"}, compiled


def test_per_python_wheel_holds_no_libtorch(run: RunResult) -> None:
    for pkg in run.packages_named("pytorch"):
        (record,) = [f for f in pkg.files if f.endswith(".dist-info/RECORD")]
        wheel = (pkg.root / record).read_text()
        assert "torch/lib/libtorch_cpu.so," not in wheel and "torch/lib/libtorch_python.so," in wheel


@pytest.mark.parametrize("index", [0, 1])
def test_installed_pytorch_imports(run: RunResult, index: int) -> None:
    py = sorted(run.pythons)[index]
    prefix = run.work / "envs" / f"py{py}"
    channel.create_env(run.channel, ["pytorch", f"python {py}.*"], prefix, run.work / "cache" / "rattler", {})
    script = (
        "import json, torch; "
        "print(json.dumps([torch.__version__, torch.ones_sum(3), torch._C._compiled_python()]))"
    )
    proc = channel.run_in_env(prefix, script, run.work / "home")
    assert proc.returncode == 0, proc.stderr
    version, total, compiled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert version == "2.14.1" and total == 6.0 and compiled.startswith(py)
    assert Path(prefix).is_dir()
