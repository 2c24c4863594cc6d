"""The "no file of another Python" rule when a 3.14 and a 3.14t pytorch coexist, on the real
cp314t wheel's listing (tests/data)."""

from __future__ import annotations

from _split_util import DATA, read_listing
from support.python_files import foreign_python_files, python_of_abi

LISTING = "torch-2.14.1-cp314t-linux_x86_64-cu130-files.tsv"


def _package(python: str) -> list[str]:
    """The cp314t wheel's files as a pytorch package for ``python`` has them."""
    return [f"lib/python{python}/site-packages/{path}" for path, _size, _x in read_listing(DATA / LISTING)]


def _naive_foreign(files: list[str], tag: str) -> list[str]:
    """The check by build-string tag and substrings (test_e2e_megabuild before free-threading)."""
    return [
        f
        for f in files
        if (".cpython-3" in f and f".cpython-{tag}" not in f)
        or (f.startswith("lib/python") and f"python{tag[0]}.{tag[1:]}" not in f)
    ]


def test_the_free_threaded_wheel_is_its_own() -> None:
    files = _package("3.14t")
    extensions = [f for f in files if ".cpython-314t-" in f]
    assert extensions, "the cp314t wheel has extension modules with the t suffix"
    assert foreign_python_files(files, "3.14t") == []


def test_a_gil_package_holding_free_threaded_files_is_caught() -> None:
    """A 3.14 package with the cp314t wheel's files: the naive check sees nothing wrong."""
    files = _package("3.14t")
    assert _naive_foreign(files, "314") == []  # python3.14 in python3.14t, cpython-314 in cpython-314t
    foreign = foreign_python_files(files, "3.14")
    assert len(foreign) == len(files)  # every file lies in the other build's site-packages
    moved = [f.replace("python3.14t/", "python3.14/") for f in files]
    assert [f for f in foreign_python_files(moved, "3.14") if "_C" in f.rsplit("/", 1)[-1]], "t suffix"


def test_bytecode_is_told_apart_by_site_packages_not_by_tag() -> None:
    """3.14t's pyc tag is cpython-314 (the GIL build's): right under python3.14t, foreign elsewhere."""
    own = "lib/python3.14t/site-packages/torch/__pycache__/functional.cpython-314.pyc"
    other_build = "lib/python3.14/site-packages/torch/__pycache__/functional.cpython-314.pyc"
    other_version = "lib/python3.14t/site-packages/torch/__pycache__/functional.cpython-312.opt-1.pyc"
    assert foreign_python_files([own, other_build, other_version], "3.14t") == [other_build, other_version]
    assert foreign_python_files([other_build], "3.14") == []


def test_windows_suffixes() -> None:
    files = [
        "Lib/site-packages/torch/_C.cp314t-win_amd64.pyd",
        "Lib/site-packages/torch/_C.cp314-win_amd64.pyd",
    ]
    assert foreign_python_files(files, "3.14t") == [files[1]]
    assert foreign_python_files(files, "3.14") == [files[0]]


def test_python_of_abi() -> None:
    assert python_of_abi(["libtorch 2.14.1", "python_abi 3.14.* *_cp314t"]) == "3.14t"
    assert python_of_abi(["python_abi 3.13.* *_cp313"]) == "3.13"
