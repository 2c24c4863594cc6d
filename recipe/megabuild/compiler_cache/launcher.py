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

_SH = f"""#!/bin/sh
# CMake's compiler launcher in every build step of this work dir (megabuild.compiler_cache):
# sccache where the step's cache server is up, the compiler itself everywhere else.
if [ -n "${{{ACTIVE}:-}}" ]; then
    exec "${ACTIVE}" "$@"
fi
exec "$@"
"""

_PY = f"""# CMake's compiler launcher in every build step of this work dir (megabuild.compiler_cache):
# sccache where the step's cache server is up, the compiler itself everywhere else.
import os
import subprocess
import sys

sccache = os.environ.get("{ACTIVE}")
command = ([sccache] if sccache else []) + sys.argv[1:]
sys.exit(subprocess.run(command).returncode)
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
