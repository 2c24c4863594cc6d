"""swap-python with a free-threaded (``t``) Python: GIL -> free-threaded -> GIL, in string mode.

The free-threaded names (measured on CPython 3.13.5t, see docs/architecture.md):
``python3.13t`` (interpreter, ``include/``, ``lib/``), ``libpython3.13t.so``,
``config-3.13t-<triplet>``, SOABI ``cpython-313t-<triplet>`` (``cp313t-win_amd64`` on
Windows, ``cpython-313t-darwin`` on macOS) and FindPython's ABIFLAGS field ``t``.
The version atoms (``3.13``, ``3;13``) are the GIL build's. Interpreter mode with the real
free-threaded interpreter: ``tests/test_freethreaded_megabuild.py``.
"""

from __future__ import annotations

import pytest
from megabuild.cache.model import CacheFile
from megabuild.cache.python_swap import PyVersion, recorded_version, swap_python
from megabuild.errors import MegabuildError
from test_cache_swap import H, synthetic
from test_cache_swap_windows import windows_cache

FT_ENTRIES = {
    "_Python_INCLUDE_DIR": f"{H}/include/python3.13t",
    "_Python_LIBRARY_RELEASE": f"{H}/lib/python3.13t/config-3.13t-x86_64-linux-gnu/libpython3.13t.a",
    "PYTHON_MODULE_EXTENSION": ".cpython-313t-x86_64-linux-gnu.so",
    "_Python_NumPy_INCLUDE_DIR": f"{H}/lib/python3.13t/site-packages/numpy/_core/include",
    "CMAKE_PREFIX_PATH": f"{H}/lib/python3.13t/site-packages;{H}",
    "PYBIND11_PYTHON_VERSION": "3.13",
}
FT_PROPERTIES = (
    f"Python;3;13;5;64;t;cpython-313t-x86_64-linux-gnu;abi3;{H}/lib/python3.13t;{H}/lib/python3.13t;"
    f"{H}/lib/python3.13t/site-packages;{H}/lib/python3.13t/site-packages"
)


def gil_cache() -> str:
    """test_cache_swap's synthetic cache, with ABIFLAGS as CMake records a GIL build's (``<none>``)."""
    return synthetic().replace(";64;;cpython-311", ";64;<none>;cpython-311")


def _swapped(text: str, steps: list[tuple[str, str]]) -> CacheFile:
    cache = CacheFile.parse(text)
    for old, new in steps:
        swap_python(cache, old, new)
    return cache


def test_gil_to_freethreaded_writes_every_t_form() -> None:
    cache = _swapped(gil_cache(), [("3.11", "3.13.5t")])
    d = cache.as_dict()
    for key, value in FT_ENTRIES.items():
        assert d[key].value == value, key
    assert d["_Python_INTERPRETER_PROPERTIES"].value == FT_PROPERTIES
    assert d["FIND_PACKAGE_MESSAGE_DETAILS_Python"].value.startswith(
        f"[{H}/bin/python][{H}/include/python3.13t]"
    )
    assert d["FIND_PACKAGE_MESSAGE_DETAILS_Python"].value.endswith("[v3.13.5()]")  # no flag in versions
    recorded = recorded_version(cache, H)
    assert recorded == PyVersion(3, 13, 5, True) and str(recorded) == "3.13.5t"


@pytest.mark.parametrize(
    "path",
    [
        [("3.11", "3.13.5t"), ("3.13", "3.12.1")],  # GIL -> t -> another GIL
        [("3.11", "3.13.5t"), ("3.13t", "3.13.5")],  # GIL -> t -> the same version's GIL build
        [("3.11", "3.13.5"), ("3.13", "3.13.5t"), ("3.13", "3.11.7")],  # same-version t, then back
    ],
    ids=["t-then-other-gil", "t-then-same-gil", "same-version-t-and-back"],
)
def test_round_trips_equal_the_direct_swap(path: list[tuple[str, str]]) -> None:
    """Going through a free-threaded build leaves no trace: the cache is what a direct swap gives."""
    last = PyVersion.parse(path[-1][1])
    via_t = _swapped(gil_cache(), path)
    if (last.major, last.minor) == (3, 11):
        assert via_t.render() == gil_cache()
        return
    assert via_t.render() == _swapped(gil_cache(), [("3.11", str(last))]).render()


def test_same_version_swap_changes_only_flagged_names() -> None:
    """3.13 -> 3.13t: the version entries stay, every name gets its ``t``."""
    gil = _swapped(gil_cache(), [("3.11", "3.13.5")])
    ft = _swapped(gil.render(), [("3.13", "3.13.5t")])
    before, after = gil.as_dict(), ft.as_dict()
    changed = {k for k in before if before[k].value != after[k].value}
    assert changed == set(FT_ENTRIES) - {"PYBIND11_PYTHON_VERSION"} | {
        "_Python_INTERPRETER_PROPERTIES",
        "FIND_PACKAGE_MESSAGE_DETAILS_Python",
        "pybind11_DIR",  # under lib/python3.13t/site-packages now
    }
    assert after["_Python_INTERPRETER_PROPERTIES"].value == FT_PROPERTIES


@pytest.mark.parametrize(
    ("text_edit", "old", "new", "message"),
    [
        # a name the rules do not rewrite: the leftover check still sees the old build
        (lambda t: t + "PYTHON_ODD_TAG:STRING=abi-313t\n", "3.13t", "3.13.5", "PYTHON_ODD_TAG"),
        (lambda t: t + "PYTHON_ODD_TAG:STRING=abi-313t\n", "3.13t", "3.12.1", "PYTHON_ODD_TAG"),
        # cp313 is rewritten in Windows caches only; in a Linux one it is a GIL name left behind
        (lambda t: t + "PYTHON_ODD_TAG:STRING=cp313-x\n", "3.13", "3.13.5t", "PYTHON_ODD_TAG"),
    ],
)
def test_leftovers_of_the_other_build_fail(text_edit, old: str, new: str, message: str) -> None:  # type: ignore[no-untyped-def]
    start = "3.13.5t" if old.endswith("t") else "3.13.5"
    cache = CacheFile.parse(text_edit(_swapped(gil_cache(), [("3.11", start)]).render()))
    with pytest.raises(MegabuildError, match=f"remain after the swap in: {message}"):
        swap_python(cache, old, new)


def test_flag_mismatches_are_errors() -> None:
    gil = _swapped(gil_cache(), [("3.11", "3.13.5")])
    with pytest.raises(MegabuildError, match=r"configured with Python 3\.13\.5, not 3\.13t"):
        swap_python(CacheFile.parse(gil.render()), "3.13t", "3.12.1")
    with pytest.raises(MegabuildError, match="same Python version"):
        swap_python(CacheFile.parse(gil.render()), "3.13", "3.13.5")
    with pytest.raises(MegabuildError, match="not a Python version"):
        swap_python(CacheFile.parse(gil.render()), "3.13", "3.13.5x")


def test_windows_forms() -> None:
    """python312.lib -> python313t.lib, cp312-win_amd64 -> cp313t-win_amd64; Lib/site-packages stays."""
    text = windows_cache()
    cache = _swapped(text, [("3.12", "3.13.5t")])
    rendered = cache.render()
    assert "libs/python313t.lib" in rendered and "Python313t.lib" in rendered
    assert "SKBUILD_SOABI:STRING=cp313t-win_amd64" in rendered
    assert "PYTHON_MODULE_EXTENSION:INTERNAL=.cp313t-win_amd64.pyd" in rendered
    assert "Program Files/Python312" in rendered  # a python.org Python outside the prefix: untouched
    back = _swapped(rendered, [("3.13t", "3.12.1")])
    assert back.render() == text


def test_macos_forms() -> None:
    """libpython3.13t.dylib and cpython-313t-darwin follow the same rules."""
    text = gil_cache().replace("libpython3.11.a", "libpython3.11.dylib").replace("x86_64-linux-gnu", "darwin")
    cache = _swapped(text, [("3.11", "3.13.5t")])
    d = cache.as_dict()
    assert (
        d["_Python_LIBRARY_RELEASE"].value == f"{H}/lib/python3.13t/config-3.13t-darwin/libpython3.13t.dylib"
    )
    assert d["PYTHON_MODULE_EXTENSION"].value == ".cpython-313t-darwin.so"
    assert _swapped(cache.render(), [("3.13t", "3.11.7")]).render() == text
