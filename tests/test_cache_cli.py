"""The ``megabuild cache`` command line, run as build scripts run it (a real subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from feedstock.paths import RECIPE
from megabuild.cache import store
from megabuild.cache.model import CacheFile
from megabuild.errors import MegabuildError
from support.megabuild_cli import run_megabuild
from support.paths import REAL_PYTORCH_CACHE

REAL = REAL_PYTORCH_CACHE

H = "/nonexistent/env"
SMALL = f"""# This is the CMakeCache file.
Python_EXECUTABLE:FILEPATH={H}/bin/python
USE_MAGMA:BOOL=OFF
CMAKE_PREFIX_PATH:UNINITIALIZED={H}/lib/python3.11/site-packages;{H}
CMAKE_COMMAND:INTERNAL={H}/lib/python3.11/site-packages/cmake/data/bin/cmake
_Python_INCLUDE_DIR:INTERNAL={H}/include/python3.11
_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;11;7;64;;cpython-311-x86_64-linux-gnu;{H}/lib/python3.11;{H}/lib/python3.11;{H}/lib/python3.11/site-packages;{H}/lib/python3.11/site-packages
"""


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_megabuild("cache", *args)


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    path = tmp_path / "build" / "CMakeCache.txt"
    path.parent.mkdir()
    path.write_text(SMALL)
    path.chmod(0o640)
    return path


def snapshot(path: Path) -> tuple[bytes, int, int]:
    st = path.stat()
    return path.read_bytes(), st.st_mtime_ns, st.st_mode


def assert_one_line_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith("megabuild: error: "), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert text in proc.stderr


def no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_swap_success_reports_each_entry_and_keeps_mode(cache: Path) -> None:
    proc = run("swap-python", "--from", "3.11", "--to", "3.12.1", cache)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len([line for line in lines if line.startswith("swap-python: ") and " -> " in line]) == 4
    assert lines[-1] == "swap-python: swapped Python 3.11.7 -> 3.12.1 (string mode, 3 entries)"
    text = cache.read_text()
    assert "include/python3.12" in text and "Python;3;12;1;" in text
    assert "python3.11/site-packages/cmake" in text
    assert cache.stat().st_mode & 0o777 == 0o640
    assert no_temp_files(cache.parent)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("swap-python", "--from", "3.10", "--to", "3.12.1"), "configured with Python 3.11.7, not 3.10"),
        (("swap-python", "--from", "3.11", "--to", "3.12"), "pass the full version"),
        (("swap-python", "--from", "3.11", "--to", "3.11.9"), "same Python version"),
        (("swap-python", "--from", "3.11", "--to", "three"), "not a Python version"),
        (("set", "NOPE=1"), "no cache entry NOPE"),
        (("set", "CMAKE_COMMAND=/usr/bin/cmake"), "INTERNAL"),
        (("show", "NOPE"), "no cache entry NOPE"),
        (("show", "--grep", "("), "bad --grep pattern"),
        (("restore",), "does not exist"),
    ],
)
def test_failures_are_one_line_and_leave_the_file_alone(
    cache: Path, args: tuple[str, ...], message: str
) -> None:
    before = snapshot(cache)
    # the cache path goes where each subcommand expects it
    if args[0] == "set":
        proc = run("set", *args[1:], cache)
    elif args[0] in ("show", "restore"):
        proc = run(args[0], cache, *args[1:])
    else:
        proc = run(*args, cache)
    assert_one_line_error(proc, message)
    assert snapshot(cache) == before
    assert no_temp_files(cache.parent)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01garbage\xff\n", "NUL bytes"),
        (b"USE_MAGMA:BOOL=OFF\nCMAKE_PREFIX_PATH:UNINIT", "truncated"),
        (b"USE_MAGMA:BOOL=OFF\nhello world\n", ":2: not a cache entry"),
    ],
)
def test_bad_files(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "CMakeCache.txt"
    path.write_bytes(content)
    for args in (("swap-python", "--from", "3.11", "--to", "3.12", path), ("set", "USE_MAGMA=ON", path)):
        assert_one_line_error(run(*args), message)
        assert path.read_bytes() == content
    assert_one_line_error(run("show", tmp_path / "missing.txt"), "no such file")
    assert_one_line_error(run("show", tmp_path), "is a directory")


def test_usage_errors_exit_2(cache: Path) -> None:
    assert run("swap-python", cache).returncode == 2
    assert run("bogus").returncode == 2


def test_set_and_dry_run(cache: Path) -> None:
    before = snapshot(cache)
    proc = run("set", "--dry-run", "USE_MAGMA=ON", cache)
    assert proc.returncode == 0 and "USE_MAGMA: OFF -> ON" in proc.stdout
    assert snapshot(cache) == before
    proc = run("set", "USE_MAGMA=ON", cache)
    assert proc.returncode == 0
    assert "USE_MAGMA:BOOL=ON\n" in cache.read_text()
    assert cache.stat().st_mode & 0o777 == 0o640
    proc = run("set", "USE_MAGMA=ON", cache)
    assert proc.stdout.strip() == "set: nothing to change"
    assert_one_line_error(run("set", "NEW_OPT=1", cache), "--create")
    assert run("set", "--create", "--type", "BOOL", "NEW_OPT=1", cache).returncode == 0
    assert CacheFile.parse(cache.read_text()).as_dict()["NEW_OPT"].type == "BOOL"


def test_save_first_wins_and_restore_with_swap_is_atomic(cache: Path) -> None:
    orig = cache.with_name("CMakeCache.txt.orig")
    assert run("save", cache).returncode == 0
    assert orig.read_text() == SMALL and orig.stat().st_mode & 0o777 == 0o640
    run("set", "USE_MAGMA=ON", cache)
    proc = run("save", cache)
    assert proc.returncode == 0 and "already exists" in proc.stdout
    assert orig.read_text() == SMALL  # the first save wins
    # a failing swap during restore leaves the current cache untouched
    before = snapshot(cache)
    assert_one_line_error(run("restore", cache, "--swap-python-from", "3.10", "--to", "3.12.1"), "not 3.10")
    assert snapshot(cache) == before
    assert_one_line_error(run("restore", cache, "--swap-python-from", "3.11"), "go together")
    proc = run("restore", cache, "--swap-python-from", "3.11", "--to", "3.12.1")
    assert proc.returncode == 0, proc.stderr
    text = cache.read_text()
    assert "USE_MAGMA:BOOL=OFF" in text and "include/python3.12" in text
    assert orig.read_text() == SMALL
    assert run("restore", cache).returncode == 0
    assert cache.read_text() == SMALL
    assert run("save", "--force", cache).returncode == 0
    assert no_temp_files(cache.parent)


def test_show_and_diff(cache: Path, tmp_path: Path) -> None:
    proc = run("show", cache, "USE_MAGMA")
    assert proc.stdout == "USE_MAGMA:BOOL=OFF\n"
    assert run("show", cache, "USE_MAGMA", "--value-only").stdout == "OFF\n"
    assert run("show", cache, "--grep", "^use_").stdout == "USE_MAGMA:BOOL=OFF\n"
    keys = [line.split(":")[0] for line in run("show", cache, "--python").stdout.splitlines()]
    assert keys == [
        "Python_EXECUTABLE",
        "CMAKE_PREFIX_PATH",
        "_Python_INCLUDE_DIR",
        "_Python_INTERPRETER_PROPERTIES",
    ]
    other = tmp_path / "other.txt"
    other.write_text(SMALL.replace("USE_MAGMA:BOOL=OFF\n", "") + "NEW:STRING=x\n" + "")
    other.write_text(other.read_text().replace("include/python3.11", "include/python3.12"))
    assert run("diff", cache, cache).stdout == "no differences\n"
    assert run("diff", cache, other).stdout.splitlines() == [
        "- USE_MAGMA:BOOL=OFF",
        "+ NEW:STRING=x",
        f"~ _Python_INCLUDE_DIR: INTERNAL={H}/include/python3.11 -> INTERNAL={H}/include/python3.12",
    ]


def test_real_cache_via_cli(tmp_path: Path) -> None:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not present")
    path = tmp_path / "CMakeCache.txt"
    path.write_bytes(REAL.read_bytes())
    assert run("save", path).returncode == 0
    proc = run("restore", path, "--swap-python-from", "3.11", "--to", "3.12.1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count(" -> ") == 7  # six entries + the summary line
    assert run("set", "USE_MAGMA=ON", path).returncode == 0
    diff = run("diff", REAL, path).stdout.splitlines()
    assert len(diff) == 7 and all(line.startswith("~ ") for line in diff)


# ---------------------------------------------------------------- atomic writes


def test_crash_during_replace_keeps_the_old_file(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(cache)

    def boom(*_args: object) -> None:
        raise KeyboardInterrupt  # stands for a crash between write and rename

    monkeypatch.setattr(store.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        store.atomic_write(cache, b"new contents\n")
    assert snapshot(cache) == before
    assert no_temp_files(cache.parent)


def test_failed_fsync_keeps_the_old_file(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(cache)

    def fail(_fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store.os, "fsync", fail)
    with pytest.raises(MegabuildError, match="No space left"):
        store.atomic_write(cache, b"new contents\n")
    assert snapshot(cache) == before
    assert no_temp_files(cache.parent)


def test_killed_writer_leaves_old_or_new(cache: Path) -> None:
    """A real process killed at random points while rewriting: the file is always complete."""
    new = SMALL.replace("OFF", "ON").encode() * 2000
    script = (
        "import sys; from pathlib import Path; from megabuild.cache import store\n"
        "p = Path(sys.argv[1]); data = sys.argv[2].encode() * 2000\n"
        "while True: store.atomic_write(p, data if p.read_bytes().startswith(b'#') else data)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(RECIPE))
    for delay in (0.05, 0.1, 0.2):
        proc = subprocess.Popen(
            [sys.executable, "-c", script, str(cache), SMALL.replace("OFF", "ON")], env=env
        )
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        data = cache.read_bytes()
        assert data in (SMALL.encode(), new)
        assert cache.stat().st_mode & 0o777 == 0o640
