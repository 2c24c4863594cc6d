"""The rehearsal on real binaries (scripts/rehearse.py, docs/rehearsal.md) for torch 2.14.1.

It downloads about 3 GB once (the torch wheel and the wheels its METADATA pins for Linux) into the
shared wheel cache; without them these tests skip with one line, except under
FEEDSTOCK_REQUIRE_REHEARSAL=1 (.ci/run sets it), where the rehearsal downloads them or fails.
Marked ``rehearsal``: .ci/run runs them as their own step, after the main suite, and reports their
time apart (``-m "not rehearsal"`` leaves them out of the main run).

Each test can fail: the two planted runs break the split in a copy of the recipe (a spec rule that
sends libtorch_cpu to pytorch; a link-back whose $PREFIX/lib/libtorch_python.so link dangles) and
must make the rehearsal fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock import patch_check
from feedstock.paths import RECIPE, SCRIPTS
from feedstock.rehearsal import wheels

pytestmark = pytest.mark.rehearsal
VERSION = "2.14.1"
REQUIRE = os.environ.get("FEEDSTOCK_REQUIRE_REHEARSAL") == "1"


def _need_downloads() -> None:
    if wheels.cached(VERSION, patch_check.cache_dir()) is None and not REQUIRE:
        pytest.skip(
            f"no cached torch {VERSION} wheels for the rehearsal (python scripts/rehearse.py downloads them)"
        )
    for tool in ("cmake", "ninja", "g++", "patch"):
        if shutil.which(tool) is None:
            if REQUIRE:
                pytest.fail(f"{tool} not on PATH (FEEDSTOCK_REQUIRE_REHEARSAL=1)")
            pytest.skip(f"{tool} not on PATH")


def _rehearse(work: Path, *extra: str, recipe: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if recipe is not None:  # the planted copy's megabuild, not the checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(recipe), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(SCRIPTS / "rehearse.py"), "--version", VERSION, "--work", str(work), *extra]
    if recipe is not None:
        cmd += ["--recipe", str(recipe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=5400, check=False)
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    return proc


def test_rehearsal_passes_on_the_real_wheel(tmp_path: Path) -> None:
    _need_downloads()
    proc = _rehearse(tmp_path / "work")
    assert proc.returncode == 0, proc.stderr[-2000:] or proc.stdout[-4000:]
    out = proc.stdout
    assert "FAIL" not in out
    # the rendered tests did run in the env, the cmake consumer among them
    assert "ok " in out and "cmake --build cmake_test/build_sp" in out
    for name in ("tensor ops", "autograd", "torch.compile", "cpp_extension.load_inline", "AOTInductor",
                 "shared memory between processes"):  # fmt: skip
        assert f"smoke: {name}" in out


def _recipe_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "recipe"
    shutil.copytree(RECIPE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


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
    assert "libtorch_python" in proc.stdout
