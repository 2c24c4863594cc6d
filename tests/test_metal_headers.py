"""``torch.compile`` on MPS finds the ``c10/metal`` headers in ``$PREFIX/include`` (patch 0013).

Inductor's Metal backend and ``torch.mps.compile_shader()`` replace every
``#include <c10/metal/*.h>`` line of a shader by the header's text before Metal compiles it
(``_embed_headers`` in ``torch/utils/_cpp_embed_headers.py``), looking in the include dirs their
callers pass. The real 2.14.1 code (read from the macOS arm64 wheel on PyPI at test time; wheels
are not committed) runs here, on Linux, against a conda prefix laid out by the real split of the
real osx-arm64 listing: ``split stage``, ``split install libtorch`` and the pytorch output's
``split link-back --drop-libtorch-headers``, with the wheel's ``c10/metal`` headers as their
contents. Real code, fake runtime: ``torch._C._mps_compileShader`` only records the source Metal
would get, and ``sysconfig.get_config_var("prefix")`` answers the laid-out prefix (conda rewrites
it to the env's prefix). What the Metal compiler then does only a Mac shows.

Without patch 0013 the include stays unresolved in both entry points (the bug); with it the header
text is embedded, and the upstream wheel layout (headers in site-packages) still works.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import types
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _split_util import DATA, REAL_SPEC, lay_out_placeholders, read_listing, run_cli, write
from feedstock import patch_check
from feedstock.paths import RECIPE

LISTING = DATA / "torch-2.14.1-cp312-macosx_arm64-files.tsv"
PATCH = next((RECIPE / "patches").glob("0013-*Metal*.patch"), None)
SHADER_FILES = (
    "torch/utils/_cpp_embed_headers.py",
    "torch/mps/__init__.py",
    "torch/_inductor/codegen/mps.py",
)
METAL = "torch/include/c10/metal/"
# headers inductor's Metal kernels include (codegen/mps.py: self.headers.add(...)) and utils.h
HEADERS = ("utils", "special_math", "reduction_utils", "random", "atomic")

pytestmark = pytest.mark.slow  # may fetch the real macOS arm64 wheel (127 MB) once


class Wheel:
    """The files of the real macOS arm64 wheel this test needs: shader code and c10/metal."""

    def __init__(self, members: dict[str, bytes]) -> None:
        self.members = members

    def text(self, name: str) -> str:
        return self.members[name].decode("utf-8")


@pytest.fixture(scope="module")
def wheel() -> Wheel:
    try:
        path = patch_check.download_wheel(patch_check.DEFAULT_PLATFORM)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} macOS wheel not reachable on PyPI: {exc}")
    assert path.name.startswith(f"torch-{patch_check.TORCH_VERSION}-"), path
    with zipfile.ZipFile(path) as zf:
        names = [n for n in zf.namelist() if n in SHADER_FILES or (n.startswith(METAL) and n.endswith(".h"))]
        return Wheel({n: zf.read(n) for n in names})


def patched(wheel: Wheel, root: Path) -> dict[str, str]:
    """The shader files with patch 0013 applied by ``patch`` (as conda-build applies it)."""
    assert PATCH is not None, "recipe/patches/0013-*Metal*.patch is missing"
    for name in SHADER_FILES:
        write(root / name, wheel.members[name])
    proc = subprocess.run(
        ["patch", "-p1", "--fuzz=0", "--no-backup-if-mismatch", "-i", str(PATCH)],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return {name: (root / name).read_text(encoding="utf-8") for name in SHADER_FILES}


def unpatched(wheel: Wheel) -> dict[str, str]:
    return {name: wheel.text(name) for name in SHADER_FILES}


def split_prefix(contents: dict[str, bytes], root: Path) -> tuple[Path, Path]:
    """($PREFIX, $SP_DIR) of a pytorch test env after the split of the real osx-arm64 listing;
    the files named in ``contents`` have those bytes, the others are empty placeholders."""
    rows = [r for r in read_listing(LISTING) if r[0].startswith(("torch/", "functorch/", "torchgen/"))]
    real = [r for r in rows if r[0] in contents]
    others = [r for r in rows if r[0] not in contents]

    def lay_out(sp_dir: Path) -> None:
        lay_out_placeholders(sp_dir, others, root / "blanks")
        for path, _size, _x in real:
            write(sp_dir / path, contents[path])

    plat = ("--spec", REAL_SPEC, "--target-platform", "osx-arm64")
    top = root / "top/lib/python3.12/site-packages"
    lay_out(top)
    staging, prefix = root / "staging", root / "prefix"
    sp_dir = prefix / "lib/python3.12/site-packages"
    steps: list[tuple[str | Path, ...]] = [
        ("stage", *plat, "--tree", top / "torch", "--staging", staging, "--linalg-variant", "nomagma"),
        ("verify", *plat, "--staging", staging),
        ("install", "libtorch", *plat, "--staging", staging, "--prefix", prefix),
    ]
    for args in steps:
        res = run_cli(*args)
        assert res.returncode == 0, f"split {args[0]}: {res.stderr}"
    lay_out(sp_dir)  # the pytorch output's own `pip install .`
    link_back = ("link-back", *plat, "--prefix", prefix, "--sp-dir", sp_dir, "--drop-libtorch-headers")
    res = run_cli(*link_back, "--python-tag", "cpython-312")
    assert res.returncode == 0, f"split link-back: {res.stderr}"
    return prefix, sp_dir


@pytest.fixture(scope="module")
def conda_layout(wheel: Wheel, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    headers = {name: data for name, data in wheel.members.items() if name.startswith(METAL)}
    assert len(headers) == len([r for r in read_listing(LISTING) if r[0].startswith(METAL)])
    prefix, sp_dir = split_prefix(headers, tmp_path_factory.mktemp("metal"))
    assert (prefix / "include/c10/metal/utils.h").is_file()
    assert not (sp_dir / "torch/include/c10").exists(), "link-back left libtorch's headers in site-packages"
    return prefix, sp_dir


def embed_module(source: str) -> types.ModuleType:
    module = types.ModuleType("torch.utils._cpp_embed_headers")
    exec(compile(source, "torch/utils/_cpp_embed_headers.py", "exec"), module.__dict__)
    return module


def fake_sysconfig(prefix: Path) -> types.ModuleType:
    module = types.ModuleType("sysconfig")
    module.get_config_var = {"prefix": str(prefix)}.get  # type: ignore[attr-defined]
    return module


def run_compile_shader(
    files: dict[str, str], sp_dir: Path, prefix: Path, shader: str, monkeypatch: pytest.MonkeyPatch
) -> str:
    """``torch.mps.compile_shader(shader)`` as the file defines it; the source Metal would get."""
    tree = ast.parse(files["torch/mps/__init__.py"])
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "compile_shader"]
    compiled: list[str] = []
    torch = types.ModuleType("torch")
    torch._C = types.SimpleNamespace(_mps_compileShader=lambda src: compiled.append(src) or "lib")  # type: ignore[attr-defined]
    utils = types.ModuleType("torch.utils")
    embed = embed_module(files["torch/utils/_cpp_embed_headers.py"])
    for name, module in (("torch", torch), ("torch.utils", utils), (embed.__name__, embed)):
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(sys.modules, "sysconfig", fake_sysconfig(prefix))
    namespace: dict[str, Any] = {"torch": torch, "__file__": str(sp_dir / "torch/mps/__init__.py")}
    exec(compile(ast.Module(body=[func], type_ignores=[]), "torch/mps/__init__.py", "exec"), namespace)
    assert namespace["compile_shader"](shader) == "lib"
    (source,) = compiled
    return source


def inductor_embed_call(files: dict[str, str]) -> ast.Call:
    """The ``_embed_headers(...)`` call of ``MetalKernel.codegen_kernel`` (cpp-wrapper path)."""
    tree = ast.parse(files["torch/_inductor/codegen/mps.py"])
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "_embed_headers"
    ]
    assert len(calls) == 1, f"expected one _embed_headers call in codegen/mps.py, found {len(calls)}"
    return calls[0]


def run_inductor_embed(files: dict[str, str], sp_dir: Path, prefix: Path, headers: list[str]) -> str:
    """Inductor's header embedding, the call expression as the file has it."""
    call = inductor_embed_call(files)
    embed = embed_module(files["torch/utils/_cpp_embed_headers.py"])
    namespace: dict[str, Any] = {
        "_embed_headers": embed._embed_headers,
        "headers": headers,
        "OrderedSet": set,
        "Path": Path,
        "sysconfig": fake_sysconfig(prefix),
        "__file__": str(sp_dir / "torch/_inductor/codegen/mps.py"),
    }
    result = eval(compile(ast.Expression(body=call), "torch/_inductor/codegen/mps.py", "eval"), namespace)
    assert isinstance(result, str)
    return result


SHADER = (
    "#include <c10/metal/utils.h>\n"
    "kernel void full(device float* out, constant float& val, uint idx [[thread_position_in_grid]]) {\n"
    "  out[idx] = val;\n"
    "}"
)


def unresolved(source: str) -> list[str]:
    # inductor joins its include lines without newlines (as the wheel's code writes them)
    return re.findall(r"#include\s*<c10/metal/[^>]+>", source)


def metal_text(wheel: Wheel, header: str) -> str:
    """A line of the real header that no other c10/metal header has (proof it was embedded)."""
    own = wheel.text(f"{METAL}{header}.h").splitlines()
    others = {
        line
        for n, data in wheel.members.items()
        if n.startswith(METAL) and not n.endswith(f"/{header}.h")
        for line in data.decode().splitlines()
    }
    return next(line for line in own if len(line) > 30 and line not in others and not line.startswith("#"))


Runner = Callable[[dict[str, str], Path, Path], str]


def shader_runner(monkeypatch: pytest.MonkeyPatch) -> Runner:
    return lambda files, sp, prefix: run_compile_shader(files, sp, prefix, SHADER, monkeypatch)


def inductor_runner(files: dict[str, str], sp: Path, prefix: Path) -> str:
    return run_inductor_embed(files, sp, prefix, [f"#include <c10/metal/{h}.h>" for h in HEADERS])


def test_without_the_patch_the_conda_layout_leaves_the_includes_unresolved(
    wheel: Wheel, conda_layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bug: the wheel's code looks in site-packages only; Metal would not find the headers."""
    prefix, sp_dir = conda_layout
    files = unpatched(wheel)
    assert unresolved(shader_runner(monkeypatch)(files, sp_dir, prefix)) == ["#include <c10/metal/utils.h>"]
    assert len(unresolved(inductor_runner(files, sp_dir, prefix))) == len(HEADERS)


def test_with_the_patch_both_entry_points_embed_the_headers_from_the_prefix(
    wheel: Wheel, conda_layout: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    prefix, sp_dir = conda_layout
    files = patched(wheel, tmp_path / "src")
    source = shader_runner(monkeypatch)(files, sp_dir, prefix)
    assert unresolved(source) == [], unresolved(source)
    assert metal_text(wheel, "utils") in source
    assert "kernel void full(" in source
    embedded = inductor_runner(files, sp_dir, prefix)
    assert unresolved(embedded) == [], unresolved(embedded)
    for header in HEADERS:
        assert metal_text(wheel, header) in embedded, header


def test_with_the_patch_the_upstream_layout_still_embeds_from_site_packages(
    wheel: Wheel, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Upstream wheels keep the headers in site-packages; the prefix has none: unchanged result."""
    sp_dir, prefix = tmp_path / "sp", tmp_path / "empty-prefix"
    for name, data in wheel.members.items():
        if name.startswith(METAL):
            write(sp_dir / name, data)
    (prefix / "include").mkdir(parents=True)
    files = patched(wheel, tmp_path / "src")
    for runner in (shader_runner(monkeypatch), inductor_runner):
        with_patch = runner(files, sp_dir, prefix)
        assert unresolved(with_patch) == []
        assert with_patch == runner(unpatched(wheel), sp_dir, prefix)
