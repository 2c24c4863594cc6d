"""The compiler launcher CMake knows: one fixed path in every build step.

POSIX: a ``/bin/sh`` script (no interpreter to choose: in a cross build the host env's Python
may not run here). Windows: this Python (``%PREFIX%\\python.exe``, the same path in every step)
and a small script, since Ninja starts commands with ``CreateProcess`` and a batch file would
mangle compiler flags. Every step writes the same bytes (atomically), so a step that finds
the top level's launcher changes nothing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from megabuild.compiler_cache import ACTIVE

LANGUAGES = ("C", "CXX", "CUDA")
# sccache 0.16's exit status when it fails itself ("sccache: encountered fatal error", e.g. its
# local dir broke after the server started); a compile error exits with the compiler's status.
# A compiler that exits with this status itself only runs twice.
SCCACHE_FAILED = 254

_SH = f"""#!/bin/sh
# CMake's compiler launcher in every build step of this work dir (megabuild.compiler_cache):
# sccache where the step's cache server is up, the compiler itself everywhere else, and again
# where sccache itself failed ({SCCACHE_FAILED}: a cache that broke during the step).
if [ -n "${{{ACTIVE}:-}}" ]; then
    "${ACTIVE}" "$@"
    status=$?
    if [ "$status" -ne {SCCACHE_FAILED} ]; then
        exit "$status"
    fi
fi
exec "$@"
"""

_PY = f"""# CMake's compiler launcher in every build step of this work dir (megabuild.compiler_cache):
# sccache where the step's cache server is up, the compiler itself everywhere else, and again
# where sccache itself failed ({SCCACHE_FAILED}: a cache that broke during the step).
import os
import subprocess
import sys

sccache = os.environ.get("{ACTIVE}")
status = subprocess.run([sccache, *sys.argv[1:]]).returncode if sccache else {SCCACHE_FAILED}
if status == {SCCACHE_FAILED}:
    status = subprocess.run(sys.argv[1:]).returncode
sys.exit(status)
"""


def path(work: Path, windows: bool = sys.platform == "win32") -> Path:
    return work / ("compiler_launcher.py" if windows else "compiler-launcher")


def value(work: Path, windows: bool = sys.platform == "win32") -> str:
    """``CMAKE_<LANG>_COMPILER_LAUNCHER``: a CMake list, the interpreter first on Windows."""
    where = path(work, windows)
    return f"{sys.executable};{where}" if windows else str(where)


def write(work: Path, windows: bool = sys.platform == "win32") -> Path:
    """The launcher at :func:`path` (the same bytes in every step)."""
    target = path(work, windows)
    text = _PY if windows else _SH
    if target.is_file() and target.read_text() == text and os.access(target, os.X_OK):
        return target
    work.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.chmod(0o755)
    tmp.replace(target)
    return target


def environment(work: Path, windows: bool = sys.platform == "win32") -> dict[str, str]:
    """The launcher variables of every step of a build with a compiler cache configured."""
    launcher = value(work, windows)
    return {f"CMAKE_{lang}_COMPILER_LAUNCHER": launcher for lang in LANGUAGES}
