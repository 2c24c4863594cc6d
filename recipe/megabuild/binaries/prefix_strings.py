"""Build and host prefix strings left in a file (binary or text).

conda-build builds in ``<croot>/<name>_<timestamp>/`` (``conda-bld`` locally,
``/home/conda/feedstock_root/build_artifacts`` on conda-forge's CI) with the host prefix
``_h_env_placehold_placehold...``, the build prefix ``_build_env`` and the sources in ``work``. In
an installed package the host placeholder is gone wherever conda's prefix replacement handled it
(the files of ``info/has_prefix``), so any of these strings left is a path that points nowhere on
the user's machine. Extra literal strings (the build's ``SRC_DIR``) can be added.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from megabuild.binaries.buffer import Buffer

# anchor (found with the buffer's fast find) -> the whole match, which must hold the anchor
PATTERNS: dict[bytes, re.Pattern[bytes]] = {
    b"_h_env_placehold": re.compile(rb"[/\\]_h_env_placehold"),
    b"_build_env": re.compile(rb"[/\\]_build_env(?![A-Za-z0-9_])"),
    # the work dir of a build: <croot>/<package>_<timestamp in ms>/work
    b"work": re.compile(rb"[/\\][A-Za-z0-9_.+-]+_[0-9]{10,}[/\\]+work(?![A-Za-z0-9_])"),
}
_CONTEXT = 100  # bytes either side of a hit shown in the finding


@dataclass(frozen=True)
class Hit:
    count: int
    example: str


def _around(window: bytes, at: int) -> str:
    """The printable text of ``window`` around offset ``at``: up to 60 characters before it and 100
    from it on (a hit in a long string shows the part that holds it)."""
    lo = at
    while lo > max(0, at - 60) and 0x20 <= window[lo - 1] < 0x7F:
        lo -= 1
    hi = at
    while hi < min(len(window), at + 100) and 0x20 <= window[hi] < 0x7F:
        hi += 1
    return window[lo:hi].decode("ascii")


def scan(data: Buffer, extra: tuple[bytes, ...] = ()) -> Hit | None:
    """How many build-prefix strings ``data`` holds, and one of them in its printable context."""
    count, example = 0, ""
    patterns = dict(PATTERNS)
    patterns.update({literal: re.compile(re.escape(literal)) for literal in extra if literal})
    for anchor, pattern in patterns.items():
        at = data.find(anchor)
        while at >= 0:
            lo = max(0, at - _CONTEXT)
            window = bytes(data[lo : at + len(anchor) + _CONTEXT])
            hit = at - lo
            if any(m.start() <= hit < m.end() for m in pattern.finditer(window)):
                count += 1
                example = example or _around(window, at - lo)
            at = data.find(anchor, at + len(anchor))
    return Hit(count, example) if count else None
