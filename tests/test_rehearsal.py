"""The rehearsal on real binaries (python -m feedstock rehearse, docs/rehearsal.md) for torch 2.14.1.

It downloads about 3 GB once (the torch wheel and the wheels its METADATA pins for Linux) into the
shared wheel cache; without them these tests skip with one line, except under
FEEDSTOCK_REQUIRE_REHEARSAL=1 (.ci/run sets it), where the rehearsal downloads them or fails.
The three runs are marked ``rehearsal``: .ci/run runs them as their own step, after the main
suite, with their own time (pyproject's addopts leave them out of the main run; ``-mrehearsal``
selects them). The checks of the parts below run in the main suite, in seconds.

Each test can fail: the two planted runs break the split in a copy of the recipe (a spec rule that
sends libtorch_cpu to pytorch; a link-back whose $PREFIX/lib/libtorch_python.so link dangles) and
must make the rehearsal fail, caught twice: by the split procedure's own rendered file tests
(feedstock.split_check.split_run, a ``FAIL split:`` line) and by the rendered tests in the installed env.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from feedstock import patch_check
from feedstock.paths import RECIPE
from feedstock.rehearsal import wheels
from support.tools import tool_argv

VERSION = "2.14.1"
REQUIRE = os.environ.get("FEEDSTOCK_REQUIRE_REHEARSAL") == "1"


def _need_downloads() -> None:
    if wheels.cached(VERSION, patch_check.cache_dir()) is None and not REQUIRE:
        pytest.skip(f"no cached torch {VERSION} wheels (python -m feedstock rehearse downloads them)")
    for tool in ("cmake", "ninja", "g++", "patch"):
        if shutil.which(tool) is None:
            if REQUIRE:
                pytest.fail(f"{tool} not on PATH (FEEDSTOCK_REQUIRE_REHEARSAL=1)")
            pytest.skip(f"{tool} not on PATH")


def _rehearse(work: Path, *extra: str, recipe: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if recipe is not None:  # the planted copy's megabuild, not the checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(recipe), env.get("PYTHONPATH", "")])
    cmd = [*tool_argv("rehearse"), "--version", VERSION, "--work", str(work), *extra]
    if recipe is not None:
        cmd += ["--recipe", str(recipe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=5400, check=False)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


@pytest.mark.rehearsal
def test_rehearsal_passes_on_the_real_wheel(tmp_path: Path) -> None:
    _need_downloads()
    proc = _rehearse(tmp_path / "work")
    assert proc.returncode == 0, proc.stderr[-2000:] or proc.stdout[-4000:]
    out = proc.stdout
    assert "FAIL" not in out
    # the split procedure ran its rendered file tests, and every file is in exactly one package
    assert "file checks of the rendered tests ran, 0 failed" in out and "the split: 0 ACTION" in out
    # the rendered tests did run in the env, the cmake consumer among them
    assert "ok " in out and "cmake --build cmake_test/build_sp" in out
    for name in ("tensor ops", "autograd", "torch.compile", "cpp_extension.load_inline", "AOTInductor",
                 "shared memory between processes"):  # fmt: skip
        assert f"smoke: {name}" in out
    _magma_is_judged_without_a_gpu(tmp_path / "work" / "env", tmp_path)


def _magma_is_judged_without_a_gpu(prefix: Path, tmp_path: Path) -> None:
    """The real torch (no GPU here) answers the MAGMA question of check-torch-config under CI: it
    matches the installed magma variant, and a conda-meta record of the nomagma variant fails."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(RECIPE), "CI": "true"}
    check = [str(prefix / "bin/python"), "-m", "megabuild", "check-torch-config", "--prefix", str(prefix),
             "--blas", "mkl", "--cuda-version", "13.0"]  # fmt: skip
    done = subprocess.run(check, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "MAGMA from torch._C._has_magma: True" in done.stderr  # the wheel's C++ is unpatched
    (record,) = (prefix / "conda-meta").glob("libtorch-cuda-linalg-*_magma_*.json")
    data = json.loads(record.read_text())
    data["build"] = data["build"].replace("_magma_", "_nomagma_")
    record.unlink()
    planted = prefix / "conda-meta" / f"{data['name']}-{data['version']}-{data['build']}.json"
    planted.write_text(json.dumps(data))
    done = subprocess.run(check, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 1 and done.stdout.splitlines() == [
        "torch-config: torch.__config__.show(): no MAGMA installed, but torch._C._has_magma is True"
    ], done.stdout + done.stderr


def _recipe_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "recipe"
    shutil.copytree(RECIPE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


@pytest.mark.rehearsal
def test_a_rule_sending_libtorch_cpu_to_pytorch_fails_it(tmp_path: Path) -> None:
    _need_downloads()
    recipe = _recipe_copy(tmp_path)
    spec_path = recipe / "split_spec.json"
    spec = json.loads(spec_path.read_text())
    (rule,) = [r for r in spec["rules"] if r["pattern"] == "lib/libtorch_cpu{shlib}"]
    rule["output"] = "pytorch"
    spec_path.write_text(json.dumps(spec))
    proc = _rehearse(tmp_path / "work", "--no-compare", recipe=recipe)
    assert proc.returncode != 0, proc.stdout[-3000:]
    # caught by the rendered tests of libtorch: its library is not where libtorch puts it
    assert _failed(proc.stdout, "test -f $PREFIX/lib/libtorch_cpu${SHLIB_EXT}"), proc.stdout[-3000:]
    assert _failed(proc.stdout, "test -f $PREFIX/lib/libtorch_cpu${SHLIB_EXT}", "FAIL split:")


def _failed(out: str, command: str, start: str = "FAIL ") -> bool:
    """A report line of a failed check (``FAIL split:``: the split procedure's) naming ``command``."""
    return any(line.startswith(start) and command in line for line in out.splitlines())


@pytest.mark.rehearsal
def test_a_dangling_link_back_fails_it(tmp_path: Path) -> None:
    _need_downloads()
    recipe = _recipe_copy(tmp_path)
    link_back = recipe / "megabuild" / "split" / "link_back.py"
    text = link_back.read_text()
    planted = text.replace(
        'os.path.join(places.real_sp, "torch", rel),', 'os.path.join(places.real_sp, "torch", rel + ".gone"),'
    )
    assert planted != text, "the planted mistake no longer matches link_back.py"
    link_back.write_text(planted)
    proc = _rehearse(tmp_path / "work", "--no-compare", recipe=recipe)
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert _failed(proc.stdout, "test -f $PREFIX/lib/libtorch_python${SHLIB_EXT}"), proc.stdout[-3000:]
    assert _failed(proc.stdout, "test -f $PREFIX/lib/libtorch_python${SHLIB_EXT}", "FAIL split:")


# -- the parts, in the main suite (seconds; the torch wheel alone, or nothing) ---------------------


def _torch_wheel() -> Path:
    wheel = wheels.torch_wheel_path(VERSION, patch_check.cache_dir())
    if not wheel.is_file():
        pytest.skip(f"no cached {wheel.name} (python -m feedstock rehearse downloads it)")
    return wheel


def test_patches_reach_the_packaged_files_and_leave_compiled_ones_whole() -> None:
    from feedstock.rehearsal.patches import patched_members

    patches = sorted((RECIPE / "patches").glob("*.patch"))
    replaced, fates = patched_members(_torch_wheel(), patches)
    applied = {f.patch[:4] for f in fates if f.applied}
    # 0001 (torch.cuda.has_magma) needs its C++ half: applying its Python half alone would break
    assert "0001" not in applied and {"0003", "0004", "0007"} <= applied, [f.line() for f in fates]
    config = replaced["torch/share/cmake/Torch/TorchConfig.cmake"].decode()
    assert "_conda_prefix" in config and "@" not in config.replace("@ONLY", "")
    aten = replaced["torch/share/cmake/ATen/ATenConfig.cmake"].decode()
    assert '"${_aten_prefix}/include"' in aten
    assert "PREFIX" in replaced["torch/utils/cpp_extension.py"].decode()


def test_conda_metadata_leaves_out_the_release_pins_only() -> None:
    from feedstock.rehearsal.tree import conda_metadata

    text = (
        "Name: torch\nRequires-Dist: filelock\n"
        "Requires-Dist: nvidia-nccl-cu13==2.30.7; platform_system == 'Linux'\n"
        "Requires-Dist: cuda-toolkit[cudart]==13.0.3\nRequires-Dist: triton~=3.8.0\n"
    )
    assert conda_metadata(text) == "Name: torch\nRequires-Dist: filelock\nRequires-Dist: triton~=3.8.0\n"


@pytest.mark.parametrize(
    ("member", "where"),
    [
        ("nvidia/cu13/lib/libcudart.so.13", "lib/libcudart.so.13"),
        ("nvidia/cudnn/lib/libcudnn.so.9", "lib/libcudnn.so.9"),
        ("nvidia/cu13/include/cuda_runtime.h", "targets/x86_64-linux/include/cuda_runtime.h"),
        ("nvidia/cu13/bin/nvcc", "bin/nvcc"),
        ("nvidia/cu13/nvvm/bin/cicc", "nvvm/bin/cicc"),
        ("nvidia_cudnn_cu13-9.24.0.43.dist-info/METADATA", None),
        ("nvidia/__init__.py", None),
    ],
)
def test_cuda_files_go_where_conda_forge_puts_them(member: str, where: str | None) -> None:
    from feedstock.rehearsal.cuda_layout import destination

    assert destination(member) == where


def test_the_wheel_pins_resolve_for_linux_only() -> None:
    requirements = wheels.linux_requirements(_torch_wheel())
    names = {r.split("[")[0].split("=")[0].split("<")[0].split(">")[0].split("~")[0] for r in requirements}
    assert {"nvidia-cudnn-cu13", "triton", "sympy", "cuda-toolkit"} <= names
    assert not any("extra" in r or ";" in r for r in requirements)  # markers evaluated, extras left out
    assert wheels.toolkit_requirements(requirements, ["nvcc"]) == ["cuda-toolkit[nvcc]==13.0.3"]


def _env_python_without_pip(where: Path) -> Path:
    """A fresh env's interpreter, as the rehearsal's env has one before ensurepip."""
    import venv

    venv.create(where, with_pip=False)
    return where / "bin" / "python"


@pytest.mark.parametrize("failure", ["bad wheel", "no python"])
def test_a_failing_pip_install_is_one_line(
    tmp_path: Path, failure: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """pip failing after the solve (a full disk, a bad wheel) ends the rehearsal with one line, pip's
    last line in it: here pip refuses a wheel that is no zip, or the env has no python to run it."""
    from feedstock.commands import rehearse
    from feedstock.errors import run_main

    def main(_argv: object) -> int:
        rehearse.pip_after_the_solve(python, [wheel])
        return 0

    wheel = tmp_path / "broken-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not a zip")
    if failure == "bad wheel":
        python = _env_python_without_pip(tmp_path / "env")
        expected = f"python -m pip install: ERROR: Wheel 'broken' located at {wheel} is invalid."
    else:
        python = tmp_path / "env" / "bin" / "python"
        expected = f"python -m ensurepip --default-pip: cannot run {python}: No such file or directory"
    code = run_main("rehearse.py", main)
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines() == [f"rehearse.py: error: {expected}"], err
