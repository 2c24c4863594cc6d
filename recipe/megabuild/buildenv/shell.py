"""The environment as lines a shell applies: ``export K='V'`` for sh, ``set "K=V"`` for cmd.

sh: build.sh evaluates the lines; single quotes keep every character but ``'`` literal, which is
written ``'\\''``.

cmd: bld.bat writes the lines to a file and applies them with
``for /f "usebackq delims=" %%L in ("FILE") do %%L``. A FOR variable is substituted after cmd's
percent expansion and its special-character pass, so ``%``, ``&``, ``|``, ``<``, ``>``, ``^`` and
``(``/``)`` in a value stay literal; SET takes everything between the first and the last quote
(``"`` inside a value is kept), and ``set "K="`` removes K. ``!`` is literal too because bld.bat does
not enable delayed expansion. A line cannot hold a line break, and FOR /F skips lines that begin
with ``;``: such values are refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from megabuild.errors import MegabuildError

SHELLS = ("sh", "cmd")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise MegabuildError(f"env: {name!r} is not a variable name both shells accept")


def sh_line(name: str, value: str) -> str:
    _check_name(name)
    return "export {}='{}'".format(name, value.replace("'", "'\\''"))


def cmd_line(name: str, value: str) -> str:
    _check_name(name)
    if "\n" in value or "\r" in value:
        raise MegabuildError(f"env: {name}'s value holds a line break, which a cmd line cannot carry")
    return f'set "{name}={value}"'


def render(env: Mapping[str, str], shell: str) -> str:
    """Every variable as one line of ``shell`` (``sh`` or ``cmd``), newline-terminated."""
    if shell == "sh":
        line = sh_line
    elif shell == "cmd":
        line = cmd_line
    else:
        raise MegabuildError(f"env: unknown shell {shell!r} (known: {', '.join(SHELLS)})")
    return "".join(line(name, value) + "\n" for name, value in env.items())
