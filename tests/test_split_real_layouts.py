"""The split of the real torch layouts: every listing in tests/data, through the version-bump
check's own split procedure (``feedstock.split_check.split_run.split_in``).

A listing is found, not named here: its name (tests/data/README.md) says the platform, the Python
build (``cp314`` and ``cp314t`` are two) and CUDA; ``feedstock.split_check.layout.listing_layout`` picks
the recipe's config for it. The procedure runs the build's pipeline (``megabuild.pipeline``) on the
listed files laid out as empty placeholders, script run by script run (top level, each linalg
variant, libtorch, pytorch), runs the rendered ``test:`` file checks of each package in the prefix
its test env would have, and checks that every file ends up in exactly one package (or dropped).
Any ACTION it reports fails the test. What the rendered tests do not check but the split must
guarantee is asserted here on the prefixes it leaves.
"""

from __future__ import annotations

import os
import zipfile
from functools import cache
from pathlib import Path

import pytest
from _split_util import DATA, REAL_SPEC
from feedstock.configs import list_configs, resolve_configs
from feedstock.patch_check import cache_dir
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config
from feedstock.split_check.layout import Layout, Placeholders, UnpackedWheel, layout_for, listing_layout
from feedstock.split_check.platforms import BY_NAME
from feedstock.split_check.python_builds import PythonBuild
from feedstock.split_check.recipe import Recipe, matching, pick, read_recipe
from feedstock.split_check.report import Level
from feedstock.split_check.split_run import is_file_test, split_in
from feedstock.split_check.tree_build import Places
from feedstock.wheel_files import read_listing
from feedstock.wincmd import conda_test_env as win_env
from feedstock.wincmd import file_test as win_file_test
from megabuild.model import LIBTORCH, PYTORCH
from megabuild.split.spec import load_spec

LISTINGS = sorted(DATA.glob("*-files.tsv"))
# PyPI has no linux CPU wheel of 2.14.1 (the CPU wheels are on download.pytorch.org only,
# not reachable here). The linux-64 CPU layout is therefore DERIVED, not real: the real
# linux-64 CUDA 13.0 listing without the files by which torch 2.13.0's real CPU wheel
# differed from its CUDA wheel (besides the CPU wheel's BUILD_TEST=1 test files).
CUDA_ONLY_FILES = (
    "torch/lib/libc10_cuda.so", "torch/lib/libcaffe2_nvrtc.so", "torch/lib/libtorch_cuda.so",
    "torch/lib/libtorch_cuda_linalg.so", "torch/lib/libtorch_nvshmem.so", "torch/include/THC/",
    "torch/include/ATen/cuda/CUDAConfig.h", "torch/include/c10/cuda/impl/cuda_cmake_macros.h",
    "torch/include/tensorpipe/channel/cuda_", "torch/include/tensorpipe/common/cuda_buffer.h",
    "torch/include/tensorpipe/config_cuda.h", "torch/include/tensorpipe/tensorpipe_cuda.h",
)  # fmt: skip
DERIVED_FROM = DATA / "torch-2.14.1-cp312-linux_x86_64-cu130-files.tsv"


@cache
def recipe() -> Recipe:
    return read_recipe(REPO)


@cache
def rendered_config(alias: str) -> tuple[RenderedOutput, ...]:
    configs = resolve_configs(alias, list_configs(REPO))
    assert len(configs) == 1, f"{alias} selects {[c.name for c in configs]}"
    return tuple(render_config(configs[0].path, RECIPE))


def split_and_check(layout: Layout, work: Path) -> Places:
    """The bump check's split procedure in ``work``: no ACTION, and file checks ran."""
    findings = split_in(layout, work)
    print()
    for finding in findings:
        print(f"  {finding.level.name}: {finding.text}")
    actions = [f.text for f in findings if f.level is Level.ACTION]
    assert not actions, "\n".join(actions)
    summary = findings[0].text
    assert " 0 file checks" not in summary and "file checks of the rendered tests ran, 0 failed" in summary
    return Places(work, layout)


def check_guarantees(layout: Layout, places: Places) -> None:
    """What the rendered tests do not check but the split must guarantee."""
    prefix, torch_sp = places.prefix, places.prefix_site_packages / "torch"
    ext = layout.platform.shlib_ext
    if layout.platform.windows:  # conda's Library layout; nothing of libtorch's in site-packages
        assert sorted(p.name for p in prefix.iterdir() if p.name != "conda-meta") == ["Lib", "Library"]
        assert (prefix / "Library/bin/torch_cpu.dll").is_file() and (
            prefix / "Library/lib/torch_cpu.lib"
        ).is_file()
        assert sorted(p.name for p in (torch_sp / "lib").glob("*.dll")) == ["torch_python.dll"]
        assert not (torch_sp / "share").exists() and not (torch_sp / "bin").exists()
        assert not any(p.is_symlink() for p in torch_sp.rglob("*"))
        return
    py_lib = f"lib/libtorch_python{ext}"
    assert (torch_sp / py_lib).is_file() and not (torch_sp / py_lib).is_symlink()
    assert (prefix / py_lib).is_symlink() and (prefix / py_lib).resolve() == (torch_sp / py_lib).resolve()
    assert os.path.realpath(torch_sp / f"lib/libtorch_cpu{ext}") == str(
        (prefix / f"lib/libtorch_cpu{ext}").resolve()
    )
    if layout.cuda:
        assert (prefix / "include/THC/THCAtomics.cuh").is_file()
        assert not (torch_sp / "include/THC").exists()


@pytest.mark.slow
@pytest.mark.parametrize("listing", LISTINGS, ids=lambda p: p.name.removesuffix("-files.tsv"))
def test_every_real_layout_splits_with_no_action(listing: Path, tmp_path: Path) -> None:
    layout = listing_layout(recipe(), listing)
    check_guarantees(layout, split_and_check(layout, tmp_path))


@pytest.mark.slow
def test_the_derived_linux_cpu_layout_splits_with_no_action(tmp_path: Path) -> None:
    rows = [r for r in read_listing(DERIVED_FROM) if not r.path.startswith(CUDA_ONLY_FILES)]
    assert all(any(r.path.startswith(p) for r in read_listing(DERIVED_FROM)) for p in CUDA_ONLY_FILES)
    layout = layout_for(recipe(), BY_NAME["linux-64"], Placeholders(tuple(rows)), PythonBuild("3.12"), None)
    assert layout.config.endswith("cpu_generic") or "cpu" in layout.config, layout.config
    check_guarantees(layout, split_and_check(layout, tmp_path))


@pytest.mark.slow
def test_a_real_unpacked_wheel_is_split_by_the_same_procedure(tmp_path: Path) -> None:
    """Source (b): the real osx-arm64 wheel unpacked, its real files hard-linked into the trees;
    the same procedure, the same verdict as its listing, and the real bytes where the split put them."""
    wheel = cache_dir() / "macosx_14_0_arm64" / f"torch-{recipe().version}-cp312-cp312-macosx_14_0_arm64.whl"
    if not wheel.is_file():
        if os.environ.get("FEEDSTOCK_REQUIRE_REAL_WHEELS") == "1":
            pytest.fail(f"FEEDSTOCK_REQUIRE_REAL_WHEELS=1 but {wheel.name} is not in the wheel cache")
        pytest.skip(f"{wheel.name} not in the wheel cache (tests/test_split_wheel.py fetches it)")
    root = tmp_path / "wheel"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(root)
    for info in zipfile.ZipFile(wheel).infolist():  # zipfile keeps no modes: the wheel's own
        if (mode := info.external_attr >> 16) and not info.is_dir():
            (root / info.filename).chmod(mode & 0o777)
    source = UnpackedWheel(root)
    listing = DATA / f"torch-{recipe().version}-cp312-macosx_arm64-files.tsv"
    assert source.listed() == read_listing(listing)
    layout = layout_for(recipe(), BY_NAME["osx-arm64"], source, PythonBuild("3.12"), None)
    places = split_and_check(layout, tmp_path / "work")
    check_guarantees(layout, places)
    installed = places.prefix / "lib/libtorch_cpu.dylib"
    assert (
        installed.stat().st_ino == (root / "torch/lib/libtorch_cpu.dylib").stat().st_ino
    )  # moved, not copied
    assert installed.read_bytes()[:4] == b"\xcf\xfa\xed\xfe"  # the real Mach-O, not a placeholder


@pytest.mark.slow
def test_a_file_no_rule_takes_is_an_action(tmp_path: Path) -> None:
    """Planted: a library the spec gives no package (strict lib/): the procedure reports ACTION."""
    layout = listing_layout(recipe(), DATA / "torch-2.14.1-cp312-macosx_arm64-files.tsv")
    planted = (*layout.rows, layout.rows[0]._replace(path="torch/lib/libplanted_by_the_test.dylib"))
    bad = layout_for(recipe(), layout.platform, Placeholders(planted), layout.python, None)
    actions = [f.text for f in split_in(bad, tmp_path) if f.level is Level.ACTION]
    assert actions and "libplanted_by_the_test.dylib" in actions[0], actions


def test_every_listing_is_of_the_recipes_version_and_names_its_python() -> None:
    """tests/data holds listings of the recipe's version only, each a layout whatever its Python."""
    version = recipe().version
    assert LISTINGS and all(p.name.startswith(f"torch-{version}-") for p in LISTINGS), LISTINGS
    pythons = {listing_layout(recipe(), p).python.name for p in LISTINGS}
    assert {"3.14", "3.14t"} <= pythons, pythons


def test_outputs_are_picked_by_python_and_abi() -> None:
    """3.14 and 3.14t are two pytorch outputs of one config: the version alone finds both."""
    outputs = rendered_config("osx_arm64")
    naive = [o for o in outputs if o.name == PYTORCH and o.variant["python"].startswith("3.14")]
    assert len(naive) == 2  # the trap: by version, two rendered outputs
    for build in (PythonBuild("3.14"), PythonBuild("3.14", freethreading=True), PythonBuild("3.12")):
        (found,) = matching(outputs, PYTORCH, python=build)
        assert found.variant["python"].endswith("t") == build.freethreading


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("if not exist %LIBRARY_BIN%\\c10.dll exit 1", ["test", "-e", "/p/Library/bin/c10.dll"]),
        (
            "if exist %SP_DIR%\\torch\\include\\torch exit 1",
            ["test", "!", "-e", "/p/Lib/site-packages/torch/include/torch"],
        ),
        ("if not exist %CONDA_PREFIX%\\x exit 1", None),
        ("cmake -S cmake_test -B cmake_test/build -GNinja %CMAKE_ARGS%", None),
        ("if not exist %LIBRARY_BIN%\\c10.dll (exit 1)", None),
    ],
)
def test_win_file_checks_are_translated(command: str, argv: list[str] | None) -> None:
    assert win_file_test(command, win_env(Path("/p"), "3.12")) == argv


@pytest.mark.parametrize("config", ["win_64_cpu", "win_64_cuda12.9", "win_64_cuda13.0"])
def test_win_libtorch_file_tests_name_files_the_spec_installs(config: str) -> None:
    """Every ``if not exist`` of libtorch's Windows tests (CUDA configs too, which no wheel
    listing covers) names a place ``split install`` fills from a file the spec gives libtorch."""
    spec = load_spec(REAL_SPEC, "win-64")
    prefix = Path("/p")
    env = win_env(prefix, "3.12")
    libtorch = pick(rendered_config(config), LIBTORCH)
    assert libtorch is not None
    wanted = [argv[-1] for c in libtorch.test.get("commands", [])
              if (argv := win_file_test(c, env)) is not None and argv[1] == "-e"]  # fmt: skip
    assert wanted
    unknown = []
    for path in wanted:
        placed = Path(path).relative_to(prefix).as_posix()
        sources = [
            f"{root.base}/{placed[len(root.dest) + 1 :]}".lstrip("/")
            for root in spec.install_roots
            if placed.startswith(f"{root.dest}/")
        ]
        if not any(spec.install_path(s) == placed and spec.classify(s).output == LIBTORCH for s in sources):
            unknown.append(placed)
    assert not unknown, f"{config}: libtorch tests expect files no libtorch rule installs: {unknown}"


@pytest.mark.parametrize(
    ("command", "file_only"),
    [
        ("test -f $PREFIX/lib/libc10${SHLIB_EXT}", True),
        ("test -d $SP_DIR/torch/include && test ! -L $SP_DIR/torch/include", True),
        ('[ -f "$PREFIX/x" ] || test -e $PREFIX/y', True),
        ("[ -f $PREFIX/x", False),
        ("test -f x; rm -rf y", False),
        ("test -f $(which python)", False),
        ("test -f x | cat", False),
        ("python -c 'import torch'", False),
        ("cmake --build cmake_test/build", False),
    ],
)
def test_file_checks_are_recognised(command: str, file_only: bool) -> None:
    assert is_file_test(command) is file_only


@pytest.mark.slow
def test_the_real_aarch64_layout_splits_with_the_tegra_config(tmp_path: Path) -> None:
    """Upstream has no Tegra wheel: the real linux-aarch64 CUDA wheel's layout (the same files a
    Tegra build installs) split against the Tegra config's rendered tests, with no action."""
    rows = read_listing(DATA / f"torch-{recipe().version}-cp312-linux_aarch64-cu130-files.tsv")
    layout = layout_for(
        recipe(), BY_NAME["linux-aarch64"], Placeholders(tuple(rows)), PythonBuild("3.12"), "12.9"
    )
    assert layout.config == "linux_aarch64_tegra", layout.config
    check_guarantees(layout, split_and_check(layout, tmp_path))
