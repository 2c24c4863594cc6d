"""End-to-end megabuild of the miniature PyTorch-shaped fixture through the real recipe scripts.

One module-scoped run (``tests/harness``) of a CUDA-like megabuild config: the real
``recipe/build.sh`` builds ``tests/fixture/minitorch`` with real CMake/Ninja/compilers, every
output's real script runs in a fresh conda-like host prefix, real ``.conda`` files are indexed
into a local channel, and py-rattler solves and installs ``pytorch`` for each Python.

With the free-threaded CPython (``.ci/provision-freethreaded-python.sh``) the megabuild also builds
its ``pytorch`` (``python 3.13.* *_cp313t``, in the config's ``3.14.* *_cp314t`` place), between
two GIL Pythons: 3.12 (top level) -> 3.13 -> 3.13t -> 3.12. Without it the free-threaded tests
skip (fail under ``FEEDSTOCK_REQUIRE_FREETHREADED``) and the rest runs with the GIL Pythons.

Environment knobs: ``MEGABUILD_E2E_PYTHONS`` (comma-separated Python builds, ``3.13t`` for the
free-threaded one; default: 3.12, the newest other one and the free-threaded one),
``MEGABUILD_E2E_KEEP`` (keep the work dir there instead of a temp dir),
``MEGABUILD_E2E_RECIPE_DIR`` (debugging only: run a patched copy of ``recipe/`` instead of the
real one; the run says so loudly).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from feedstock.conda_build_standin import channel, ninja
from feedstock.conda_build_standin.conda_build import (
    CONDA_FORGE_SKBUILD,
    RunResult,
    find_config,
    run_config,
    variant_value,
)
from feedstock.conda_build_standin.cpythons import CPython, find_cpythons, find_freethreaded
from feedstock.conda_build_standin.packaging import Package
from feedstock.conda_build_standin.recipe_tests import STAND_IN_EXPLAINED
from feedstock.paths import RECIPE, REPO
from feedstock.split_check.recipe import read_recipe
from feedstock.test_commands import CommandResult, fresh_test_dir, run_command
from megabuild import model
from megabuild.binaries.elf import read_elf_file
from megabuild.binaries.torch_config import FUNCTION
from megabuild.pipeline.description import PIPELINE, STEP_MARK, Phase, Target
from support.megabuild_cli import run_megabuild
from support.minitorch_traits import assert_traits
from support.python_files import foreign_python_files, python_of_abi

pytestmark = pytest.mark.slow

LINALG = "lib/libtorch_cuda_linalg.so"
MEGABUILD_PYTHON = read_recipe(REPO).megabuild_python  # the top level's Python (meta.yaml, the one place)
CUDA_CONFIG_H = "ATen/cuda/CUDAConfig.h"
# Targets that must never rebuild for USE_MAGMA or for another Python.
CORE_TARGETS = {
    "c10",
    "c10_cuda",
    "torch_cpu",
    "shm",
    "torch_shm_manager",
    "torch_global_deps",
    "caffe2_nvrtc",
}


def _pythons() -> list[CPython]:
    found = {c.tag: c for c in find_cpythons()}
    others = [v for v in found if v != "3.12"]
    freethreaded = find_freethreaded()
    if freethreaded is not None:
        found[freethreaded.tag] = freethreaded
    wanted = os.environ.get("MEGABUILD_E2E_PYTHONS")
    if wanted:
        return [found[v] for v in wanted.split(",") if v in found]
    chosen = (["3.12"] if "3.12" in found else []) + others[-1:]
    return [found[v] for v in chosen] + ([freethreaded] if freethreaded is not None else [])


def _gil(run: RunResult) -> list[str]:
    """The run's GIL Pythons, oldest first."""
    return sorted(py for py in run.pythons if not py.endswith("t"))


def _python_spec(python: str) -> str:
    """What a user asks for: ``python 3.13.*``, or ``python 3.13.* *_cp313t`` for the free-threaded
    build (a plain request gets the GIL build: conda-forge's free-threaded python tracks a feature)."""
    return f"python {variant_value(python)}" if python.endswith("t") else f"python {python}.*"


def _pytorch_of(run: RunResult, python: str) -> Package:
    """The run's pytorch package for one Python build, by its ``python_abi`` (3.13t's build string
    says py313 as 3.13's does)."""
    (pkg,) = [p for p in run.packages_named("pytorch") if python_of_abi(p.record["depends"]) == python]
    return pkg


FORCE_COLOR = {"FORCE_COLOR": "1"}
ANSI_SGR = re.compile(r"\x1b\[[0-9;]*m")  # the colour codes FORCE_COLOR adds


def _cuda_config() -> Path:
    return find_config("linux_64_cuda12.6")


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunResult]:
    for tool in ("cmake", "ninja", "g++", "gcc"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH")
    pytest.importorskip("rattler")
    pytest.importorskip("conda_package_handling")
    pythons = _pythons()
    if len([c for c in pythons if not c.freethreaded]) < 2:
        pytest.skip(f"needs two CPythons >= 3.10, found {[c.tag for c in pythons]}")
    keep = os.environ.get("MEGABUILD_E2E_KEEP")
    work = Path(keep) if keep else tmp_path_factory.mktemp("e2e")
    extra = {}
    if os.environ.get("MEGABUILD_E2E_RECIPE_DIR"):
        extra["recipe_dir"] = Path(os.environ["MEGABUILD_E2E_RECIPE_DIR"])
        print(f"\nWARNING: running the recipe copy in {extra['recipe_dir']}, not recipe/")
    t0 = time.monotonic()
    # FORCE_COLOR reaches every build script as conda-build hands a script_env variable: the
    # backend colours its banner, and the build's figures must not depend on reading it
    # (tests/test_measurement.py checks the figures of these logs)
    # the magma variant first (the CUDA e2e builds them in the render's order, nomagma first):
    # conda-build takes either order, and both must work
    result = run_config(
        _cuda_config(), work, pythons=pythons, cpu_count=os.cpu_count() or 2, passed_env=FORCE_COLOR,
        magma_first=True, **extra,
    )  # fmt: skip
    print(f"\nend-to-end run: {time.monotonic() - t0:.0f}s in {work}")
    yield result


def _files(run: RunResult, name: str, marker: str = "") -> list[str]:
    pkgs = [p for p in run.packages_named(name) if marker in p.record["build"]]
    assert len(pkgs) == 1, [p.dist for p in pkgs]
    return pkgs[0].files


def _pkg_root(run: RunResult, name: str, marker: str = "") -> Path:
    (pkg,) = [p for p in run.packages_named(name) if marker in p.record["build"]]
    return pkg.root


# ------------------------------------------------------------------------------------------------
# packages
# ------------------------------------------------------------------------------------------------


def test_render_builds_libtorch_once(run: RunResult) -> None:
    """A megabuild renders one libtorch, one linalg per with_magma, one pytorch per Python."""
    assert not run.anomalies, "render anomalies (the harness collapsed them to keep going):\n" + "\n".join(
        run.anomalies
    )


def test_packages_produced(run: RunResult) -> None:
    names = sorted(p.dist for p in run.packages.values())
    print("\n" + "\n".join(names))
    linalg = run.packages_named("libtorch-cuda-linalg")
    assert sorted("_nomagma_" in p.record["build"] for p in linalg) == [False, True], names
    assert len(run.packages_named("libtorch")) == 1, names
    pytorch = run.packages_named("pytorch")
    assert sorted(p.record["build"].split("_")[2] for p in pytorch) == sorted(
        "py" + v.removesuffix("t").replace(".", "") for v in run.pythons
    ), names
    assert len(run.packages_named("pytorch-gpu")) == 1, names
    assert len(run.packages) == 2 + 1 + len(run.pythons) + 1, names
    for pkg in run.packages.values():
        assert pkg.conda_file is not None and pkg.conda_file.stat().st_size > 0


def test_no_file_in_two_packages(run: RunResult) -> None:
    """No path is shipped by two packages that can be installed together.

    Builds of the same name are alternatives (one pytorch per Python, the two linalg variants),
    so they may share paths; packages of different names must not.
    """
    owner: dict[str, Package] = {}
    clashes: list[str] = []
    for pkg in run.packages.values():
        for f in set(pkg.files):
            other = owner.setdefault(f, pkg)
            if other.name != pkg.name:
                clashes.append(f"{f}: {other.dist} and {pkg.dist}")
    assert not clashes, "\n".join(clashes[:20])
    for pkg in run.packages_named("libtorch-cuda-linalg"):
        assert pkg.files == [LINALG], pkg.files
    assert all(p.files for p in run.packages_named("pytorch"))


def test_linalg_variants_differ_and_nomagma_does_not_link_libmagma(run: RunResult) -> None:
    magma = _pkg_root(run, "libtorch-cuda-linalg", "_magma_") / LINALG
    nomagma = _pkg_root(run, "libtorch-cuda-linalg", "_nomagma_") / LINALG
    assert magma.read_bytes() != nomagma.read_bytes()
    magma_needed = read_elf_file(magma).needed
    nomagma_needed = read_elf_file(nomagma).needed
    print(f"\nDT_NEEDED magma:   {magma_needed}\nDT_NEEDED nomagma: {nomagma_needed}")
    assert any(n.startswith("libmagma.so") for n in magma_needed)
    assert not any("magma" in n for n in nomagma_needed)


def test_pytorch_packages_carry_only_their_own_python(run: RunResult) -> None:
    """By site-packages dir and whole suffix: a 3.14t build shares 3.14's pyc tag (python_files)."""
    for pkg in run.packages_named("pytorch"):
        tag = pkg.record["build"].split("_")[2][2:]  # py311 -> 311 (3.14t's build string says 314)
        depends = pkg.record["depends"]
        abi = any(d.startswith("python_abi ") for d in depends)
        python = python_of_abi(depends) if abi else f"{tag[0]}.{tag[1:]}"  # 3.11, or 3.14t for *_cp314t
        assert tag == python.removesuffix("t").replace(".", ""), (pkg.dist, python)
        foreign = foreign_python_files(pkg.files, python)
        assert not foreign, (pkg.dist, foreign[:5])
        assert any(f.startswith(f"lib/python{python}/site-packages/torch/") for f in pkg.files), pkg.dist


def test_no_runpath_points_into_the_build_machine(run: RunResult) -> None:
    """After conda-build-style RPATH fixing, every RUNPATH entry is $ORIGIN-relative."""
    bad = []
    for pkg in run.packages.values():
        for rel in pkg.files:
            path = pkg.root / rel
            if path.is_symlink() or not path.is_file() or path.read_bytes()[:4] != b"\x7fELF":
                continue
            search_path = read_elf_file(path).search_path
            bad += [f"{pkg.dist}: {rel}: {e}" for e in search_path if not e.startswith("$ORIGIN")]
    assert not bad, "\n".join(bad)


def test_the_libraries_carry_the_build_paths_every_conda_forge_build_carries(run: RunResult) -> None:
    """conda-build's layout reaches the binaries as in a real build: __FILE__ of c10's TORCH_CHECK
    names the source under the build folder's work/, and the build settings record the compiler
    under its _build_env/bin (CMAKE_CXX_COMPILER from the activation's CXX) and its flags, which
    name work/ (CMAKE_CXX_FLAGS from the activation's CXXFLAGS: -fdebug-prefix-map=$SRC_DIR=...)."""
    assert run.folder.root.name.startswith(f"{model.TOP_LEVEL}_") and run.src_dir == run.folder.work
    assert len(str(run.prefix)) == 255 and run.prefix.name.startswith("_h_env_placehold_placehold")
    root = _pkg_root(run, model.LIBTORCH)
    assert f"{run.folder.work}/c10/core/Allocator.cpp\0".encode() in (root / "lib/libc10.so").read_bytes()
    compiler = f"{run.folder.build_prefix}/bin/x86_64-conda-linux-gnu-c++\0".encode()
    assert compiler in (root / "lib/libtorch_cpu.so").read_bytes()
    debug_map = f"-fdebug-prefix-map={run.folder.work}=/usr/local/src/conda/{model.LIBTORCH}-".encode()
    assert debug_map in (root / "lib/libtorch_cpu.so").read_bytes()


def test_the_libraries_carry_internal_assert_messages_with_the_work_dir_inside(run: RunResult) -> None:
    """As upstream's: TORCH_INTERNAL_ASSERT's message literal holds the quoted __FILE__ under work/
    inside a longer string, in libtorch_cpu, libtorch_cuda (the C++ stand-ins) and every torch_python
    (tests/support/minitorch_traits.py); test_installed_pytorch_imports' binary check judges them."""
    names = assert_traits(run)
    assert "libtorch_cuda.so" in names, names


# ------------------------------------------------------------------------------------------------
# rebuild accounting (.ninja_log and ninja's status lines)
# ------------------------------------------------------------------------------------------------


def _build_dir(run: RunResult) -> Path:
    return run.src_dir / "build"


def test_magma_variant_costs_the_linalg_compiles_and_one_link(run: RunResult) -> None:
    """No Ninja edge re-runs for the magma variant: megabuild replays linalg's own commands only."""
    top = run.step("libtorch-split")
    assert len(top.ninja_runs) == 1, [len(r) for r in top.ninja_runs]  # the full build, nothing after
    full = top.ninja_runs[0]
    build = _build_dir(run)
    linalg_objs = {o for o in full if ninja.kind(o) == "compile" and ninja.target(o) == "torch_cuda_linalg"}
    # what flipping USE_MAGMA for the whole tree recompiled (the flow before this design)
    reaching = ninja.objects_including(build, CUDA_CONFIG_H)
    ran = json.loads((build / "magma-linalg" / "commands.json").read_text())
    compiled = {argv[argv.index("-o") + 1] for argv in ran["compiles"]}
    print(
        f"\nfull build: {len(full)} edges {ninja.summary(full)}"
        f"\nobjects reaching {CUDA_CONFIG_H}: {len(reaching)} {ninja.by_target(sorted(reaching))}"
        f"\nmagma variant: {len(ran['compiles'])} compiles + 1 link, 0 ninja edges"
    )
    assert {ninja.target(o) for o in reaching} >= {"torch_cuda", "torch_cuda_linalg"}, reaching
    assert len(reaching) > len(linalg_objs)  # the kernel headers reach the config header too
    assert compiled == {str(build / "magma-linalg" / "obj" / o) for o in linalg_objs}
    assert ran["link"][ran["link"].index("-o") + 1].endswith("/torch/lib/libtorch_cuda_linalg.so")
    assert any(token.endswith("/lib/libmagma.so") for token in ran["link"])


def test_build_tree_and_cache_stay_nomagma(run: RunResult) -> None:
    # (libtorch_cuda itself: no ninja edge ran after the full build, see above)
    cache = (_build_dir(run) / "CMakeCache.txt").read_text()
    # EnvVarForwarding.cmake writes USE_MAGMA from the environment as a STRING entry
    assert re.search(r"^USE_MAGMA:(BOOL|STRING)=(OFF|0)$", cache, re.M), "the cache left nomagma"
    header = (_build_dir(run) / "aten/src" / CUDA_CONFIG_H).read_text()
    assert "#define AT_MAGMA_ENABLED() 0" in header


def test_each_python_reruns_only_python_dependent_edges(run: RunResult) -> None:
    full = run.step("libtorch-split").ninja_runs[0]
    python_objs = ninja.objects_including(_build_dir(run), "/Python.h")
    # torch._C is a CMake target since 2.14 (scikit-build-core), next to torch_python
    assert python_objs and {ninja.target(o) for o in python_objs} == {"torch_python", "_C"}
    lines = [f"\nfull build: {len(full)} ninja edges"]
    for py in run.pythons:
        step = run.step("pytorch", py)
        ran = step.ninja_ran
        lines.append(f"python {py}: {len(ran)} ninja edges {ninja.by_target(ran)}")
        compiled = {o for o in ran if ninja.kind(o) == "compile"}
        if py != MEGABUILD_PYTHON:  # its objects are the top level's, put back (build-state)
            assert python_objs <= compiled, f"{py}: torch_python did not recompile"
        # libtorch's empty.cpp too, unless patch 0012 keeps the configure from rewriting it
        assert compiled <= python_objs, compiled - python_objs
        assert not CORE_TARGETS & set(ninja.by_target(ran)), ninja.by_target(ran)
        assert not {"torch_cuda_linalg", "torch_cuda"} & set(ninja.by_target(ran)), ninja.by_target(ran)
        tag = py.replace(".", "")
        ext = list((_build_dir(run) / "lib").glob(f"_C.cpython-{tag}-*.so"))
        assert ext, f"torch._C was not built for Python {py}"
        assert len(ran) < len(full) / 2
    print("\n".join(lines))


def _compiled(step_runs: list[list[str]], objects: set[str]) -> int:
    """How many of ``objects`` Ninja compiled, from its status lines (the commands that ran)."""
    return sum(1 for run_ in step_runs for out in run_ if out in objects)


def test_python_dependent_objects_compile_once_per_python(run: RunResult) -> None:
    """N Pythons, N compiles of torch_python's objects, though the top level's Python goes last.

    conda-build's order of the pytorch outputs changes from run to run; the harness builds the
    top level's Python last (megabuild-last), where its objects were rebuilt for another Python
    in between. build-state puts the top level's back: that output compiles none of them."""
    python_objs = ninja.objects_including(_build_dir(run), "/Python.h")
    order = [s.python for s in run.steps if s.name == "pytorch"]
    assert order[-1] == MEGABUILD_PYTHON and len(order) == len(run.pythons) >= 2, order
    counts = {"top level": _compiled(run.step("libtorch-split").ninja_runs, python_objs)}
    counts |= {f"python {py}": _compiled(run.step("pytorch", py).ninja_runs, python_objs) for py in order}
    print(f"\ntorch_python compiles ({len(python_objs)} objects) per step: {counts}")
    assert counts["top level"] == len(python_objs)
    assert counts[f"python {MEGABUILD_PYTHON}"] == 0
    assert sum(counts.values()) == len(run.pythons) * len(python_objs)
    last = run.step("pytorch", MEGABUILD_PYTHON)
    assert not python_objs & set(last.ninja_ran), last.ninja_ran  # Ninja's log agrees
    log = last.log.read_text(errors="replace")
    assert re.search(r"^build state: Python 3\.12's build .*: put back [1-9]\d* outputs", log, re.M), log[
        -3000:
    ]


def test_backend_builds_with_build_sh_max_jobs(run: RunResult) -> None:
    """build.sh decides MAX_JOBS (capped on CI); pyproject.toml's [tool.scikit-build.env] hands
    it to CMake as CMAKE_BUILD_PARALLEL_LEVEL, in every step."""
    for step in (s for s in run.steps if s.name in ("libtorch-split", "pytorch")):
        log = step.log.read_text(errors="replace")
        decided = re.findall(r"^compile jobs: MAX_JOBS=(\d+)", log, re.MULTILINE)
        used = re.findall(r"-- minitorch: .* CMAKE_BUILD_PARALLEL_LEVEL=(\d*)$", log, re.MULTILINE)
        assert decided and used, f"{step.name} {step.python}: no MAX_JOBS / configure lines"
        assert set(used) == {decided[-1]}, (decided, used)


def test_scikit_build_core_ran_without_clearing_the_cache(run: RunResult) -> None:
    """Every pytorch output has its own scikit-build-core (own host env, same prefix): the tree
    is adopted for it, the backend announces itself and never clears the cache."""
    for step in run.steps:
        if step.name not in (model.TOP_LEVEL, model.PYTORCH):
            continue
        # FORCE_COLOR reaches the backend (see the measurement test below): read its banner uncoloured
        log = ANSI_SGR.sub("", step.log.read_text(errors="replace"))
        assert re.search(r"\*\*\* scikit-build-core \d", log), f"{step.name}: backend did not run"
        assert "clearing cache" not in log, f"{step.name} {step.python}: the backend cleared the cache"
        if step.name == "pytorch":
            assert "build/ adopted for this output's backend" in log, log[-2000:]
            assert f"/lib/python{step.python}/site-packages/scikit_build_core" in log
    assert (_build_dir(run) / "CMakeFiles" / "megabuild-tree-kept").is_file()


def test_the_build_runs_the_pipeline_description(run: RunResult) -> None:
    """The top level and every pytorch output ran exactly PIPELINE's steps for their target, in
    order (the bump check runs the same object: tests/test_pipeline.py)."""
    target = Target("linux-64", cuda=True)
    install = [(Phase.of_output(s.name), s) for s in run.steps if s.name in (model.LIBTORCH, model.LINALG)]
    assert [p for p, _ in install].count(Phase.LINALG) == 2 and Phase.LIBTORCH in dict(install)
    for phase, step in [(Phase.TOP_LEVEL, run.step(model.TOP_LEVEL)), *install,
                        *((Phase.PYTORCH, run.step(model.PYTORCH, py)) for py in run.pythons)]:  # fmt: skip
        log = step.log.read_text(errors="replace")
        announced = [line[len(STEP_MARK) :] for line in log.splitlines() if line.startswith(STEP_MARK)]
        assert announced == [f"{phase.value}: {s.name}" for s in PIPELINE.steps(phase, target)], step.log


def test_every_step_forwards_the_same_environment(run: RunResult) -> None:
    """What build.sh exported that EnvVarForwarding.cmake copies into the cache, per step."""
    telemetry = run.src_dir / "_megabuild" / "telemetry"
    top = json.loads((telemetry / "forwarded-env.libtorch.json").read_text())
    assert {"USE_CUDA", "USE_MAGMA", "BLAS", "CMAKE_ARGS", "CMAKE_BUILD_TYPE", "MAX_JOBS"} <= set(top), top
    assert not [k for k, v in top.items() if f"python{MEGABUILD_PYTHON}" in v], "a Python path is forwarded"
    for py in run.pythons:
        step_env = json.loads((telemetry / f"forwarded-env.python{py}.json").read_text())
        assert step_env == top, {k: (top.get(k), step_env.get(k)) for k in set(top) ^ set(step_env)}


PIP_LINE = re.compile(r"^\+ \S+ -m pip install \. (?P<args>.*)$", re.M)
# NNPACK's PeachPy codegen in the fixture (third_party/NNPACK): one edge per kernel source
NNPACK_CODEGEN = re.compile(r"^confu-deps/NNPACK/src/.+\.py\.c$")


def test_every_python_hands_cmake_the_same_settings(run: RunResult) -> None:
    """The ``-C`` settings of each pytorch output's ``pip install .``: the same for every Python
    (the six dir is the top level's copy in the work dir, not the pass's site-packages)."""
    settings = {}
    for py in run.pythons:
        (args,) = PIP_LINE.findall(run.step("pytorch", py).log.read_text(errors="replace"))
        settings[py] = [a for a in args.split() if a.startswith("-C")]
    first = next(iter(settings.values()))
    assert all(s == first for s in settings.values()), settings
    (six,) = [s for s in first if s.startswith("-Ccmake.define.PYTHON_SIX_SOURCE_DIR=")]
    assert six.endswith(f"={run.src_dir}/_megabuild/python-six"), six


def test_nnpack_codegen_and_libtorch_cpu_link_run_once(run: RunResult) -> None:
    """NNPACK's codegen command line holds the six dir and the interpreter path (the same for every
    Python: one host prefix), so the top level runs it and links libtorch_cpu, and no Python pass
    does either; each pass's rebuild check found nothing outside the Python-dependent targets."""
    ran = {(s.name, s.python): [o for o in s.ninja_ran if not os.path.isabs(o)] for s in run.steps}
    codegen = {step: [o for o in outs if NNPACK_CODEGEN.match(o)] for step, outs in ran.items()}
    links = {step: outs.count("lib/libtorch_cpu.so") for step, outs in ran.items()}
    print(f"\ncodegen: {codegen}\nlibtorch_cpu links: {links}")
    top = ("libtorch-split", MEGABUILD_PYTHON)
    assert len(codegen.pop(top)) == 2 and links.pop(top) == 1, (codegen, links)
    assert not any(codegen.values()) and not any(links.values()), (codegen, links)
    passes = (run.src_dir / "_megabuild/telemetry/passes.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in passes]
    checked = {r["pass"]: r["unexpected_edges"] for r in records if r["pass"].startswith("python")}
    assert checked == {f"python{py}": 0 for py in run.pythons}, checked
    for py in run.pythons:
        log = run.step("pytorch", py).log.read_text(errors="replace")
        assert re.search(r"^rebuild check: this pass will run \d+ edges, 0 outside", log, re.M), py


def test_extra_pythons_pack_only_python_dependent_files(run: RunResult) -> None:
    """The top level's wheel holds libtorch; each pytorch output's wheel only torch_python, _C and
    the Python files (libtorch's files are linked to the libtorch package)."""
    pattern = r"^bytes: cmake --install wrote .*; the wheel packed \d+ files, ([\d,]+) bytes"
    sizes = {}
    for step in (s for s in run.steps if s.name in ("libtorch-split", "pytorch")):
        m = re.search(pattern, step.log.read_text(errors="replace"), re.M)
        assert m, f"{step.name}: no bytes line"
        sizes[step.python if step.name == "pytorch" else "top"] = int(m[1].replace(",", ""))
    print(f"\nbytes packed per step: {sizes}")
    for pkg in run.packages_named("pytorch"):
        (record,) = [f for f in pkg.files if f.endswith(".dist-info/RECORD")]
        wheel = (pkg.root / record).read_text()
        assert "torch/lib/libtorch_cpu.so," not in wheel and "torch/include/ATen/" not in wheel
        assert "torch/lib/libtorch_python.so," in wheel and "torch/_C.cpython-" in wheel
        linked = [f for f in pkg.files if f.endswith("site-packages/torch/lib/libtorch_cpu.so")]
        assert linked and (pkg.root / linked[0]).is_symlink(), linked  # to libtorch's copy
    assert all(sizes[py] < sizes["top"] / 2 for py in run.pythons), sizes


# ------------------------------------------------------------------------------------------------
# solve, install, import
# ------------------------------------------------------------------------------------------------

IMPORT_CHECK = (
    "import json, os, sys, sysconfig, torch\n"
    "def loaded():\n"
    "    maps = {line.split()[-1] for line in open('/proc/self/maps') if len(line.split()) >= 6}\n"
    "    return sorted(os.path.basename(m) for m in maps)\n"
    "at_import = loaded()\n"
    "dot = torch._C._zdotu([1 + 2j, 3 - 1j], [2 - 1j, 1 + 1j])\n"
    "has_magma = torch.cuda.has_magma\n"
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, 'file': torch.__file__,\n"
    "  'has_magma': has_magma, 'loaded_at_import': at_import, 'loaded_after_has_magma': loaded(),\n"
    "  'compiled_with_magma': torch._C._compiled_with_magma(),\n"
    "  'linalg': torch._C._linalg_library(), 'sum': torch.ones_sum(3),\n"
    "  'numpy': torch.ones_numpy(2).tolist(), 'py': torch._C._compiled_python(),\n"
    "  'mkldnn': torch.backends.mkldnn.is_available(), 'config': torch.__config__.show(),\n"
    "  'zdotu': [dot.real, dot.imag],\n"
    "  'gil_disabled_build': bool(sysconfig.get_config_var('Py_GIL_DISABLED')),\n"
    "  'gil_enabled': sys._is_gil_enabled() if hasattr(sys, '_is_gil_enabled') else True,\n"
    "  'sysconfig_prefix': sysconfig.get_config_var('prefix'),\n"
    "  'sysconfig_includepy': sysconfig.get_config_var('INCLUDEPY'),\n"
    "  'sysconfig_include': sysconfig.get_paths()['include']}))\n"
)


_ENVS: dict[tuple[str, ...], tuple[Path, dict[str, str], dict]] = {}


def _install(run: RunResult, specs: list[str], name: str) -> tuple[Path, dict[str, str], dict]:
    """Solve, install and import; an env is made once per run and spec list (tests share them)."""
    key = (str(run.work), *specs)
    if key in _ENVS:
        return _ENVS[key]
    prefix = run.work / "envs" / name
    solved = channel.create_env(
        run.channel, specs, prefix, run.work / "cache" / "rattler", {"__cuda": "12.6"}
    )
    proc = channel.run_in_env(prefix, IMPORT_CHECK, run.work / "home")
    assert proc.returncode == 0, f"{specs}: import failed\n{proc.stdout}\n{proc.stderr}"
    _ENVS[key] = (prefix, solved, json.loads(proc.stdout.strip().splitlines()[-1]))
    return _ENVS[key]


@pytest.mark.parametrize("index", [0, 1])
def test_installed_pytorch_imports(run: RunResult, index: int) -> None:
    py = _gil(run)[index]
    prefix, solved, info = _install(run, ["pytorch", f"python {py}.*"], f"py{py}")
    print(f"\npython {py}: {json.dumps(solved, sort_keys=True)}\n{info}")
    assert info["version"] == "2.14.1" and info["py"].startswith(py)
    assert info["sum"] == 6.0 and info["numpy"] == [1.0, 1.0]
    assert Path(info["file"]).is_relative_to(prefix)
    # the solver prefers the magma variant (+50); MAGMA support comes from the installed library
    assert "_magma_" in solved["libtorch-cuda-linalg"] and "libmagma" in solved
    assert info["has_magma"] is True
    assert info["compiled_with_magma"] is False  # libtorch_cuda is the nomagma pass's
    # `import torch` loads neither the linalg library nor libmagma; asking has_magma loads both
    at_import, after = info["loaded_at_import"], info["loaded_after_has_magma"]
    assert "libtorch_cuda.so" in at_import
    assert not [m for m in at_import if m.startswith(("libtorch_cuda_linalg", "libmagma"))], at_import
    assert "libtorch_cuda_linalg.so" in after and any(m.startswith("libmagma") for m in after), after
    assert Path(info["linalg"]).resolve().is_relative_to(prefix.resolve())
    assert f"CXX_COMPILER={run.folder.build_prefix}/bin/x86_64-conda-linux-gnu-c++, " in info["config"]
    # what the check finds of the build's paths in the installed packages is explained
    # (known.json; the harness's own compiler and sysroot: STAND_IN_EXPLAINED)
    names = ("--package", model.LIBTORCH, "--package", model.PYTORCH)
    done = run_megabuild("check-binaries", "--prefix", prefix, *names, "--explained", STAND_IN_EXPLAINED)
    assert done.returncode == 0, done.stdout + done.stderr
    # the recipe's check of torch.__config__.show() against the variant (USE_CUDA, CUDA_VERSION, BLAS)
    show = prefix.parent / f"show-{py}.txt"
    show.write_text(info["config"])
    cuda = str(yaml.safe_load(run.config.read_text())["cuda_compiler_version"][0])
    # (MAGMA is asked of the installed library, not this text: tests/test_torch_config_magma.py)
    args = (
        "--prefix",
        prefix,
        "--blas",
        "generic",
        "--cuda-version",
        cuda,
        "--magma",
        "any",
        "--show-file",
        show,
    )
    done = run_megabuild("check-torch-config", *args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_installed_pytorch_has_mkldnn(run: RunResult) -> None:
    """oneDNN is found in the source tree (third_party/ideep) although conda-forge's activation
    restricts CMake's include/library lookups to CMAKE_FIND_ROOT_PATH: build.sh adds $SRC_DIR
    to every find root, nvcc's second entry (the one CMake uses) included."""
    py = _gil(run)[-1]
    _, _, info = _install(run, ["pytorch", f"python {py}.*"], f"py{py}")
    print(f"\n{info['config']}")
    assert info["mkldnn"] is True, "USE_MKLDNN went OFF:\n" + _configure_lines(run, "MKLDNN")
    assert "USE_MKLDNN=ON" in info["config"]


def _configure_lines(run: RunResult, word: str) -> str:
    log = run.step("libtorch-split").log.read_text(errors="replace")
    return "\n".join(
        line for line in log.splitlines() if word in line and not line.startswith("[minitorch] +")
    )


def test_generic_blas_is_the_switchable_netlib_interface(run: RunResult) -> None:
    """Generic BLAS links the netlib names (libblas/libcblas/liblapack.so.3), never a library
    named openblas, and does complex dot products through cblas; at run time the names resolve
    to the OpenBLAS the solver installed (nomkl -> *_openblas builds -> libopenblas.so.0)."""
    (libtorch,) = run.packages_named("libtorch")
    needed = read_elf_file(libtorch.root / "lib/libtorch_cpu.so").needed
    print(f"\nlibtorch_cpu DT_NEEDED: {needed}")
    assert {"libblas.so.3", "libcblas.so.3", "liblapack.so.3"} <= set(needed), needed
    assert not [n for n in needed if "openblas" in n], needed
    py = _gil(run)[0]
    _, solved, info = _install(run, ["pytorch", f"python {py}.*"], f"py{py}")
    assert "BLAS_INFO=generic" in info["config"] and "LAPACK_INFO=generic" in info["config"], info["config"]
    assert "BLAS_USE_CBLAS_DOT=ON" in info["config"], info["config"]
    assert info["zdotu"] == [8.0, 5.0]  # (1+2j)(2-1j) + (3-1j)(1+1j), through cblas_zdotu_sub
    assert solved["libblas"].endswith("_openblas"), solved
    assert "libopenblas.so.0" in info["loaded_after_has_magma"], info["loaded_after_has_magma"]


def test_installed_python_sysconfig_points_into_the_env(run: RunResult) -> None:
    """conda relocates python's _sysconfigdata at install: headers (cpp_extension, inductor's C++
    JIT) are looked up in the env, not where the interpreter was built."""
    py = _gil(run)[0]
    prefix, _, info = _install(run, ["pytorch", f"python {py}.*"], f"py{py}")
    for key in ("sysconfig_prefix", "sysconfig_includepy", "sysconfig_include"):
        assert Path(info[key]).is_relative_to(prefix), (key, info[key], prefix)
    assert (Path(info["sysconfig_include"]) / "Python.h").is_file()


LOAD_INLINE = (
    "import torch, torch.utils.cpp_extension as ext\n"
    "m = ext.load_inline('plus_one', 'int plus_one(int x) { return x + 1; }', functions=['plus_one'],\n"
    "                    build_directory=%r)\n"
    "print(m.plus_one(41))\n"
)


def test_load_inline_builds_an_extension_with_the_pybind11_pytorch_requires(run: RunResult) -> None:
    """``<torch/extension.h>`` includes pybind11, whose headers the build takes from the environment
    (no copy in torch/include): ``conda install pytorch`` alone must bring them. load_inline builds
    and imports a one-function extension with this machine's C++ compiler in an env made from the
    packages; the same env without the pybind11 package fails to compile it."""
    py = _gil(run)[0]
    prefix, solved, _ = _install(run, ["pytorch", f"python {py}.*"], f"py{py}")
    assert "pybind11" in solved, f"pytorch does not bring pybind11: {sorted(solved)}"
    assert (prefix / "include/pybind11/pybind11.h").is_file()
    assert not (prefix / f"lib/python{py}/site-packages/torch/include/pybind11").exists()
    proc = channel.run_in_env(prefix, LOAD_INLINE % str(run.work / "ext-with"), run.work / "home")
    assert proc.returncode == 0 and proc.stdout.split()[-1] == "42", proc.stdout + proc.stderr
    # the same solution without the pybind11 package: the extension cannot compile
    records = channel.solve(run.channel, ["pytorch", f"python {py}.*"], {"__cuda": "12.6"})
    without = run.work / "envs" / f"py{py}-without-pybind11"
    shutil.rmtree(without, ignore_errors=True)
    kept = [r for r in records if r.name.normalized != "pybind11"]
    channel.install(kept, without, run.work / "cache" / "rattler")
    proc = channel.run_in_env(without, LOAD_INLINE % str(run.work / "ext-without"), run.work / "home")
    assert proc.returncode != 0 and "pybind11/pybind11.h" in proc.stderr, proc.stdout + proc.stderr


def test_nomagma_on_request_does_not_pull_libmagma(run: RunResult) -> None:
    py = _gil(run)[0]
    specs = ["pytorch", f"python {py}.*", "libtorch-cuda-linalg * *nomagma*"]
    prefix, solved, info = _install(run, specs, "nomagma")
    print(f"\nnomagma: {json.dumps(solved, sort_keys=True)}\n{info}")
    assert "_nomagma_" in solved["libtorch-cuda-linalg"]
    assert "libmagma" not in solved
    assert not list((prefix / "lib").glob("libmagma*"))
    assert info["has_magma"] is False
    assert "libtorch_cuda_linalg.so" not in info["loaded_at_import"]
    assert "libtorch_cuda_linalg.so" in info["loaded_after_has_magma"]


def test_metapackage_installs_for_every_python(run: RunResult) -> None:
    """pytorch-gpu gets each Python's own pytorch build (the free-threaded one too)."""
    for py in run.pythons:
        solved = channel.dists(
            channel.solve(run.channel, ["pytorch-gpu", _python_spec(py)], {"__cuda": "12.6"})
        )
        pkg = _pytorch_of(run, py)
        assert solved["pytorch"] == f"{pkg.record['version']}-{pkg.record['build']}", (py, solved)


def test_cpu_machine_gets_no_cuda_pytorch(run: RunResult) -> None:
    with pytest.raises(Exception, match=r"(?i)cuda|cannot|unsat|no candidates|nothing provides"):
        channel.solve(run.channel, ["pytorch-gpu"], {})


# ------------------------------------------------------------------------------------------------
# the free-threaded Python (3.13t here, 3.14t in the configs)
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def freethreaded(run: RunResult, freethreaded_python: CPython) -> str:
    """The free-threaded build's name in this run (``3.13t``); skips without the interpreter."""
    assert freethreaded_python.tag in run.pythons, (freethreaded_python.tag, sorted(run.pythons))
    return freethreaded_python.tag


def test_freethreaded_output_is_built_between_gil_pythons(run: RunResult, freethreaded: str) -> None:
    """GIL -> t -> GIL through build.sh: the top level (3.12), a GIL output, the free-threaded
    one, a GIL one; the free-threaded step ran in its own host env (lib/python3.13t, PY_VER 3.13)."""
    order = [s.python for s in run.steps if s.name == "pytorch"]
    print(f"\npytorch outputs built in the order {order}")
    at = order.index(freethreaded)
    assert 0 < at < len(order) - 1, order
    assert not order[at - 1].endswith("t") and not order[at + 1].endswith("t"), order
    log = run.step("pytorch", freethreaded).log.read_text(errors="replace")
    assert f"/lib/python{freethreaded}/site-packages/scikit_build_core" in log, log[-2000:]
    short = re.escape(freethreaded.removesuffix("t"))
    assert re.search(rf"^swap-python: swapped Python 3\.12\.\d+ -> {short}\.\d+t ", log, re.M), log[:3000]
    assert f"build state: the saved build is Python 3.12's; {freethreaded} builds" in log, log[:3000]


def test_freethreaded_package_is_its_own_build(run: RunResult, freethreaded: str) -> None:
    pkg = _pytorch_of(run, freethreaded)
    nodot = freethreaded.replace(".", "")
    print(f"\n{pkg.dist}: {[d for d in pkg.record['depends'] if d.startswith('python')]}")
    assert f"python_abi {freethreaded.removesuffix('t')}.* *_cp{nodot}" in pkg.record["depends"]
    assert [f for f in pkg.files if f"/torch/_C.cpython-{nodot}-" in f], pkg.files
    assert all(
        not f.startswith("lib/python") or f.startswith(f"lib/python{freethreaded}/") for f in pkg.files
    )


def test_freethreaded_pytorch_installs_and_imports_with_the_gil_off(
    run: RunResult, freethreaded: str
) -> None:
    """py-rattler solves ``python 3.13.* *_cp313t`` + pytorch to the cp313t build; ``import torch``
    (and everything IMPORT_CHECK does) leaves the GIL off (_C declares Py_MOD_GIL_NOT_USED)."""
    prefix, solved, info = _install(run, ["pytorch", _python_spec(freethreaded)], f"py{freethreaded}")
    pkg = _pytorch_of(run, freethreaded)
    print(f"\npython {freethreaded}: {json.dumps(solved, sort_keys=True)}\n{info['py']} {info['file']}")
    assert solved["pytorch"] == f"{pkg.record['version']}-{pkg.record['build']}", solved
    assert solved["python_abi"].endswith(f"_cp{freethreaded.replace('.', '')}"), solved
    assert info["gil_disabled_build"] is True
    assert info["gil_enabled"] is False, "importing torch turned the GIL back on"
    assert info["sum"] == 6.0 and info["numpy"] == [1.0, 1.0]
    assert info["py"].startswith(freethreaded.removesuffix("t"))
    assert Path(info["file"]).is_relative_to(prefix / "lib" / f"python{freethreaded}")


def test_a_gil_env_never_gets_the_freethreaded_build(run: RunResult, freethreaded: str) -> None:
    """A plain ``python 3.13.*`` request gets the GIL python and its pytorch, though the free-threaded
    python here is the newer patch release; a GIL python cannot take the cp313t build at all."""
    short = freethreaded.removesuffix("t")
    ft = _pytorch_of(run, freethreaded)
    for py in _gil(run):
        solved = channel.dists(channel.solve(run.channel, ["pytorch", f"python {py}.*"], {"__cuda": "12.6"}))
        assert solved["pytorch"] == "{version}-{build}".format(**_pytorch_of(run, py).record), (py, solved)
        assert not solved["python_abi"].endswith("t"), (py, solved)
    if short in run.pythons:
        exact = f"pytorch =={ft.record['version']} {ft.record['build']}"
        with pytest.raises(Exception, match=r"(?i)cannot|unsat|no candidates|nothing provides|conflict"):
            channel.solve(run.channel, [exact, f"python {short}.* *_cpython"], {"__cuda": "12.6"})


# ------------------------------------------------------------------------------------------------
# measurement: the run above hands FORCE_COLOR=1 to every build script
# ------------------------------------------------------------------------------------------------

ESC = "\x1b["
BYTES_LINE = re.compile(
    r"^bytes: cmake --install wrote \d+ files, [\d,]+ bytes; the wheel packed \d+ files, [\d,]+ bytes "
    r"\((torch-\S+\.whl), scikit-build-core ([^)\s]+)\)$",
    re.M,
)


def test_force_color_build_passes_and_is_measured(run: RunResult) -> None:
    """scikit-build-core colours its banner under FORCE_COLOR (a regex on it misses it): the build
    passed, and every pass's figures came from the installed files, with no warning. On 4b63fb6 the
    top level failed: ``pip's output names no scikit-build-core run or no created wheel``."""
    passes = [s for s in run.steps if s.name in (model.TOP_LEVEL, model.PYTORCH)]
    assert len(passes) >= 3, [s.name for s in passes]
    for step in passes:
        log = step.log.read_text(errors="replace")
        banner = [line for line in log.splitlines() if "scikit-build-core" in line and "***" in line]
        assert banner and all(ESC in line for line in banner), (step.name, banner)
        found = BYTES_LINE.findall(log)
        assert len(found) == 1 and found[0][1] == CONDA_FORGE_SKBUILD, (step.name, found)
        assert "warning: not measured" not in log, step.name


# ------------------------------------------------------------------------------------------------
# MAGMA judged without a GPU: the patched _C asks the installed linalg library (patch 0001)
# ------------------------------------------------------------------------------------------------

LINALG_LIBRARY = "lib/libtorch_cuda_linalg.so"


def _linalg_env(run: RunResult, variant: model.LinalgVariant, name: str) -> Path:
    """A fresh env of the megabuild Python's pytorch with the ``variant`` linalg package."""
    prefix = run.work / "envs" / f"magma-{name}"
    specs = [model.PYTORCH, f"{model.LINALG} * *_{variant.value}_*", _python_spec(_gil(run)[-1])]
    solved = channel.create_env(
        run.channel, specs, prefix, run.work / "cache" / "rattler", {"__cuda": "12.6"}
    )
    assert f"_{variant.value}_" in solved[model.LINALG], solved
    return prefix


def _check_torch_config(run: RunResult, prefix: Path) -> CommandResult:
    """The pytorch output's rendered check-torch-config command, run as conda-build runs a test
    command: bash in a test dir holding the test files (megabuild/), with the env's python, under CI."""
    out = _pytorch_of(run, _gil(run)[-1])
    (rendered,) = [
        o for o in run.outputs if o.name == model.PYTORCH and o.build_string == out.record["build"]
    ]
    (command,) = [c for c in rendered.test["commands"] if "-m megabuild check-torch-config " in c]
    assert "--prefix $PREFIX" in command and "--cuda-version 12.6" in command, command
    test_dir = fresh_test_dir(prefix.parent / f"{prefix.name}-test", rendered.test, RECIPE)
    env = {"PATH": f"{prefix / 'bin'}:/usr/bin:/bin", "HOME": str(run.work / "home"), "LANG": "C.UTF-8",
           "PREFIX": str(prefix), "CI": "true"}  # fmt: skip
    return run_command(
        command, env, test_dir, explained=STAND_IN_EXPLAINED, bash_options=("-e",), timeout=120
    )


@pytest.mark.parametrize("variant", list(model.LinalgVariant), ids=lambda v: v.value)
def test_either_linalg_variant_passes_check_torch_config_without_a_gpu(
    run: RunResult, variant: model.LinalgVariant
) -> None:
    result = _check_torch_config(run, _linalg_env(run, variant, variant.value))
    assert result.returncode == 0, result.output
    has_magma = variant is model.LinalgVariant.MAGMA
    assert f"check-torch-config: MAGMA from {FUNCTION}: {has_magma}" in result.stderr.splitlines()


def test_a_nomagma_record_whose_torch_has_magma_fails(run: RunResult) -> None:
    """The magma variant's files under the nomagma variant's conda-meta record: conda says nomagma,
    the loaded library says MAGMA."""
    magma = _linalg_env(run, model.LinalgVariant.MAGMA, "planted-nomagma-record")
    nomagma = _linalg_env(run, model.LinalgVariant.NOMAGMA, "nomagma-record")
    (record,) = (magma / "conda-meta").glob(f"{model.LINALG}-*.json")
    record.unlink()
    (other,) = (nomagma / "conda-meta").glob(f"{model.LINALG}-*.json")
    shutil.copy2(other, magma / "conda-meta" / other.name)
    result = _check_torch_config(run, magma)
    assert result.returncode == 1, result.output
    assert result.stdout.splitlines() == [
        f"torch-config: torch.__config__.show(): no MAGMA installed, but {FUNCTION} is True"
    ]


def test_a_magma_install_with_the_nomagma_library_fails(run: RunResult) -> None:
    """The nomagma variant's library in place of the magma one (libmagma still installed); the
    installed file is unlinked first: it is a hard link into the package cache."""
    magma = _linalg_env(run, model.LinalgVariant.MAGMA, "planted-nomagma-library")
    (nomagma_package,) = [p for p in run.packages_named(model.LINALG) if "_nomagma_" in p.record["build"]]
    (magma / LINALG_LIBRARY).unlink()
    shutil.copy2(nomagma_package.root / LINALG_LIBRARY, magma / LINALG_LIBRARY)
    result = _check_torch_config(run, magma)
    assert result.returncode == 1, result.output
    finding = f"the installed linalg variant links MAGMA, but {FUNCTION} is False"
    assert result.stdout.splitlines() == [f"torch-config: torch.__config__.show(): {finding}"]
