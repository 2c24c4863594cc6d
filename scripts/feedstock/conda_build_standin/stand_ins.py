"""The local channel of stand-in packages a run of the recipe solves its environments from.

:func:`make_channel` makes the channel the real conda-build solves from
(``python -m feedstock real-build``). The stand-in
(:mod:`feedstock.conda_build_standin.conda_build`) installs its
build and host prefixes without solving (pip, the CUDA wheels, its own outputs) and solves only its
test envs, from a channel of its outputs, python and numpy per Python (the same
:func:`feedstock.conda_build_standin.packaging.python_package` and ``numpy_package``; py-rattler links the
stdlib's
directory links that conda cannot (:func:`real_stdlib`), and no test env is packaged, so a
``.pyc`` written there is no stray file (:func:`compiled`)) and, for every other dependency,
:func:`requirement_stand_ins`, the function :func:`make_channel` takes them from too. The channel:

* ``python`` for each CPython here (:func:`feedstock.conda_build_standin.packaging.python_package`) with the
build string
  the config's ``python`` value asks for (``*_cpython`` for 3.12, ``*_cp313`` for 3.13,
  ``*_cp313t`` for the free-threaded build) and ``python_abi`` (``feedstock.channel``'s records);
* per Python, the real wheels of numpy, pip, setuptools, wheel, packaging, pyyaml,
  typing_extensions, six, scikit-build-core (and its pathspec) unpacked into ``site-packages``;
* ``cmake`` and ``ninja`` from their PyPI wheels (the real binaries in ``bin/``, ``share/``);
* the compilers as conda-forge lays them out: ``gcc_linux-64`` / ``gxx_linux-64`` with
  ``bin/<triplet>-{cc,gcc,cpp,c++,g++,ar,...}`` (wrappers of this machine's gcc and binutils) and
  ``etc/conda/activate.d`` scripts exporting what ctng-compiler-activation's do
  (:mod:`feedstock.conda_build_standin.compiler_activation`); ``sysroot_linux-64`` (empty: the machine's
  glibc is the sysroot);
* the netlib and OpenBLAS-backed BLAS of the fixture (``tests/fixture/libblas``), MAGMA's stand-in
  and CUDA 13.0 from NVIDIA's wheels (:mod:`feedstock.conda_build_standin.cuda_toolchain`) when a toolchain
  is given;
* an empty package for every other name the rendered requirements mention
  (``feedstock.channel.stand_in_records``).

Every package carries the run_exports of ``feedstock.render.EXTERNAL_RUN_EXPORTS`` (the model the
project's render uses), computed from the requirement that names it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from feedstock.channel import stand_in_records
from feedstock.conda_build_standin import compiler_activation, cuda_toolchain
from feedstock.conda_build_standin.channel import index
from feedstock.conda_build_standin.cpythons import CPython
from feedstock.conda_build_standin.packaging import (
    BLAS_NAMES,
    PREFIX_PLACEHOLDER,
    Package,
    abi_tag,
    blas_netlib_packages,
    blas_runtime_package,
    build_conda,
    build_stand_in_project,
    empty_package,
    magma_packages,
    next_minor,
    numpy_package,
    python_package,
)
from feedstock.conda_build_standin.prefix import pip_install_target, snapshot
from feedstock.render import _external_exports
from feedstock.specs import spec_name, spec_parts

REPO = Path(__file__).resolve().parents[2]
BLAS_FIXTURE = REPO / "tests" / "fixture" / "libblas"
MAGMA_FIXTURE = REPO / "tests" / "fixture" / "libmagma"
SUBDIR = "linux-64"
TRIPLET = compiler_activation.TRIPLETS[SUBDIR]
# per-Python packages from PyPI wheels: conda name -> pip requirement
WHEELS: dict[str, str] = {
    "pip": "pip",
    "setuptools": "setuptools",
    "wheel": "wheel",
    "packaging": "packaging",
    "pyyaml": "pyyaml",
    "typing_extensions": "typing_extensions",
    "six": "six",
    "scikit-build-core": "scikit-build-core==1.0.3",
    "pathspec": "pathspec",
}
WHEEL_DEPENDS = {"scikit-build-core": ("packaging", "pathspec")}
NO_FREETHREADED_WHEEL = frozenset({"pyyaml"})
COMPILER_VERSION = "14.3.0"
# the compiler wrappers: <triplet>-<name> -> the tool on this machine it runs
GCC_TOOLS = {
    "cc": "gcc",
    "gcc": "gcc",
    "cpp": "cpp",
    "gcc-ar": "gcc-ar",
    "gcc-nm": "gcc-nm",
    "gcc-ranlib": "gcc-ranlib",
    "ar": "ar",
    "ranlib": "ranlib",
    "ld": "ld",
    "nm": "nm",
    "strip": "strip",
    "objdump": "objdump",
    "objcopy": "objcopy",
    "readelf": "readelf",
    "as": "as",
    "size": "size",
    "strings": "strings",
    "addr2line": "addr2line",
}
GXX_TOOLS = {"c++": "g++", "g++": "g++"}
# what each compiler's activation exports besides the flags (ctng's activate-gcc.sh / -g++.sh)
GCC_VARS = {
    "CC": "cc",
    "GCC": "gcc",
    "CPP": "cpp",
    "AR": "ar",
    "GCC_AR": "gcc-ar",
    "GCC_NM": "gcc-nm",
    "GCC_RANLIB": "gcc-ranlib",
    "LD": "ld",
    "NM": "nm",
    "RANLIB": "ranlib",
    "STRIP": "strip",
    "OBJDUMP": "objdump",
    "OBJCOPY": "objcopy",
    "READELF": "readelf",
    "AS": "as",
    "CC_FOR_BUILD": "cc",
}
GXX_VARS = {"CXX": "c++", "GXX": "g++", "CXX_FOR_BUILD": "c++"}


def _record(name: str, version: str, build: str, depends: Sequence[str] = (), **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "version": version,
        "build": build,
        "build_number": 0,
        "depends": list(depends),
        "constrains": [],
        "subdir": SUBDIR,
        **extra,
    }


def _with_exports(pkg: Package, spec: str | None) -> Package:
    """Write ``info/run_exports.json`` as the render's model has it for the requirement ``spec``."""
    if spec is None:
        return pkg
    weak, strong = _external_exports(spec)
    if weak or strong:
        exports = {k: v for k, v in (("weak", weak), ("strong", strong)) if v}
        (pkg.root / "info").mkdir(parents=True, exist_ok=True)
        (pkg.root / "info" / "run_exports.json").write_text(json.dumps(exports, indent=2) + "\n")
    return pkg


# stdlib directories conda's python package has but a build never imports (kept out: size)
STDLIB_LEFT_OUT = frozenset({"test", "idlelib", "tkinter", "turtledemo", "__phello__"})


def real_stdlib(pkg: Package) -> Package:
    """The python stand-in with its stdlib entries as real files: conda links a package's files
    one by one and cannot link a symlink to a directory (the harness's installer can)."""
    files: list[str] = []
    for rel in pkg.files:
        path = pkg.root / rel
        if not (path.is_symlink() and path.is_dir()):
            files.append(rel)
            continue
        target = path.resolve()
        path.unlink()
        if path.name in STDLIB_LEFT_OUT:
            continue
        # with the CPython's __pycache__, as conda's python ships the stdlib compiled: a .pyc the
        # interpreter wrote into the host env would be a new file of the output that ran it
        shutil.copytree(target, path)
        files += [p.relative_to(pkg.root).as_posix() for p in path.rglob("*") if not p.is_dir()]
    pkg.files = sorted(files)
    return pkg


def python_build(variant_value: str) -> str:
    """The build string of the ``python`` package a config's value (``3.13.* *_cp313``) asks for."""
    _, _, glob = spec_parts(f"python {variant_value}")
    return "h0" + (glob or "_cpython").lstrip("*")


def compiled(pkg: Package, cpython: CPython) -> Package:
    """``pkg`` with the ``.pyc`` of its modules for ``cpython``, as conda-forge's python packages
    ship them: a ``.pyc`` the interpreter writes into a host env is a new file of the output whose
    script ran it (conda-build packaged ~100 of scikit-build-core's into a pytorch)."""
    subprocess.run(
        [str(cpython.executable), "-m", "compileall", "-q", "-j", "0", str(pkg.root / "lib")],
        check=True,
        capture_output=True,
    )
    pkg.files = sorted(snapshot(pkg.root))
    return pkg


def wheel_package(name: str, cpython: CPython, work: Path, cache: Path | None) -> Package:
    """One PyPI wheel unpacked into ``lib/pythonX.Y/site-packages``, built for that Python."""
    root = work / f"{name}-{cpython.tag}"
    if root.exists():
        shutil.rmtree(root)
    sp = root / "lib" / cpython.dirname / "site-packages"
    pip_install_target(cpython.short, sp, [WHEELS[name]], cache, cpython.freethreaded)
    dist = next(p for p in sp.glob("*.dist-info"))
    version = dist.name[: -len(".dist-info")].rsplit("-", 1)[1]
    tag = abi_tag(cpython)
    depends = [
        f"python >={cpython.short},<{next_minor(cpython.short)}.0a0",
        f"python_abi {cpython.short}.* *_{tag}",
        *WHEEL_DEPENDS.get(name, ()),
    ]
    pkg = Package(_record(name, version, f"py{tag[2:]}_h0_0", depends), root, [])
    _entry_points(pkg, sp / "bin")
    return compiled(pkg, cpython)


def _entry_points(pkg: Package, scripts: Path) -> None:
    """A wheel's scripts in ``bin/`` running the env's python, as conda installs them (``pip
    --target`` leaves them in ``site-packages/bin`` with this interpreter's path and version: the
    recipe's ``pip check`` ran another environment's pip)."""
    if not scripts.is_dir():
        return
    installer = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (pkg.root / "bin").mkdir(exist_ok=True)
    for script in sorted(scripts.iterdir()):
        if not script.name.endswith(installer):
            _, _, body = script.read_text().partition("\n")
            dest = pkg.root / "bin" / script.name
            dest.write_text(f"#!{PREFIX_PLACEHOLDER}/bin/python\n{body}")
            dest.chmod(0o755)
            pkg.placeholders[f"bin/{script.name}"] = PREFIX_PLACEHOLDER
    shutil.rmtree(scripts)


def empty_python_package(name: str, cpython: CPython, work: Path) -> Package:
    """An empty build of ``name`` for a Python PyPI has no wheel of it for (PyYAML for 3.13t): the
    harness lists it as ignored in that host env, as nothing the build runs imports it."""
    tag = abi_tag(cpython)
    depends = [
        f"python >={cpython.short},<{next_minor(cpython.short)}.0a0",
        f"python_abi {cpython.short}.* *_{tag}",
    ]
    return empty_package(_record(name, "6.0.3", f"py{tag[2:]}_h0_0", depends), work)


def tool_package(name: str, work: Path, cache: Path | None) -> Package:
    """``cmake`` / ``ninja`` from their PyPI wheels: the wheel's ``<name>/data/{bin,share}`` tree."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-wheel-") as tmp:
        short = f"{sys.version_info[0]}.{sys.version_info[1]}"
        pip_install_target(short, Path(tmp), [name], cache)
        dist = next(Path(tmp).glob(f"{name}-*.dist-info"))
        version = dist.name[: -len(".dist-info")].rsplit("-", 1)[1]
        root = work / name
        if root.exists():
            shutil.rmtree(root)
        data = Path(tmp) / name / "data"  # cmake's wheel; ninja's has the binary as a wheel script
        if data.is_dir():
            shutil.copytree(data, root, symlinks=True)
        else:
            (root / "bin").mkdir(parents=True)
            shutil.copy2(Path(tmp) / "bin" / name, root / "bin" / name)
    return Package(_record(name, version, "h0_0"), root, sorted(snapshot(root)))


def _activation_script(names: Iterable[str], tools: Mapping[str, str]) -> str:
    """An activation script exporting ``names`` of
    :func:`feedstock.conda_build_standin.compiler_activation.activation_env` and
    the tool variables ``tools`` (VAR -> wrapper suffix), with the prefixes as shell variables."""
    env = compiler_activation.activation_env(
        SUBDIR,
        prefix=Path("${PREFIX:-$CONDA_PREFIX}"),
        build_prefix=Path("${CONDA_PREFIX}"),
        src_dir=Path("${SRC_DIR}"),
        pkg_name="${PKG_NAME}",
        pkg_version="${PKG_VERSION}",
        cuda=False,
    )
    lines = ["# stand-in of conda-forge's ctng-compiler-activation (harness/stand_ins.py)"]
    lines += [f'export {var}="${{CONDA_PREFIX}}/bin/{TRIPLET}-{tool}"' for var, tool in tools.items()]
    lines += [f'export {name}="{env[name]}"' for name in names]
    if (
        "CMAKE_ARGS" in names
    ):  # conda-forge/cmake-feedstock#196 (feedstock.conda_build_standin.compiler_activation.cmake_args)
        lines.append(
            'if [ -f "${PREFIX:-$CONDA_PREFIX}/bin/python" ]; then '
            'export CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_POLICY_DEFAULT_CMP0094=NEW"; fi'
        )
    return "\n".join(lines) + "\n"


def compiler_package(name: str, tools: Mapping[str, str], script: str, work: Path) -> Package:
    """``gcc_linux-64`` / ``gxx_linux-64``: wrappers of this machine's tools and an activation script."""
    root = work / name
    if root.exists():
        shutil.rmtree(root)
    (root / "bin").mkdir(parents=True)
    for suffix, tool in tools.items():
        found = shutil.which(tool)
        if found is None:
            continue
        wrapper = root / "bin" / f"{TRIPLET}-{suffix}"
        wrapper.write_text(f'#!/bin/sh\nexec {found} "$@"\n')
        wrapper.chmod(0o755)
    activate = root / "etc" / "conda" / "activate.d" / f"activate-{name}.sh"
    activate.parent.mkdir(parents=True)
    activate.write_text(script)
    return Package(_record(name, COMPILER_VERSION, "h0_0"), root, sorted(snapshot(root)))


def _compilers(work: Path) -> list[Package]:
    env = compiler_activation.activation_env(
        SUBDIR,
        prefix=Path("/p"),
        build_prefix=Path("/b"),
        src_dir=Path("/s"),
        pkg_name="n",
        pkg_version="0",
        cuda=False,
    )
    gcc_names = [n for n in env if n != "CXXFLAGS"]
    gcc = compiler_package("gcc_linux-64", GCC_TOOLS, _activation_script(gcc_names, GCC_VARS), work)
    gxx = compiler_package("gxx_linux-64", GXX_TOOLS, _activation_script(["CXXFLAGS"], GXX_VARS), work)
    gxx.record["depends"] = [f"gcc_linux-64 {COMPILER_VERSION} h0_0"]
    return [gcc, gxx]


# the machine's runtime libraries, as the conda-forge packages that ship them lay them out (links
# to this machine's copies: the miniature is compiled by its gcc against its glibc)
RUNTIME_LIBS = {
    "libstdcxx": ("lib", ("libstdc++.so.6",)),
    "libgcc": ("lib", ("libgcc_s.so.1",)),
    "libgomp": ("lib", ("libgomp.so.1",)),
    "sysroot_linux-64": (
        f"{TRIPLET}/sysroot/lib64",
        (
            "libc.so.6",
            "libm.so.6",
            "libpthread.so.0",
            "libdl.so.2",
            "librt.so.1",
            "libutil.so.1",
            "ld-linux-x86-64.so.2",
        ),
    ),
}


def runtime_package(rec: Mapping[str, Any], work: Path) -> Package:
    """``libstdcxx``, ``libgcc``, ``libgomp``, ``sysroot_linux-64``: links to this machine's
    libraries (conda-build's overlinking check finds a DSO in a package or in a ``sysroot``)."""
    pkg = empty_package({**rec, "subdir": SUBDIR, "noarch": None}, work)
    pkg.record.pop("noarch", None)
    where, names = RUNTIME_LIBS[pkg.name]
    for name in names:
        found = Path(
            os.path.realpath(
                subprocess.run(
                    ["gcc", f"-print-file-name={name}"], capture_output=True, text=True, check=True
                ).stdout.strip()
            )
        )
        if found.is_absolute() and found.exists():
            (pkg.root / where).mkdir(parents=True, exist_ok=True)
            (pkg.root / where / name).symlink_to(found)
            pkg.files.append(f"{where}/{name}")
    return pkg


def _first_specs(specs: Iterable[str]) -> dict[str, str]:
    """name -> the first spec naming it with a version (else the first at all)."""
    first: dict[str, str] = {}
    for spec in specs:
        name = spec_name(spec)
        if name not in first or (" " not in first[name] and " " in spec):
            first[name] = spec
    return first


def make_channel(
    channel_dir: Path,
    work: Path,
    pythons: Sequence[tuple[CPython, str]],
    specs: Iterable[str],
    *,
    cache: Path | None = None,
    toolchain: cuda_toolchain.Toolchain | None = None,
) -> dict[str, Package]:
    """Make and index the stand-in channel for ``specs`` (every requirement the rendered recipe
    names); ``pythons``: (CPython, the config's ``python`` value) pairs. Returns dist -> package."""
    specs = list(specs)
    first = _first_specs(specs)
    work.mkdir(parents=True, exist_ok=True)
    made: list[Package] = []
    for cpython, value in pythons:
        py = real_stdlib(python_package(cpython, work))
        py.record["build"] = python_build(value)
        made.append(_with_exports(py, f"python {value}"))
        made.append(_with_exports(compiled(numpy_package(cpython, work, cache), cpython), first.get("numpy")))
        for name in WHEELS:
            if cpython.freethreaded and name in NO_FREETHREADED_WHEEL:
                made.append(empty_python_package(name, cpython, work))
            else:
                made.append(wheel_package(name, cpython, work, cache))
    made += [tool_package("cmake", work, cache), tool_package("ninja", work, cache)]
    for pkg in _compilers(work):
        made.append(_with_exports(pkg, first.get(pkg.name)))
    blas = build_stand_in_project(BLAS_FIXTURE, work, "libblas", _tool_env(work))
    made += [_with_exports(pkg, first.get(pkg.name)) for pkg in blas_netlib_packages(blas, work)]
    if toolchain is not None:
        made += _magma(work, first)
        made += cuda_packages(toolchain, work)
    holder = _record("spec-holder", "0", "0", list(dict.fromkeys(specs)))
    made_names = {p.name for p in made} - set(BLAS_NAMES)  # their runtime builds come here too
    made += requirement_stand_ins(
        [holder], work, freethreaded=[c.short for c, _ in pythons if c.freethreaded],
        made=made_names, blas=lambda: blas, pythons=pythons, cache=cache,
    )  # fmt: skip
    for pkg in made:
        build_conda(pkg, channel_dir, about={"summary": f"{pkg.name}: stand-in (harness/stand_ins.py)"})
    index(channel_dir)
    return {p.dist: p for p in made}


def pybind11_package(record: Mapping[str, Any], work: Path, cache: Path | None) -> Package:
    """``pybind11`` with the real headers of PyPI's pybind11 wheel in ``include/pybind11``, where
    conda-forge's pybind11 puts them (its ``pybind11-global``): a C++ extension of the installed
    torch (``<torch/extension.h>``) finds them through ``$PREFIX/include``."""
    rec = {k: v for k, v in record.items() if k != "noarch"}
    rec["subdir"] = SUBDIR
    root = work / "stand-ins" / f"{rec['name']}-{rec['version']}-{rec['build']}"
    if root.exists():
        shutil.rmtree(root)
    with tempfile.TemporaryDirectory(prefix="pybind11-wheel-") as tmp:
        short = f"{sys.version_info[0]}.{sys.version_info[1]}"
        pip_install_target(short, Path(tmp), ["pybind11"], cache)
        shutil.copytree(Path(tmp) / "pybind11" / "include" / "pybind11", root / "include" / "pybind11")
    return Package(rec, root, sorted(snapshot(root)))


def requirement_stand_ins(
    records: Sequence[Mapping[str, Any]],
    work: Path,
    *,
    freethreaded: Sequence[str],
    made: Collection[str],
    blas: Callable[[], Path],
    pythons: Sequence[tuple[CPython, str]] = (),
    cache: Path | None = None,
) -> list[Package]:
    """A package for every external name ``records`` depend on (``feedstock.channel.stand_in_records``)
    but those in ``made`` (and ``python``): the runtime BLAS behind the ``*_openblas`` builds (the
    fixture's, ``blas()`` its install dir, built when first needed), this machine's runtime
    libraries for :data:`RUNTIME_LIBS`, pybind11's real headers (:func:`pybind11_package`; ``cache``:
    pip's), an empty package for any other; each with the run_exports of the render's model.
    ``pythons``: the channel's (CPython, config value) pairs, whose build strings ``python_abi``
    constrains ``python`` to."""
    first = _first_specs(str(dep) for rec in records for dep in rec.get("depends", []))
    out: list[Package] = []
    for rec in stand_in_records(records, SUBDIR, freethreaded):
        name = rec["name"]
        if name == "python" or name in made:
            continue
        if name == "python_abi":  # the python build of this channel (*_cp313 for 3.13, not *_cpython)
            builds = {
                c.short: python_build(v) for c, v in pythons if c.freethreaded == rec["build"].endswith("t")
            }
            if rec["version"] in builds:
                rec["constrains"] = [f"python {rec['version']}.* *{builds[rec['version']][2:]}"]
            out.append(_with_exports(empty_package(rec, work), first.get(name)))
            continue
        found = runtime_package(rec, work) if name in RUNTIME_LIBS else None
        if name == "pybind11":
            found = pybind11_package(rec, work, cache)
        if found is None and name in (*BLAS_NAMES, "libopenblas"):
            found = blas_runtime_package(rec, blas(), work / "blas-runtime")
        out.append(_with_exports(found or empty_package(rec, work), first.get(name)))
    return out


def _magma(work: Path, first: Mapping[str, str]) -> list[Package]:
    """libmagma and libmagma-devel of the fixture at the version the config pins (``libmagma_devel``)."""
    lib, dev = magma_packages(MAGMA_FIXTURE, work, _tool_env(work))
    _, version, _ = spec_parts(first.get("libmagma-devel", "libmagma-devel"))
    version = (version or "").removesuffix(".*")  # `libmagma-devel 2.10.0.*`
    if version and not any(c in version for c in "<>*,"):
        lib.record["version"] = dev.record["version"] = version
        dev.record["depends"] = [f"libmagma {version} {lib.record['build']}"]
    return [_with_exports(lib, first.get("libmagma")), _with_exports(dev, first.get("libmagma-devel"))]


def _tool_env(work: Path) -> dict[str, str]:
    import os

    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work)}


def cuda_packages(toolchain: cuda_toolchain.Toolchain, work: Path) -> list[Package]:
    """``cuda-nvcc_linux-64`` (the build env's toolchain, with nvcc's activation) and
    ``cuda-cudart-dev`` (headers, runtime) laid out by :mod:`feedstock.conda_build_standin.cuda_toolchain`."""
    version = cuda_toolchain.CUDA_VERSION
    nvcc_root, host_root = work / "cuda-nvcc_linux-64", work / "cuda-cudart-dev"
    for root in (nvcc_root, host_root):
        if root.exists():
            shutil.rmtree(root)
    cuda_toolchain.install_build_env(toolchain, nvcc_root)
    env = compiler_activation.nvcc_env(SUBDIR, prefix=Path("${PREFIX:-$CONDA_PREFIX}"), cxx="${CXX}")
    lines = [f'export {k}="{v}"' for k, v in env.items()]
    lines.append(
        'export CMAKE_ARGS="${CMAKE_ARGS} -DCMAKE_FIND_ROOT_PATH=${PREFIX:-$CONDA_PREFIX};'
        f"${{CONDA_PREFIX}}/{TRIPLET}/sysroot;${{PREFIX:-$CONDA_PREFIX}}/{cuda_toolchain.TARGET_DIR};"
        f'${{CONDA_PREFIX}}/{cuda_toolchain.TARGET_DIR}"'
    )
    script = nvcc_root / "etc" / "conda" / "activate.d" / "~cuda-nvcc_activate.sh"
    script.parent.mkdir(parents=True)
    script.write_text("\n".join(lines) + "\n")
    cuda_toolchain.install_host_env(toolchain, host_root)
    nvcc = Package(_record("cuda-nvcc_linux-64", version, "h0_0"), nvcc_root, sorted(snapshot(nvcc_root)))
    dev = Package(_record("cuda-cudart-dev", version, "h0_0"), host_root, sorted(snapshot(host_root)))
    _with_exports(nvcc, f"cuda-nvcc_linux-64 {version}.*")
    _with_exports(dev, "cuda-cudart-dev")
    return [nvcc, dev]


__all__ = ["cuda_packages", "make_channel", "pybind11_package", "python_build", "requirement_stand_ins"]
