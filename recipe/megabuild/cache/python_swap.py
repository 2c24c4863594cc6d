"""Rewrite the Python version recorded in a CMake cache (``cache swap-python``).

Megabuild configures PyTorch once and, for every further Python, edits the
cache instead of re-configuring. In conda-build each Python gets a host env
at the *same* prefix, so the interpreter path (``$PREFIX/bin/python``) does
not change; only version-bearing values do. FindPython trusts
``_Python_INTERPRETER_PROPERTIES`` while ``Python_EXECUTABLE`` is unchanged,
so that entry must be exactly what the new interpreter would report (the
sed of conda-forge's pytorch-cpu feedstock left the old patch level there).
The development and NumPy entries are guarded by MD5 signatures: when we
change their paths the signatures no longer match and CMake re-searches and
rewrites them (``*_SIGNATURE`` entries are therefore never edited here).

Which values are touched
------------------------
* Only entries whose key is Python-related (contains ``python``, ``numpy`` or
  ``pybind``, case-insensitive) plus ``CMAKE_PREFIX_PATH`` (scikit-build-core's
  ``CMakeInit.txt`` FORCE-sets it to the host's site-packages). ``CMAKE_COMMAND``/``CMAKE_ROOT`` live under
  ``lib/python3.X/site-packages/cmake`` with pip's cmake and stay untouched.
* Values are split into atoms at ``;``, ``[`` and ``]``. A path atom is edited
  only if it lies under the host prefix (the prefix of the cache's
  interpreter, ``<prefix>/bin/python``), and only after that prefix; paths
  elsewhere (BUILD_PREFIX's Python, CUDA, /usr) are never edited, and an
  entry whose paths all lie elsewhere is left alone entirely.
* Forms rewritten: ``python3.11``/``libpython3.11`` path components,
  ``cpython-311`` (SOABI, extension suffix) and ``python311``,
  ``config-3.11``; a non-path atom that is the version (``3.11``, ``3.11.7``,
  ``v3.11.7(...)`` in ``FIND_PACKAGE_MESSAGE_DETAILS_*``); the
  ``Python;3;11;7;...`` list in ``_Python*_INTERPRETER_PROPERTIES``
  (fields 1-3). A bare ``3.11`` inside a path is never touched, so
  ``cuda-13.11`` or a ``3.11.1`` directory survive.

Windows caches
--------------
A cache whose interpreter path starts with a drive letter (``D:/bld/...`` or
``D:\\bld\\...``) is Windows-shaped, whatever OS runs the swap. The host prefix is
then the interpreter's directory (``%PREFIX%\\python.exe``; ``Scripts`` is
skipped like ``bin``) and is matched with either separator and in any case.
Besides ``python312.lib``/``python312.dll``/``Python312`` (the rule above),
``cp312`` (``cp312-win_amd64`` in the properties, ``.pyd`` suffixes and
``SKBUILD_SOABI``) is rewritten; ``Lib/site-packages`` carries no version and
stays. Leftover detection also looks for ``cp312``/``python312`` inside words.
In interpreter mode, SOABI comes from ``EXT_SUFFIX`` when sysconfig has none
(Windows before 3.13, as FindPython does) and the NumPy include dir is written
with the separators of the value it replaces.

Interpreter mode
----------------
When the interpreter the cache names exists (conda-build's host env at swap
time), it is run with a tiny stdlib script and its full version, SOABI,
sysconfig paths and ``numpy.get_include()`` become the source of truth; a
disagreement with ``--to`` is an error. Otherwise (string mode) a full
``--to X.Y.Z`` is needed wherever the cache records a patch level.

It is run as CMake runs it, not isolated (``-I``): under conda-forge's
cross-python (linux-aarch64 built on linux-64) ``$PREFIX/bin/python`` is
crossenv, which needs the environment it sets up itself; only our own
``PYTHON*`` variables are kept away from it (see ``query_environment``). The
NumPy include dir is taken from the interpreter even outside the host prefix,
because crossenv's numpy is the build env's (see ``_numpy_moves``). A configure
that CMake itself knows to be a cross build (conda's ``CMAKE_SYSTEM_NAME``, e.g.
osx-64 on osx-arm64) records no SOABI in the interpreter properties; that empty
field is kept (see ``_recorded_soabi``).

The swap fails, leaving the file untouched, if the cache was configured with
another Python than ``--from``, if no reference to it is found, or if a
reference to the old version remains in a Python-related entry afterwards.
"""

from __future__ import annotations

import json
import ntpath
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath

from megabuild.cache import freethreading
from megabuild.cache.freethreading import FlagChange
from megabuild.cache.model import CacheFile
from megabuild.errors import MegabuildError

PYTHON_KEY = re.compile(r"python|numpy|pybind", re.IGNORECASE)
EXTRA_PYTHON_KEYS = frozenset({"CMAKE_PREFIX_PATH"})
# Rewritten in Windows-shaped caches only, where it is the cp3XX-win_amd64 tag; elsewhere it is
# left as before (scikit-build-core FORCE-sets it on every configure in any case).
WINDOWS_EXTRA_KEYS = frozenset({"SKBUILD_SOABI"})
PROPERTIES_KEY = re.compile(r"_(?:Python[23]?)_INTERPRETER_PROPERTIES")
EXECUTABLE_KEYS = (
    "Python_EXECUTABLE",
    "_Python_EXECUTABLE",
    "Python3_EXECUTABLE",
    "_Python3_EXECUTABLE",
    "PYTHON_EXECUTABLE",
)
INCLUDE_KEYS = ("_Python_INCLUDE_DIR", "_Python3_INCLUDE_DIR")
NUMPY_KEYS = ("_Python_NumPy_INCLUDE_DIR", "_Python3_NumPy_INCLUDE_DIR")
_SPLIT = re.compile(r"([;\[\]])")
# A Windows path as CMake or the environment writes it: drive letter, then / or \.
_WINDOWS_PATH = re.compile(r"[A-Za-z]:[/\\]")
# FIND_PACKAGE_MESSAGE_DETAILS_*: ``v3.12.1(3.10)``, the found version then the requested one.
_REQUESTED = re.compile(r"^(v?\d+\.\d+(?:\.\d+)?)\(.*\)$")
_VERSION_ARG = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?(t?)")

_QUERY = r"""
import sys
# What -I's safe path did: the working directory ($SRC_DIR) must not shadow a module.
if sys.path and sys.path[0] == "":
    del sys.path[0]
import json, sysconfig
import importlib.machinery
info = {"version": list(sys.version_info[:3]), "soabi": sysconfig.get_config_var("SOABI") or "",
        "freethreaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "sosabi": next((s for s in importlib.machinery.EXTENSION_SUFFIXES if s.startswith(".abi")), ""),
        "ext_suffix": sysconfig.get_config_var("EXT_SUFFIX") or "",
        "prefix": sys.prefix, "numpy_include": None, "numpy_error": None,
        "paths": {k: sysconfig.get_path(k)
                  for k in ("stdlib", "platstdlib", "purelib", "platlib", "include")}}
try:
    import numpy
    info["numpy_include"] = numpy.get_include()
except Exception as exc:
    # numpy's ImportError spans a page; its last line names the cause.
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [""]
    info["numpy_error"] = "%s: %s" % (type(exc).__name__, lines[-1])
sys.stdout.write(json.dumps(info))
"""


@dataclass(frozen=True)
class PyVersion:
    major: int
    minor: int
    patch: int | None = None
    freethreaded: bool = False  # the ``t`` build (PEP 703), see megabuild.cache.freethreading

    @classmethod
    def parse(cls, text: str, what: str = "version") -> PyVersion:
        match = _VERSION_ARG.fullmatch(text.strip())
        if not match:
            raise MegabuildError(f"{what} {text!r} is not a Python version like 3.12, 3.12.1 or 3.14t")
        patch = match.group(3)
        return cls(
            int(match.group(1)),
            int(match.group(2)),
            None if patch is None else int(patch),
            bool(match.group(4)),
        )

    @property
    def short(self) -> str:
        return f"{self.major}.{self.minor}"

    @property
    def nodot(self) -> str:
        return f"{self.major}{self.minor}"

    @property
    def number(self) -> str:
        """The version as Python reports it (``3.14.1``; no ABI flag)."""
        return self.short if self.patch is None else f"{self.short}.{self.patch}"

    @property
    def build(self) -> tuple[int, int, bool]:
        """What makes two interpreters ABI-incompatible: the minor version and the flag."""
        return (self.major, self.minor, self.freethreaded)

    def __str__(self) -> str:
        return self.number + freethreading.flag(self.freethreaded)


@dataclass
class Interpreter:
    executable: str
    version: PyVersion
    soabi: str
    paths: dict[str, str]
    numpy_include: str | None
    numpy_error: str | None
    sosabi: str = ""  # the stable-ABI tag CMake records (``abi3``, from the ``.abi3`` suffix)


@dataclass
class SwapResult:
    old: PyVersion
    new: PyVersion
    mode: str  # "interpreter" or "string"
    prefix: str
    changes: list[tuple[str, str, str]] = field(default_factory=list)

    def report_lines(self) -> list[str]:
        return [f"swap-python: {key}: {old} -> {new}" for key, old, new in self.changes]


def is_python_key(key: str) -> bool:
    if key.endswith("-ADVANCED") or key.endswith("_SIGNATURE"):
        return False
    return key in EXTRA_PYTHON_KEYS or bool(PYTHON_KEY.search(key))


def _is_path(atom: str) -> bool:
    return "/" in atom or "\\" in atom


def is_windows_path(text: str) -> bool:
    """``D:/bld/...`` or ``D:\\bld\\...``: a path of a Windows cache, whatever the host OS is."""
    return bool(_WINDOWS_PATH.match(text))


def _windows_key(path: str) -> str:
    """How Windows compares paths: either separator, any case (same length as ``path``)."""
    return "".join("/" if c == "\\" else c.lower() if len(c.lower()) == 1 else c for c in path)


def _split_prefix(atom: str, prefix: str) -> tuple[str, str] | None:
    """(prefix part, rest) when ``atom`` lies under ``prefix``, else None.

    A Windows-shaped prefix (``D:/...`` or ``D:\\...``) matches either separator in
    any case; the prefix part returned is then the atom's own spelling.
    """
    if is_windows_path(prefix):
        head = atom[: len(prefix)]
        if _windows_key(head) != _windows_key(prefix):
            return None
        if len(atom) == len(prefix) or atom[len(prefix)] in "/\\":
            return head, atom[len(prefix) :]
        return None
    if atom == prefix:
        return atom, ""
    for sep in ("/", "\\"):
        if atom.startswith(prefix + sep):
            return prefix, atom[len(prefix) :]
    return None


def host_prefix(cache: CacheFile) -> tuple[str, str]:
    """(interpreter path, its prefix) from the cache's Python executable entries."""
    for key in EXECUTABLE_KEYS:
        entry = cache.get(key)
        if entry is not None and is_windows_path(entry.value):
            return entry.value, _windows_prefix(entry.value)
        if entry is None or not entry.value or not os.path.isabs(entry.value):
            continue
        exe = PurePath(entry.value)
        parent = exe.parent
        prefix = parent.parent if parent.name.lower() in ("bin", "scripts") else parent
        return entry.value, str(prefix)
    raise MegabuildError("cache names no Python interpreter (Python_EXECUTABLE); pass --prefix")


def _windows_prefix(executable: str) -> str:
    """``%PREFIX%`` of ``%PREFIX%\\python.exe`` (or ``...\\Scripts\\python.exe``), spelled as given."""
    parent = executable[: max(executable.rfind("/"), executable.rfind("\\"))]
    name = parent[max(parent.rfind("/"), parent.rfind("\\")) + 1 :]
    if name.lower() in ("bin", "scripts"):
        parent = parent[: len(parent) - len(name) - 1]
    return parent


class _Rewriter:
    def __init__(
        self,
        old: PyVersion,
        new: PyVersion,
        prefix: str,
        moved: Mapping[str, str] | None = None,
        sosabi: str | None = None,
    ) -> None:
        self.old = old
        self.new = new
        self.prefix = prefix
        self.windows = is_windows_path(prefix)
        self.flags = FlagChange(old.freethreaded, new.freethreaded)
        self.sosabi = sosabi  # the new interpreter's, when it was asked
        # Whole path atoms replaced as they are, wherever they lie (see _numpy_moves).
        self.moved = {self._moved_key(k): v for k, v in (moved or {}).items()}
        o_dot = re.escape(old.short)
        # python3.14t, cpython-314t, cp314t: the names carry the ABI flag (freethreading.py)
        of, nf = freethreading.flag(old.freethreaded), freethreading.flag(new.freethreaded)
        n_dot, n_nodot = new.short + nf, new.nodot + nf
        self.path_rules = [
            (re.compile(rf"(?<![A-Za-z0-9])((?:lib)?[Pp]ython){o_dot}{of}(?![0-9])"), rf"\g<1>{n_dot}"),
            (re.compile(rf"(?<![A-Za-z0-9])(config-){o_dot}{of}(?![0-9])"), rf"\g<1>{n_dot}"),
            (re.compile(rf"(?<![A-Za-z0-9])(c?python-?){old.nodot}{of}(?![0-9])", re.I), rf"\g<1>{n_nodot}"),
        ]
        self.version_atom = re.compile(rf"(v?){o_dot}(?:\.(\d+))?(?=$|\()")
        if self.windows:
            # cp312-win_amd64 (SOABI, wheel tag, .pyd suffix); python312.lib/.dll, Python312.
            self.path_rules.append(
                (re.compile(rf"(?<![A-Za-z0-9])(cp){old.nodot}{of}(?![0-9])"), rf"\g<1>{n_nodot}")
            )
        self.leftover = re.compile(self._leftover_pattern())

    def _leftover_pattern(self) -> str:
        """Deliberately broader than the rules above: finds names of the old build left behind."""
        old = self.old
        if (old.major, old.minor) == (self.new.major, self.new.minor):
            return self.flags.same_version_leftover(old.short, old.nodot)
        o_dot = re.escape(old.short)
        leftover = (
            rf"(?<![0-9]){o_dot}(?![0-9])|(?<![0-9A-Za-z]){old.nodot}t?(?![0-9A-Za-z])"
            rf"|(?<![0-9]){old.major};{old.minor}(?![0-9])"
        )
        if self.windows:
            leftover += rf"|(?i:(?:cp|python){old.nodot}(?![0-9]))"
        return leftover

    def wants(self, key: str) -> bool:
        """Whether entry ``key`` is one the swap edits (and checks for leftovers)."""
        return is_python_key(key) or (self.windows and key in WINDOWS_EXTRA_KEYS)

    def _moved_key(self, path: str) -> str:
        return _windows_key(path) if self.windows else path

    def _moved_to(self, atom: str) -> str | None:
        """The new NumPy include dir for ``atom``, written with the atom's separators."""
        new = self.moved.get(self._moved_key(atom))
        if new is None or not self.windows:
            return new
        if "/" in atom and "\\" not in atom:
            return new.replace("\\", "/")
        if "\\" in atom and "/" not in atom:
            return new.replace("/", "\\")
        return new

    def full_new(self, where: str) -> str:
        if self.new.patch is None:
            raise MegabuildError(
                f"{where} records a patch level and the interpreter is not available; "
                f"pass the full version, e.g. --to {self.new.short}.0{_flag(self.new)}"
            )
        return self.new.number

    def rewrite_text(self, text: str) -> str:
        for pattern, repl in self.path_rules:
            text = pattern.sub(repl, text)
        return text

    def rewrite_atom(self, atom: str, key: str) -> str:
        moved = self._moved_to(atom)
        if moved is not None:
            return moved
        if _is_path(atom):
            parts = _split_prefix(atom, self.prefix)
            if parts is None:
                return atom
            return parts[0] + self.rewrite_text(parts[1])
        match = self.version_atom.match(atom)
        if match:
            version = self.full_new(key) if match.group(2) is not None else self.new.short
            return match.group(1) + version + atom[match.end() :]
        return self.rewrite_text(atom)

    def is_foreign(self, value: str) -> bool:
        paths = [a for a in _SPLIT.split(value) if _is_path(a)]
        return bool(paths) and all(
            _split_prefix(a, self.prefix) is None and self._moved_key(a) not in self.moved for a in paths
        )

    def rewrite_value(self, key: str, value: str) -> str:
        if PROPERTIES_KEY.fullmatch(key):
            fields = value.split(";")
            if len(fields) >= 4 and fields[1] == str(self.old.major) and fields[2] == str(self.old.minor):
                fields[1], fields[2] = str(self.new.major), str(self.new.minor)
                if fields[3] != "":
                    fields[3] = self.full_new(key).split(".")[2]
            rest = [self.rewrite_atom(a, key) for a in fields[4:]]
            return ";".join(self.flags.properties(fields[:4] + rest, self.sosabi))
        return "".join(a if a in ";[]" else self.rewrite_atom(a, key) for a in _SPLIT.split(value))

    def leftovers(self, key: str, value: str) -> list[str]:
        found = []
        if PROPERTIES_KEY.fullmatch(key):
            fields = value.split(";")
            same_minor = (self.old.major, self.old.minor) == (self.new.major, self.new.minor)
            if not same_minor and fields[1:3] == [str(self.old.major), str(self.old.minor)]:
                found.append(";".join(fields[:4]))
            if self.flags.properties_leftover(fields):
                found.append(f"ABIFLAGS {fields[freethreading.ABIFLAGS_FIELD]!r}")
            value = ";".join(fields[4:])
        for atom in _SPLIT.split(value):
            if _is_path(atom):
                parts = _split_prefix(atom, self.prefix)
                if parts is None:
                    continue
                atom = parts[1]
            else:
                # v3.12.1(3.10): the parenthesised version is the one requested, not found.
                atom = _REQUESTED.sub(r"\1", atom)
            found.extend(m.group(0) for m in self.leftover.finditer(atom))
        return found


def recorded_version(cache: CacheFile, prefix: str) -> PyVersion | None:
    """The Python version the cache was configured with, from FindPython's own records."""
    for entry in cache.entries():
        if PROPERTIES_KEY.fullmatch(entry.key):
            fields = entry.value.split(";")
            if len(fields) >= 4 and fields[1].isdigit() and fields[2].isdigit():
                patch = int(fields[3]) if fields[3].isdigit() else None
                ft = freethreading.properties_are_freethreaded(fields)
                return PyVersion(int(fields[1]), int(fields[2]), patch, ft)
    for entry in cache.entries():
        if entry.key.startswith("FIND_PACKAGE_MESSAGE_DETAILS_Python"):
            probe = _Rewriter(PyVersion(0, 0), PyVersion(0, 0), prefix)
            if probe.is_foreign(entry.value):
                continue
            match = re.search(r"\[v(\d+)\.(\d+)(?:\.(\d+))?", entry.value)
            if match:
                micro = match.group(3)
                short = f"{match.group(1)}\\.{match.group(2)}"
                ft = bool(re.search(rf"python{short}{freethreading.FLAG}(?![0-9A-Za-z])", entry.value))
                return PyVersion(
                    int(match.group(1)), int(match.group(2)), None if micro is None else int(micro), ft
                )
    return None


def query_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment the cache's interpreter is queried in: ours without ``PYTHON*`` variables.

    Why not ``python -I`` (or ``-E``): under conda-forge's cross-python,
    ``$PREFIX/bin/python`` is a shim that execs crossenv's wrapper script, and
    that wrapper sets PYTHONHOME/PYTHONPATH (crossenv's ``site`` hook, the build
    env's lib-dynload and site-packages) before exec'ing the build machine's
    interpreter with *our* flags. ``-I`` therefore disables crossenv in the
    interpreter that answers: it then runs against the host env's stdlib,
    lib-dynload and site-packages, whose extension modules are built for the
    target, so ``import numpy`` fails. CMake's FindPython runs the interpreter
    with no such flag and gets crossenv's answers (the build env's numpy); the
    swap has to write what CMake would.

    What ``-I`` legitimately kept out is ours to drop instead: PYTHONPATH (the
    recipe's scripts set it to $RECIPE_DIR), PYTHONHOME, PYTHONSTARTUP and
    friends are removed from the environment we pass (the wrapper sets its own),
    ``-s`` keeps user site-packages out and the query script drops the working
    directory from ``sys.path``. Variables crossenv and conda's Python read
    without the ``PYTHON`` prefix (``_PYTHON_SYSCONFIGDATA_NAME``,
    ``_CONDA_PYTHON_SYSCONFIGDATA_NAME``, ...) pass through: ``-I`` never
    blocked them and CMake sees them too.
    """
    source = os.environ if environ is None else environ
    return {key: value for key, value in source.items() if not key.upper().startswith("PYTHON")}


def query_interpreter(executable: str) -> Interpreter:
    try:
        out = subprocess.run(
            # -B: importing must not leave __pycache__ files behind in $PREFIX (package contents).
            [executable, "-s", "-B", "-c", _QUERY],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
            env=query_environment(),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise MegabuildError(f"cannot run the cache's interpreter {executable}: {exc}") from None
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise MegabuildError(f"the cache's interpreter {executable} failed ({out.returncode}): {last}")
    try:
        info = json.loads(out.stdout)
        major, minor, patch = (int(v) for v in info["version"])
        return Interpreter(
            executable=executable,
            version=PyVersion(major, minor, patch, bool(info.get("freethreaded"))),
            soabi=str(info["soabi"]) or _soabi_from_suffix(str(info.get("ext_suffix") or "")),
            paths={k: str(v) for k, v in info["paths"].items()},
            numpy_include=info["numpy_include"],
            numpy_error=info["numpy_error"],
            sosabi=str(info.get("sosabi") or ""),
        )
    except (ValueError, KeyError, TypeError):
        raise MegabuildError(f"unexpected output from {executable}: {out.stdout[:80]!r}") from None


def _soabi_from_suffix(ext_suffix: str) -> str:
    """CMake's SOABI from EXT_SUFFIX when sysconfig has none (Windows before 3.13).

    FindPython strips the leading ``.`` and the ``.pyd``/``.so``:
    ``.cp312-win_amd64.pyd`` -> ``cp312-win_amd64``; a bare ``.pyd`` gives ``""``.
    """
    match = re.fullmatch(r"(?:[.-]|_d\.)(.+)\.(?:pyd|so|dylib|dll)", ext_suffix)
    return match.group(1) if match else ""


def _same_path(a: str, b: str) -> bool:
    if is_windows_path(a) or is_windows_path(b):
        return _windows_key(ntpath.normpath(a)) == _windows_key(ntpath.normpath(b))
    return os.path.normpath(a) == os.path.normpath(b)


def _interpreter_available(executable: str) -> bool:
    return os.path.isfile(executable) and os.access(executable, os.X_OK)


def swap_python(
    cache: CacheFile,
    from_version: str,
    to_version: str,
    prefix: str | None = None,
    use_interpreter: bool = True,
) -> SwapResult:
    """Edit ``cache`` in memory; raise MegabuildError (cache then unusable) on any failure."""
    executable, found_prefix = host_prefix(cache)
    prefix = prefix.rstrip("/\\") if prefix else found_prefix
    old = _recorded_from(cache, PyVersion.parse(from_version, "--from"), prefix)
    new = PyVersion.parse(to_version, "--to")
    interpreter: Interpreter | None = None
    if use_interpreter and _interpreter_available(executable):
        interpreter = query_interpreter(executable)
        new = _interpreter_version(interpreter, new)
    if old.build == new.build:
        raise MegabuildError(f"--from and --to are the same Python version ({old.short}{_flag(old)})")

    moved = _numpy_moves(cache, interpreter) if interpreter is not None else {}
    sosabi = _sosabi(interpreter.sosabi) if interpreter is not None else None
    rewriter = _Rewriter(old, new, prefix, moved, sosabi)
    result = SwapResult(old, new, "interpreter" if interpreter else "string", prefix)
    for entry in list(cache.entries()):
        if not rewriter.wants(entry.key) or rewriter.is_foreign(entry.value):
            continue
        value = rewriter.rewrite_value(entry.key, entry.value)
        if interpreter is not None:
            value = _apply_interpreter(entry.key, value, interpreter, prefix)
        if value != entry.value:
            cache.set_value(entry.key, value)
            result.changes.append((entry.key, entry.value, value))

    if not result.changes:
        raise MegabuildError(f"no reference to Python {old.short}{_flag(old)} found in the cache")
    problems = _leftover_references(cache, rewriter)
    if problems:
        raise MegabuildError(
            f"references to Python {old.short}{_flag(old)} remain after the swap in: {'; '.join(problems)}"
        )
    return result


def _flag(version: PyVersion) -> str:
    return freethreading.flag(version.freethreaded)


def _recorded_from(cache: CacheFile, given: PyVersion, prefix: str) -> PyVersion:
    """The cache's Python (patch level and ABI flag from FindPython's records), checked against --from.

    ``--from 3.14`` accepts a cache of 3.14 or 3.14t (the flag is read, like the patch level);
    ``--from 3.14t`` insists on the free-threaded build.
    """
    if given.patch is not None:
        raise MegabuildError("--from takes MAJOR.MINOR (e.g. 3.12); the patch level is read from the cache")
    recorded = recorded_version(cache, prefix)
    if recorded is None:
        raise MegabuildError("the cache records no Python version (was FindPython run?)")
    if (recorded.major, recorded.minor) != (given.major, given.minor) or (
        given.freethreaded and not recorded.freethreaded
    ):
        raise MegabuildError(f"the cache was configured with Python {recorded}, not {given} (--from)")
    return recorded


def _interpreter_version(interpreter: Interpreter, wanted: PyVersion) -> PyVersion:
    """The interpreter's version, which must agree with ``--to``.

    ``--to 3.14`` accepts a free-threaded 3.14t interpreter: conda-build's ``PY_VER`` is ``3.14``
    for both builds, and the host env's interpreter is what the output builds for. ``--to 3.14t``
    insists on a free-threaded one.
    """
    got = interpreter.version
    if (
        (got.major, got.minor) != (wanted.major, wanted.minor)
        or (wanted.patch is not None and got.patch != wanted.patch)
        or (wanted.freethreaded and not got.freethreaded)
    ):
        raise MegabuildError(
            f"--to {wanted} disagrees with the cache's interpreter {interpreter.executable}, "
            f"which is Python {got}"
        )
    return got


def _sosabi(extension_suffix: str) -> str:
    """FindPython's SOSABI from the interpreter's ``.abi3.so`` suffix (``abi3``; none if it lists none)."""
    return extension_suffix.strip(".").split(".")[0] if extension_suffix else ""


def _leftover_references(cache: CacheFile, rewriter: _Rewriter) -> list[str]:
    """``KEY (tokens)`` for each Python entry that still names the old version."""
    problems = []
    for entry in cache.entries():
        if rewriter.wants(entry.key) and not rewriter.is_foreign(entry.value):
            left = rewriter.leftovers(entry.key, entry.value)
            if left:
                problems.append(f"{entry.key} ({', '.join(sorted(set(left)))})")
    return problems


def _numpy_moves(cache: CacheFile, interp: Interpreter) -> dict[str, str]:
    """The cache's NumPy include dir -> ``numpy.get_include()`` of the new interpreter.

    Mapped as a whole path, wherever it lies: natively numpy sits in the host
    env, but under conda-forge's cross-python FindPython gets crossenv's answer,
    the build env's numpy ($BUILD_PREFIX/venv/lib/python3.X/site-packages/...),
    outside the host prefix that the version rewriting is confined to. The same
    path inside ``FIND_PACKAGE_MESSAGE_DETAILS_Python`` follows. Taking the
    interpreter's answer also covers numpy 1.x (``numpy/core/include``) versus
    numpy 2 (``numpy/_core/include``).
    """
    moved: dict[str, str] = {}
    for key in NUMPY_KEYS:
        entry = cache.get(key)
        if entry is None or not entry.value or entry.value.endswith("-NOTFOUND"):
            continue
        if interp.numpy_include is None:
            raise MegabuildError(
                f"{key} is set but numpy is not importable by {interp.executable}: {interp.numpy_error}"
            )
        moved[entry.value] = interp.numpy_include
    return moved


def _recorded_soabi(recorded: str, interp: Interpreter) -> str:
    """The SOABI field of ``_Python*_INTERPRETER_PROPERTIES`` for the new interpreter.

    FindPython records it empty when it does not ask the interpreter: a cross configure
    (``CMAKE_CROSSCOMPILING``, e.g. osx-64 on osx-arm64 with conda's ``CMAKE_SYSTEM_NAME``)
    without an emulator. A fresh configure for the next Python leaves it empty too, so an
    empty field stays empty; otherwise it is what the new interpreter reports.
    """
    return recorded and interp.soabi


def _apply_interpreter(key: str, value: str, interp: Interpreter, prefix: str) -> str:
    """Make interpreter-derived entries exactly what the new interpreter reports."""
    if PROPERTIES_KEY.fullmatch(key):
        fields = value.split(";")
        if len(fields) >= 7:
            v = interp.version
            fields[1:4] = [str(v.major), str(v.minor), str(v.patch)]
            fields[6] = _recorded_soabi(fields[6], interp)
            # Trailing four fields are stdlib, platstdlib, purelib, platlib (CMake >= 3.18).
            wanted = [interp.paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
            if len(fields) >= 11 and all(_split_prefix(f, prefix) for f in fields[-4:]):
                for got, want in zip(fields[-4:], wanted):
                    if not _same_path(got, want):
                        raise MegabuildError(
                            f"{key}: rewritten path {got} does not match the interpreter's {want}"
                        )
        return ";".join(fields)
    if key in INCLUDE_KEYS and value and not value.endswith("-NOTFOUND"):
        include = interp.paths["include"]
        differs = not _same_path(include, value) if is_windows_path(value) else include != value
        if differs and Path(include, "Python.h").is_file():
            return include
    return value
