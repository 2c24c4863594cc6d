"""How ``import torch`` finds libtorch's DLLs in conda's Windows layout, from the real code.

Windows has no link-back: ``split install`` puts libtorch's DLLs in ``%PREFIX%\\Library\\bin``
(the spec's ``install_roots``), the pytorch wheel keeps ``torch_python.dll`` in
``Lib\\site-packages\\torch\\lib`` and leaves libtorch's DLLs out. That works because the real
2.14.1 ``torch/__init__.py`` (read from the win_amd64 wheel on PyPI; no recipe patch touches it)
adds ``sys.exec_prefix\\Library\\bin`` with ``os.add_dll_directory`` and preloads
``torch\\lib\\*.dll``. Here its ``_load_dll_libraries`` runs as written, on Linux, against a
conda prefix laid out with the spec from the real win_amd64 listing: real code, fake OS calls
(``os.add_dll_directory``, ``ctypes``' kernel32, ``sysconfig``, ``importlib.util.find_spec``);
the file checks (``os.path.exists``, ``glob``) are real.
"""

from __future__ import annotations

import ast
import builtins
import glob
import os
import subprocess
import textwrap
import types
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from _split_util import DATA, REAL_SPEC, read_listing, write
from feedstock import patch_check
from megabuild.split.spec import DROPPED, load_spec

LISTING = DATA / "torch-2.14.1-cp312-win_amd64-files.tsv"
C_EXT = "_C.cp312-win_amd64.pyd"

pytestmark = pytest.mark.slow  # may fetch the real win_amd64 wheel (124 MB) once


@pytest.fixture(scope="module")
def init_source() -> str:
    """The real torch/__init__.py of the 2.14.1 win_amd64 wheel."""
    try:
        wheel = patch_check.download_wheel("win_amd64")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} win_amd64 wheel not reachable on PyPI: {exc}")
    assert wheel.name.startswith(f"torch-{patch_check.TORCH_VERSION}-"), wheel
    with zipfile.ZipFile(wheel) as zf:
        return zf.read("torch/__init__.py").decode("utf-8")


def loader_function(source: str) -> ast.FunctionDef:
    """``_load_dll_libraries``, defined under ``if sys.platform == "win32":``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and "win32" in ast.unparse(node.test):
            for inner in node.body:
                if isinstance(inner, ast.FunctionDef) and inner.name == "_load_dll_libraries":
                    return inner
    raise AssertionError("torch/__init__.py: no _load_dll_libraries under sys.platform == 'win32'")


def lay_out_conda_prefix(prefix: Path) -> Path:
    """The win listing's torch/lib files and torch._C where the split puts them; returns SP_DIR."""
    spec = load_spec(REAL_SPEC, "win-64")
    sp_dir = prefix / "Lib" / "site-packages"
    for path, _size, _x in read_listing(LISTING):
        rel = path.removeprefix("torch/")
        if not path.startswith("torch/lib/") and rel != C_EXT:
            continue
        output = spec.classify(rel).output
        if output == spec.default_output:
            write(sp_dir / path)
        elif output != DROPPED:
            placed = spec.install_path(rel)
            assert placed is not None, rel
            write(prefix / placed)
    return sp_dir


@dataclass
class FakeWindows:
    """What the loader asked of Windows."""

    dll_dirs: list[str] = field(default_factory=list)
    loaded: list[str] = field(default_factory=list)
    environ: dict[str, str] = field(default_factory=lambda: {"PATH": "C:\\Windows"})


def fake_globals(fake: FakeWindows, exec_prefix: Path, sp_dir: Path) -> dict[str, Any]:
    """Module globals for the real function: the real os.path and glob, fake OS calls."""
    kernel32 = types.SimpleNamespace(
        AddDllDirectory=object(),
        SetErrorMode=lambda mode: 0,
        LoadLibraryW=types.SimpleNamespace(restype=None),
        LoadLibraryExW=types.SimpleNamespace(restype=None),
    )

    def load_ex(dll: str, _handle: object, _flags: int) -> int:
        fake.loaded.append(dll)
        return 1

    kernel32.LoadLibraryExW = load_ex
    fake_ctypes = types.SimpleNamespace(
        WinDLL=lambda name, use_last_error=False: kernel32,
        CDLL=lambda name: None,
        c_void_p=object,
        get_last_error=lambda: 0,
        WinError=OSError,
    )
    fake_os = types.SimpleNamespace(
        path=os.path, getenv=lambda key, default=None: default, environ=fake.environ,
        add_dll_directory=fake.dll_dirs.append,
    )  # fmt: skip
    fake_sys = types.SimpleNamespace(
        platform="win32", exec_prefix=str(exec_prefix), base_exec_prefix=str(exec_prefix)
    )
    modules = {
        "importlib": types.SimpleNamespace(
            util=types.SimpleNamespace(
                find_spec=lambda name: types.SimpleNamespace(origin=str(sp_dir / "torch" / C_EXT))
            )
        ),
        "sysconfig": types.SimpleNamespace(
            get_config_var=lambda name: str(exec_prefix.parent / "no-userbase")
        ),
        "torch.version": types.SimpleNamespace(cuda=None),  # the CPU build
    }

    def fake_import(
        name: str, globals_: object = None, locals_: object = None, fromlist: Any = (), level: int = 0
    ) -> Any:
        # `import a.b` binds the top package, `from a.b import c` the module a.b itself
        return modules[name] if fromlist else modules[name.partition(".")[0]]

    return {
        "__builtins__": dict(vars(builtins), __import__=fake_import),
        "__file__": str(sp_dir / "torch" / "__init__.py"),
        "os": fake_os, "sys": fake_sys, "glob": glob, "ctypes": fake_ctypes, "builtins": builtins,
        "platform": types.SimpleNamespace(machine=lambda: "AMD64"), "textwrap": textwrap,
    }  # fmt: skip


def run_loader(init_source: str, prefix: Path, sp_dir: Path) -> FakeWindows:
    function = loader_function(init_source)
    module = ast.Module(body=[function], type_ignores=[])
    namespace = fake_globals(fake := FakeWindows(), prefix, sp_dir)
    exec(compile(module, "torch/__init__.py", "exec"), namespace)  # the real function, as written
    namespace["_load_dll_libraries"]()
    return fake


def test_the_loader_computes_library_bin_from_exec_prefix(init_source: str) -> None:
    body = ast.unparse(loader_function(init_source))
    assert "os.path.join(sys.exec_prefix, 'Library', 'bin')" in body
    assert "os.add_dll_directory(dll_path)" in body
    assert "glob.glob(os.path.join(th_dll_path, '*.dll'))" in body


def test_import_torch_finds_libtorch_in_library_bin(init_source: str, tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    sp_dir = lay_out_conda_prefix(prefix)
    fake = run_loader(init_source, prefix, sp_dir)
    library_bin = str(prefix / "Library" / "bin")
    torch_lib = str(sp_dir / "torch" / "lib")
    print(f"\nadd_dll_directory: {fake.dll_dirs}\npreloaded: {fake.loaded}")
    assert fake.dll_dirs == [torch_lib, library_bin]
    assert fake.loaded == [os.path.join(torch_lib, "torch_python.dll")]
    # torch_python.dll's and _C's DLL dependencies from libtorch are on that search path
    for name in ("c10.dll", "torch.dll", "torch_cpu.dll", "torch_global_deps.dll", "shm.dll"):
        assert os.path.isfile(os.path.join(library_bin, name)), name
        assert not os.path.exists(os.path.join(torch_lib, name)), name
    # the bundled OpenMP runtime and libuv are dropped: conda's intel-openmp/libuv sit in Library\bin
    assert not glob.glob(os.path.join(torch_lib, "libiomp*")) and not os.path.exists(
        os.path.join(torch_lib, "uv.dll")
    )


def test_without_library_bin_the_loader_adds_only_torch_lib(init_source: str, tmp_path: Path) -> None:
    """The contrast: the DLL directory comes from the prefix's layout, not from a fixed list."""
    prefix = tmp_path / "env"
    sp_dir = prefix / "Lib" / "site-packages"
    write(sp_dir / "torch" / "lib" / "torch_python.dll")
    fake = run_loader(init_source, prefix, sp_dir)
    assert fake.dll_dirs == [str(sp_dir / "torch" / "lib")]
