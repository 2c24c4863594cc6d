"""swap-python and set (MAGMA) on synthetic traps and on the real PyTorch 2.6 cache."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cpythons import CPython, make_conda_like_prefix
from megabuild.cache.cli import diff_caches
from megabuild.cache.model import CacheFile
from megabuild.cache.options import set_options
from megabuild.cache.python_swap import is_python_key, swap_python
from megabuild.errors import MegabuildError
from support.paths import REAL_PYTORCH_CACHE

REAL = REAL_PYTORCH_CACHE
REAL_PREFIX = "/home/conda/feedstock_root/build_artifacts/libtorch_1700000000000/_h_env_placehold"

H = "/nonexistent/host_env"  # interpreter missing: string mode
B = "/nonexistent/build_env"


DETAILS_TAIL = "[cfound components: Interpreter Development.Module NumPy ][v3.11.7()]"


def synthetic(host: str = H) -> str:
    return f"""# This is the CMakeCache file.
########################
# EXTERNAL cache entries
########################

CMAKE_PREFIX_PATH:UNINITIALIZED={host}/lib/python3.11/site-packages;{host}
Python_EXECUTABLE:UNINITIALIZED={host}/bin/python
PYTHON_EXECUTABLE:FILEPATH={B}/bin/python3.11
CUDA_TOOLKIT_ROOT_DIR:PATH=/usr/local/cuda-13.11
CUDA_NVCC_EXECUTABLE:FILEPATH={host}/targets/cuda-13.11/bin/nvcc
OTHER_TOOL:PATH=/opt/tool-3.11.1/bin
USE_MAGMA:BOOL=OFF
pybind11_DIR:PATH={host}/lib/python3.11/site-packages/pybind11/share/cmake/pybind11
PYTHON_MODULE_EXTENSION:INTERNAL=.cpython-311-x86_64-linux-gnu.so
PYBIND11_PYTHON_VERSION:STRING=3.11

########################
# INTERNAL cache entries
########################

CMAKE_COMMAND:INTERNAL={host}/lib/python3.11/site-packages/cmake/data/bin/cmake
CMAKE_ROOT:INTERNAL={host}/lib/python3.11/site-packages/cmake/data/share/cmake-3.31
FIND_PACKAGE_MESSAGE_DETAILS_Python:INTERNAL=[{host}/bin/python][{host}/include/python3.11]{DETAILS_TAIL}
FIND_PACKAGE_MESSAGE_DETAILS_PythonInterp:INTERNAL=[{B}/bin/python3.11][v3.11.7()]
PYTHONLIBS_VERSION_STRING:INTERNAL=3.11.7
_Python_DEVELOPMENT_MODULE_SIGNATURE:INTERNAL=a311b3110000000000000000000311aa
_Python_EXECUTABLE:INTERNAL={host}/bin/python
_Python_INCLUDE_DIR:INTERNAL={host}/include/python3.11
_Python_LIBRARY_RELEASE:INTERNAL={host}/lib/python3.11/config-3.11-x86_64-linux-gnu/libpython3.11.a
_Python_INTERPRETER_PROPERTIES:INTERNAL=Python;3;11;7;64;;cpython-311-x86_64-linux-gnu;abi3;{host}/lib/python3.11;{host}/lib/python3.11;{host}/lib/python3.11/site-packages;{host}/lib/python3.11/site-packages
_Python_NumPy_INCLUDE_DIR:INTERNAL={host}/lib/python3.11/site-packages/numpy/_core/include
"""


def changed_keys(before: CacheFile, after: CacheFile) -> set[str]:
    a, b = before.as_dict(), after.as_dict()
    assert a.keys() == b.keys()
    return {k for k in a if a[k].value != b[k].value}


def test_swap_changes_exactly_the_python_entries() -> None:
    before = CacheFile.parse(synthetic())
    cache = CacheFile.parse(synthetic())
    result = swap_python(cache, "3.11", "3.12.1")
    assert result.mode == "string"
    d = cache.as_dict()
    assert changed_keys(before, cache) == {
        "CMAKE_PREFIX_PATH",
        "pybind11_DIR",
        "PYTHON_MODULE_EXTENSION",
        "PYBIND11_PYTHON_VERSION",
        "FIND_PACKAGE_MESSAGE_DETAILS_Python",
        "PYTHONLIBS_VERSION_STRING",
        "_Python_INCLUDE_DIR",
        "_Python_LIBRARY_RELEASE",
        "_Python_INTERPRETER_PROPERTIES",
        "_Python_NumPy_INCLUDE_DIR",
    }
    assert {k for k, _, _ in result.changes} == changed_keys(before, cache)
    assert d["_Python_INTERPRETER_PROPERTIES"].value.startswith(
        "Python;3;12;1;64;;cpython-312-x86_64-linux-gnu;"
    )
    assert (
        d["_Python_LIBRARY_RELEASE"].value
        == f"{H}/lib/python3.12/config-3.12-x86_64-linux-gnu/libpython3.12.a"
    )
    assert d["FIND_PACKAGE_MESSAGE_DETAILS_Python"].value.endswith("[v3.12.1()]")
    assert d["PYTHONLIBS_VERSION_STRING"].value == "3.12.1"
    assert d["PYBIND11_PYTHON_VERSION"].value == "3.12"
    # traps: pip's cmake under site-packages, CUDA 13.11, a 3.11.1 tool prefix, BUILD_PREFIX's python
    for key in ("CMAKE_COMMAND", "CMAKE_ROOT", "CUDA_TOOLKIT_ROOT_DIR", "CUDA_NVCC_EXECUTABLE", "OTHER_TOOL"):
        assert d[key].value == before.as_dict()[key].value
    assert d["PYTHON_EXECUTABLE"].value == f"{B}/bin/python3.11"
    assert d["FIND_PACKAGE_MESSAGE_DETAILS_PythonInterp"].value == f"[{B}/bin/python3.11][v3.11.7()]"
    assert d["_Python_DEVELOPMENT_MODULE_SIGNATURE"].value == "a311b3110000000000000000000311aa"


def test_naive_sed_is_what_we_avoid() -> None:
    """The unescaped sed of conda-forge's feedstock corrupts the version list; our swap does not."""
    text = synthetic()
    sed = re.sub(r"3.11", "3.12", text)  # sed s/3.11/3.12/g with an unescaped dot
    assert "Python;3.12;7" in sed or "3;11;7" in sed  # the list form is not fixed by sed
    cache = CacheFile.parse(text)
    swap_python(cache, "3.11", "3.12.1")
    assert "Python;3;12;1;" in cache.render()
    assert "cuda-13.11" in cache.render()


def test_prefix_containing_a_version_is_not_touched() -> None:
    host = "/opt/env-3.11.1/python3.11-host"
    cache = CacheFile.parse(synthetic(host))
    swap_python(cache, "3.11", "3.12.1")
    d = cache.as_dict()
    assert d["_Python_INCLUDE_DIR"].value == f"{host}/include/python3.12"
    assert d["Python_EXECUTABLE"].value == f"{host}/bin/python"


def test_string_mode_needs_the_patch_level() -> None:
    cache = CacheFile.parse(synthetic())
    with pytest.raises(MegabuildError, match="full version"):
        swap_python(cache, "3.11", "3.12")


@pytest.mark.parametrize(
    ("edit", "from_", "message"),
    [
        (lambda t: t, "3.10", "configured with Python 3.11.7, not 3.10"),
        (lambda t: t, "3.11.2", "MAJOR.MINOR"),
        (lambda t: t.replace("Python;3;11;7", "Python;3;11;7x"), "3.11", None),
        (
            lambda t: t + "PYTHON_LEFTOVER_TAG:STRING=py3.11\n",
            "3.11",
            "remain after the swap in: PYTHON_LEFTOVER",
        ),
        (
            lambda t: re.sub(r"_Python_INTERPRETER_PROPERTIES.*\n|.*DETAILS_Python:.*\n", "", t),
            "3.11",
            "no Python",
        ),
    ],
)
def test_swap_failures(edit, from_: str, message: str | None) -> None:  # type: ignore[no-untyped-def]
    cache = CacheFile.parse(edit(synthetic()))
    if message is None:  # sanity: a harmless edit still swaps
        swap_python(cache, from_, "3.12.1")
        return
    with pytest.raises(MegabuildError, match=message):
        swap_python(cache, from_, "3.12.1")


def test_swap_without_any_reference_fails() -> None:
    text = (
        "Python_EXECUTABLE:FILEPATH=/x/bin/python\n"
        "FIND_PACKAGE_MESSAGE_DETAILS_Python:INTERNAL=[/x/bin/python][v3.11.7()]\n"
    )
    cache = CacheFile.parse(text.replace("v3.11.7", "v3.11"))
    swap_python(cache, "3.11", "3.12")  # the details entry is the only reference: fine
    cache = CacheFile.parse("Python_EXECUTABLE:FILEPATH=/x/bin/python\nPYTHON_VERSION_HINT:STRING=3.11\n")
    with pytest.raises(MegabuildError, match="records no Python version"):
        swap_python(cache, "3.11", "3.12")


# ------------------------------------------------------------------ real PyTorch cache


@pytest.fixture
def real_text() -> str:
    if not REAL.is_file():
        pytest.skip(f"{REAL} not present")
    return REAL.read_text()


def _version_refs(value: str) -> bool:
    return bool(re.search(r"(?<![0-9])3[.;]11(?![0-9])|(?<![0-9A-Za-z])311(?![0-9A-Za-z])", value))


def test_real_cache_swap_string_mode(real_text: str) -> None:
    before = CacheFile.parse(real_text)
    cache = CacheFile.parse(real_text)
    result = swap_python(cache, "3.11", "3.12.1")
    assert result.mode == "string" and str(result.old) == "3.11.7"
    changed = changed_keys(before, cache)
    # every Python-related entry that mentioned 3.11 changed, nothing else did
    expected = {
        e.key
        for e in before.entries()
        if is_python_key(e.key) and _version_refs(e.value.replace(REAL_PREFIX, ""))
    }
    assert changed == expected
    assert changed == {
        "CMAKE_PREFIX_PATH",
        "FIND_PACKAGE_MESSAGE_DETAILS_Python",
        "FIND_PACKAGE_MESSAGE_DETAILS_PythonInterp",
        "_Python_INCLUDE_DIR",
        "_Python_INTERPRETER_PROPERTIES",
        "_Python_NumPy_INCLUDE_DIR",
    }
    after = cache.as_dict()
    for key in ("CMAKE_COMMAND", "CMAKE_ROOT", "CMAKE_CPACK_COMMAND", "CMAKE_CTEST_COMMAND"):
        assert "python3.11/site-packages/cmake" in after[key].value
    props = after["_Python_INTERPRETER_PROPERTIES"].value.split(";")
    assert props[:8] == ["Python", "3", "12", "1", "64", "<none>", "cpython-312-x86_64-linux-gnu", "abi3"]
    assert all(p.startswith(f"{REAL_PREFIX}/lib/python3.12") for p in props[8:])
    for entry in cache.entries():
        if is_python_key(entry.key):
            assert not _version_refs(entry.value.replace(REAL_PREFIX, "")), entry
    # the header comment names pip's cmake under python3.11: comments are never edited
    assert cache.render().splitlines()[2] == real_text.splitlines()[2]


def test_real_cache_magma_toggle(real_text: str) -> None:
    before = CacheFile.parse(real_text)
    cache = CacheFile.parse(real_text)
    result = set_options(cache, ["USE_MAGMA=ON"])
    assert diff_caches(before, cache) == ["~ USE_MAGMA: BOOL=OFF -> BOOL=ON"]
    assert result.removed == []
    # and back: byte-identical to the original
    set_options(cache, ["USE_MAGMA=OFF"])
    assert cache.render() == real_text


def test_magma_memos_are_cleared() -> None:
    text = (
        "USE_MAGMA:BOOL=OFF\n"
        "//Path to a library.\nMAGMA_LIBRARIES:FILEPATH=MAGMA_LIBRARIES-NOTFOUND\n\n"
        "//Path to a file.\nMAGMA_INCLUDE_DIR:PATH=/p/include\n\n"
        "MAGMA_V2:INTERNAL=\n"
        "CUDA_VERSION:STRING=12.6\n"
    )
    cache = CacheFile.parse(text)
    result = set_options(cache, ["USE_MAGMA=ON"])
    d = cache.as_dict()
    assert d["USE_MAGMA"].value == "ON"
    assert "MAGMA_LIBRARIES" not in d and "MAGMA_V2" not in d
    assert d["MAGMA_INCLUDE_DIR"].value == "/p/include"
    assert {k for k, _ in result.removed} == {"MAGMA_LIBRARIES", "MAGMA_V2"}
    assert "Path to a library" not in cache.render()
    # a successful, still valid check is kept
    ok = (
        "USE_MAGMA:BOOL=OFF\nMAGMA_LIBRARIES:FILEPATH=/p/lib/libmagma.so\n"
        "MAGMA_INCLUDE_DIR:PATH=/p/include\nMAGMA_V2:INTERNAL=1\n"
    )
    cache = CacheFile.parse(ok)
    set_options(cache, ["USE_MAGMA=ON"])
    assert cache.as_dict()["MAGMA_V2"].value == "1"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (["NOPE=1"], {}, "no cache entry NOPE"),
        (["CMAKE_COMMAND=/x"], {}, "INTERNAL entry"),
        (["CMAKE_HOME_DIRECTORY=/x"], {}, "INTERNAL entry"),
        (["USE_MAGMA=maybe"], {}, "BOOL"),
        (["USE_MAGMA"], {}, "KEY=VALUE"),
        (["USE_MAGMA=ON", "USE_MAGMA=OFF"], {}, "given twice"),
        (["NEW=1"], {"type_": "BOOL"}, "--type only applies"),
        (["NEW=1"], {"create": True, "type_": "INTERNAL"}, "--type must be"),
    ],
)
def test_set_refusals(real_text: str, args: list[str], kwargs: dict[str, object], message: str) -> None:
    cache = CacheFile.parse(real_text)
    with pytest.raises(MegabuildError, match=message):
        set_options(cache, args, **kwargs)  # type: ignore[arg-type]


def test_set_create(real_text: str) -> None:
    cache = CacheFile.parse(real_text)
    set_options(cache, ["MEGABUILD_MARK=yes"], create=True, type_="STRING")
    assert CacheFile.parse(cache.render()).as_dict()["MEGABUILD_MARK"].type == "STRING"


# ------------------------------------------------- interpreter mode on the real cache


def _retarget(text: str, prefix: Path) -> str:
    return text.replace(REAL_PREFIX, str(prefix))


def test_real_cache_interpreter_disagrees(real_text: str, cpythons: list[CPython], tmp_path: Path) -> None:
    others = [c for c in cpythons if c.short != "3.12"]
    if not others:
        pytest.skip("needs a CPython other than 3.12")
    prefix = tmp_path / "env"
    (prefix / "bin").mkdir(parents=True)
    os.symlink(others[-1].executable, prefix / "bin" / "python")
    cache = CacheFile.parse(_retarget(real_text, prefix))
    with pytest.raises(MegabuildError, match=rf"disagrees with .* which is Python {others[-1].short}"):
        swap_python(cache, "3.11", "3.12")


def test_real_cache_interpreter_mode(
    real_text: str, cpythons: list[CPython], tmp_path: Path, pip_wheel_cache: Path
) -> None:
    target = next((c for c in cpythons if c.short == "3.12"), None) or next(
        (c for c in cpythons if c.short != "3.11"), None
    )
    if target is None:
        pytest.skip("needs a CPython other than 3.11")
    prefix = make_conda_like_prefix(target, tmp_path / "env", cache_dir=pip_wheel_cache)
    cache = CacheFile.parse(_retarget(real_text, prefix))
    wrong_patch = f"{target.short}.{target.version[2] + 1}"
    with pytest.raises(MegabuildError, match="disagrees"):
        swap_python(CacheFile.parse(_retarget(real_text, prefix)), "3.11", wrong_patch)
    result = swap_python(cache, "3.11", target.short)
    assert result.mode == "interpreter"
    assert result.new.patch == target.version[2]
    d = cache.as_dict()
    v = target.version
    assert d["_Python_INTERPRETER_PROPERTIES"].value.startswith(
        f"Python;{v[0]};{v[1]};{v[2]};64;<none>;cpython-{v[0]}{v[1]}-x86_64-linux-gnu;"
    )
    numpy_inc = Path(d["_Python_NumPy_INCLUDE_DIR"].value)
    assert (numpy_inc / "numpy" / "ndarrayobject.h").is_file()
    assert Path(d["_Python_INCLUDE_DIR"].value, "Python.h").is_file()
    assert d["FIND_PACKAGE_MESSAGE_DETAILS_PythonInterp"].value.endswith(f"[v{v[0]}.{v[1]}.{v[2]}()]")
