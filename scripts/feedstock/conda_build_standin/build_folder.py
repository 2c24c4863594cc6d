"""conda-build's build folder: where one build's source, build env, host env and test env live.

As conda-build 26.7.1's ``Config`` lays them out (``conda_build/config.py``): the build folder is
``<croot>/<build id>``, the build id ``{n}_{t}`` (``build_id_pat``'s default: the top-level package
name and the invocation time in milliseconds); in it ``work`` (``SRC_DIR``), ``_build_env``
(``BUILD_PREFIX``), the host prefix ``_h_env`` padded with ``_placehold`` to
``DEFAULT_PREFIX_LENGTH`` (255) characters in all (``_long_host_prefix``), the test prefix
``_test_env`` padded the same way less its last two characters (``test_prefix``: "to check if the
null byte padding causes issues") and the test dir ``test_tmp``. Windows' prefixes are not padded;
the harness builds Linux configs only.
"""

from __future__ import annotations

import math
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

PREFIX_LENGTH = 255  # conda_build.config.DEFAULT_PREFIX_LENGTH
PLACEHOLDER = "_placehold"
# a build folder of this layout: <name>_<13 digits> (conda-build's get_build_folders' time_re)
_BUILD_ID = re.compile(r"(?P<name>.+)_[0-9]{13}")


def padded(base: str, length: int = PREFIX_LENGTH) -> str:
    """``base`` padded with ``_placehold`` to ``length`` characters (``Config._long_prefix``);
    ``base`` itself when it is that long already."""
    repeats = int(math.ceil((length - len(base)) / len(PLACEHOLDER)) + 1)
    return max(base, (base + repeats * PLACEHOLDER)[:length])


@dataclass(frozen=True)
class BuildFolder:
    """``<croot>/<name>_<milliseconds>`` and the paths conda-build derives from it."""

    root: Path

    @classmethod
    def new(cls, croot: Path, name: str) -> BuildFolder:
        """A build folder for ``name`` at this millisecond; earlier ones of ``name`` in ``croot``
        (a kept work dir's last run) are removed, so that a kept croot holds one build."""
        for old in croot.glob(f"{name}_*"):
            match = _BUILD_ID.fullmatch(old.name)
            if match is not None and match["name"] == name and old.is_dir():
                shutil.rmtree(old)
        return cls(croot.resolve() / f"{name}_{int(time.time() * 1000)}")

    @property
    def work(self) -> Path:
        """``SRC_DIR``."""
        return self.root / "work"

    @property
    def build_prefix(self) -> Path:
        return self.root / "_build_env"

    @property
    def host_prefix(self) -> Path:
        return Path(padded(str(self.root / "_h_env")))

    @property
    def test_prefix(self) -> Path:
        return Path(padded(str(self.root / "_test_env"))[:-2])

    @property
    def test_dir(self) -> Path:
        return self.root / "test_tmp"
