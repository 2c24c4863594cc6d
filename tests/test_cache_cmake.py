"""swap-python against real CMake + Ninja builds of tests/projects/pycache_probe.

For every CPython found (>= 3.10, one per minor) a conda-like host env is
created at the SAME path, as conda-build recreates ``$PREFIX`` per output.
For each consecutive pair A -> B:

1. with env A: configure and fully build ``swap-B`` (Ninja);
2. recreate the env for B at the same path; ``cache swap-python --from A --to B``
   through the CLI (interpreter mode: the env's ``bin/python`` is now B);
3. compare the swapped cache with a fresh configure for B (``fresh-B``);
4. ``ninja``: CMake re-runs from the edited cache; the plain library must not
   rebuild, the extension must, the regenerated cache must equal ``fresh-B``
   entirely, and the built module must import with B.

Whole caches are compared as CMake reports them through its File API (``cache-v2`` reply,
tests/support/cmake_file_api.py), not through our own parser. The one exception is the cache
text right after the swap, before CMake has run on it: no CMake reply can describe it without a
configure that rewrites it, so that comparison (and the naive-sed control) parses the text.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cpythons import CPython, make_conda_like_prefix
from feedstock.paths import RECIPE
from megabuild.cache.model import CacheFile
from support.cmake_file_api import CacheEntries, differences, read_cache, request_cache

PROJECT = Path(__file__).resolve().parent / "projects" / "pycache_probe"

# Entries CMake itself recomputes on the next configure: MD5s over the development
# and NumPy paths (a mismatch makes FindPython re-search and rewrite them). The swap
# leaves them alone on purpose.
CMAKE_REWRITES = frozenset(
    {
        "_Python_DEVELOPMENT_MODULE_SIGNATURE",
        "_Python_DEVELOPMENT_EMBED_SIGNATURE",
        "_Python_NUMPY_SIGNATURE",
    }
)
# Present only after a re-configure from an existing cache: FindPython's validation of
# the cached interpreter (_python_validate_interpreter) leaves this empty INTERNAL entry.
RERUN_ONLY = {"_Python_Interpreter_REASON_FAILURE": ("INTERNAL", "")}
PLAIN_OUTPUTS = ("CMakeFiles/plain.dir/plain.cpp.o", "libplain.so")

pytestmark = pytest.mark.slow


@dataclass
class Pair:
    a: CPython
    b: CPython
    build: Path
    swapped: str = ""  # cache text right after the swap
    fresh_a: str = ""
    fresh_b: str = ""
    swap_proc: subprocess.CompletedProcess[str] | None = None
    explain: str = ""  # ninja -n -d explain after the swap
    rebuilt: list[str] = field(default_factory=list)  # outputs ninja ran after the swap
    regenerated: CacheEntries = field(default_factory=dict)  # CMake's cache after its re-run in the build
    fresh_a_api: CacheEntries = field(default_factory=dict)
    fresh_b_api: CacheEntries = field(default_factory=dict)
    import_result: str = ""


def _tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} not found")
    return path


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd} failed:\n{proc.stdout}\n{proc.stderr}")
    return proc


def _configure(cmake: str, ninja: str, build: Path, env: Path, py: CPython) -> None:
    if build.exists():
        shutil.rmtree(build)
    request_cache(build)
    _run(
        [
            cmake,
            "-G",
            "Ninja",
            f"-DCMAKE_MAKE_PROGRAM={ninja}",
            "-S",
            str(PROJECT),
            "-B",
            str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={env}/bin/python",
            # what PyTorch's build passes (scikit-build-core's initial cache; 2.13: setup.py):
            # site-packages first, then the prefix
            f"-DCMAKE_PREFIX_PATH={env}/lib/python{py.short}/site-packages;{env}",
        ]
    )


def _configure_and_build(cmake: str, ninja: str, build: Path, env: Path, py: CPython) -> None:
    _configure(cmake, ninja, build, env, py)
    _run([ninja, "-C", str(build)])


def _log_entries(build: Path) -> list[str]:
    log = build / ".ninja_log"
    return [line.split("\t")[3] for line in log.read_text().splitlines() if not line.startswith("#")]


@dataclass
class WrongEdit:
    """The first pair's A cache, swapped to B and then given back A's CMAKE_PREFIX_PATH (a
    deliberately wrong edit), and CMake's cache after re-configuring from it: the oracle must
    tell it from a fresh configure for B."""

    build: Path
    reconfigured: CacheEntries = field(default_factory=dict)


@dataclass
class Probe:
    pairs: list[Pair]
    wrong: WrongEdit


def _swap_python(cache: Path, a: CPython, b: CPython) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "megabuild",
            "cache",
            "swap-python",
            "--from",
            a.short,
            "--to",
            b.short,
            str(cache),
        ],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(RECIPE)),
        timeout=120,
    )


def _prefix_path_line(cache_text: str) -> str:
    return next(line for line in cache_text.splitlines() if line.startswith("CMAKE_PREFIX_PATH:"))


@pytest.fixture(scope="session")
def probe_run(
    tmp_path_factory: pytest.TempPathFactory, two_cpythons: list[CPython], pip_wheel_cache: Path
) -> Probe:
    cmake = _tool("cmake")
    ninja = _tool("ninja")
    root = tmp_path_factory.mktemp("probe")
    env = root / "host_env"  # the same prefix path for every Python
    pys = two_cpythons
    pairs = [Pair(a, b, root / f"swap-{a.short}-to-{b.short}") for a, b in zip(pys, pys[1:])]
    fresh: dict[str, str] = {}
    fresh_api: dict[str, CacheEntries] = {}
    wrong = WrongEdit(root / f"wrong-{pairs[0].a.short}-to-{pairs[0].b.short}")

    def finish_wrong_edit() -> None:
        cache = wrong.build / "CMakeCache.txt"
        stale_prefix = _prefix_path_line(cache.read_text())
        swap = _swap_python(cache, pairs[0].a, pairs[0].b)
        assert swap.returncode == 0, swap.stderr
        text = cache.read_text()
        cache.write_text(text.replace(_prefix_path_line(text), stale_prefix))
        _run([cmake, str(wrong.build)])
        wrong.reconfigured = read_cache(wrong.build, build_placeholder="<BUILD>")

    def finish(pair: Pair) -> None:
        cache = pair.build / "CMakeCache.txt"
        pair.swap_proc = _swap_python(cache, pair.a, pair.b)
        pair.swapped = cache.read_text()
        if pair.swap_proc.returncode != 0:
            return
        pair.explain = _run([ninja, "-C", str(pair.build), "-n", "-d", "explain"]).stdout
        seen = len(_log_entries(pair.build))
        _run([ninja, "-C", str(pair.build)])
        pair.rebuilt = _log_entries(pair.build)[seen:]
        pair.regenerated = read_cache(pair.build, build_placeholder="<BUILD>")
        pair.import_result = _run(
            [str(env / "bin" / "python"), "-c", "import pyext; print(pyext.answer())"], cwd=pair.build
        ).stdout.strip()

    for py in pys:
        make_conda_like_prefix(py, env, cache_dir=pip_wheel_cache)
        for pair in pairs:  # B is this Python: A's build exists, env is now B's
            if pair.b == py:
                finish(pair)
        if pairs[0].b == py:
            finish_wrong_edit()
        fresh_build = root / f"fresh-{py.short}"
        _configure_and_build(cmake, ninja, fresh_build, env, py)
        fresh[py.short] = (fresh_build / "CMakeCache.txt").read_text()
        fresh_api[py.short] = read_cache(fresh_build, build_placeholder="<BUILD>")
        for pair in pairs:  # A is this Python: configure and fully build A
            if pair.a == py:
                _configure_and_build(cmake, ninja, pair.build, env, py)
        if pairs[0].a == py:
            _configure(cmake, ninja, wrong.build, env, py)
    for pair in pairs:
        pair.fresh_a = fresh[pair.a.short].replace(str(root / f"fresh-{pair.a.short}"), "<BUILD>")
        pair.fresh_b = fresh[pair.b.short]
        pair.swapped = pair.swapped.replace(str(pair.build), "<BUILD>")
        pair.fresh_b = pair.fresh_b.replace(str(root / f"fresh-{pair.b.short}"), "<BUILD>")
        pair.fresh_a_api, pair.fresh_b_api = fresh_api[pair.a.short], fresh_api[pair.b.short]
    return Probe(pairs, wrong)


@pytest.fixture(scope="session")
def probe(probe_run: Probe) -> list[Pair]:
    return probe_run.pairs


def _values(text: str) -> dict[str, tuple[str, str]]:
    return {k: (e.type, e.value) for k, e in CacheFile.parse(text).as_dict().items()}


def _ids(pairs: list[Pair]) -> list[str]:
    return [f"{p.a.short}->{p.b.short}" for p in pairs]


def test_swap_matches_a_fresh_configure(probe: list[Pair]) -> None:
    for pair in probe:
        assert pair.swap_proc is not None and pair.swap_proc.returncode == 0, (pair.a, pair.b, pair.swap_proc)
        assert "(interpreter mode," in pair.swap_proc.stdout
        swapped, fresh = _values(pair.swapped), _values(pair.fresh_b)
        assert swapped.keys() == fresh.keys()
        differ = {k for k in fresh if swapped[k] != fresh[k]}
        assert differ <= CMAKE_REWRITES, (
            pair.a.short,
            pair.b.short,
            {k: (swapped[k], fresh[k]) for k in differ},
        )
        reported = {line.split(": ")[1] for line in pair.swap_proc.stdout.splitlines() if " -> " in line}
        assert "_Python_INTERPRETER_PROPERTIES" in reported and "CMAKE_PREFIX_PATH" in reported


def test_swap_changes_the_same_keys_as_a_reconfigure(probe: list[Pair]) -> None:
    for pair in probe:
        fresh_a, fresh_b = pair.fresh_a_api, pair.fresh_b_api
        expected = {k for k in fresh_a if fresh_a[k] != fresh_b[k]} - CMAKE_REWRITES
        reported = {
            line.split(": ")[1]
            for line in pair.swap_proc.stdout.splitlines()  # type: ignore[union-attr]
            if line.startswith("swap-python: ") and " -> " in line and "swapped Python" not in line
        }
        assert reported == expected, (pair.a.short, pair.b.short)


def test_rebuild_after_swap_touches_only_python_targets(probe: list[Pair]) -> None:
    for pair in probe:
        label = f"{pair.a.short}->{pair.b.short}"
        assert pair.rebuilt, label
        for out in PLAIN_OUTPUTS:
            assert out not in pair.rebuilt, (label, pair.rebuilt)
            assert (
                f"ninja explain: {out} " not in pair.explain
                or "is dirty" not in pair.explain.split(out)[1][:40]
            )
        nodot = f"{pair.b.version[0]}{pair.b.version[1]}"
        assert "CMakeFiles/pyext.dir/pyext.cpp.o" in pair.rebuilt, label
        assert any(re.fullmatch(rf"pyext\.cpython-{nodot}-.*\.so", o) for o in pair.rebuilt), label
        assert pair.import_result == "42", label


def test_cmake_rerun_reproduces_the_fresh_cache(probe: list[Pair]) -> None:
    for pair in probe:
        regenerated, fresh = dict(pair.regenerated), pair.fresh_b_api
        for key, value in RERUN_ONLY.items():
            if key not in fresh and regenerated.get(key) == value:
                del regenerated[key]
        assert differences(regenerated, fresh) == {}, (pair.a.short, pair.b.short)


def test_file_api_oracle_catches_a_wrong_cache_edit(probe_run: Probe) -> None:
    """Control for the oracle: a swap that leaves A's CMAKE_PREFIX_PATH behind survives CMake's
    re-configure and shows up as a difference from a fresh configure for B."""
    fresh_b = probe_run.pairs[0].fresh_b_api
    differ = differences(probe_run.wrong.reconfigured, fresh_b)
    assert "CMAKE_PREFIX_PATH" in differ, differ


def test_naive_sed_does_not_match_a_fresh_configure(probe: list[Pair]) -> None:
    """Control: conda-forge's sed on a fresh cache of A leaves differences our comparison catches."""
    pair = probe[0]
    a, b = pair.a, pair.b
    sed = pair.fresh_a.replace(a.short, b.short)  # s/3\.11/3.12/g, escaped even
    sed = sed.replace(f"cpython-{a.version[0]}{a.version[1]}", f"cpython-{b.version[0]}{b.version[1]}")
    sed_values, fresh = _values(sed), _values(pair.fresh_b)
    wrong = {k for k in fresh if sed_values.get(k) != fresh[k]} - CMAKE_REWRITES
    assert "_Python_INTERPRETER_PROPERTIES" in wrong  # "Python;3;11;7": list form and patch level missed
