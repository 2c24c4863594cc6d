"""The real free-threaded CPython for the tests (``freethreaded_python`` fixture).

``.ci/provision-freethreaded-python.sh`` builds it (CPython 3.13.5 from Debian trixie's source
package, ``--disable-gil --enable-shared``) into a cache dir, and ``.ci/run`` sets
``FEEDSTOCK_REQUIRE_FREETHREADED=1``: there a test that cannot find the interpreter fails instead
of skipping, so CI cannot pass by skipping the free-threaded checks. Elsewhere they skip with one
line saying how to provision it.
"""

from __future__ import annotations

import os

import pytest
from feedstock.conda_build_standin.cpythons import (
    FREETHREADED_ENV,
    CPython,
    find_freethreaded,
    freethreaded_cache_dir,
)

REQUIRE_ENV = "FEEDSTOCK_REQUIRE_FREETHREADED"


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def freethreaded_or_skip() -> CPython:
    """The free-threaded CPython, or skip (fail under ``FEEDSTOCK_REQUIRE_FREETHREADED``)."""
    found = find_freethreaded()
    if found is not None:
        return found
    where = os.environ.get(FREETHREADED_ENV) or str(freethreaded_cache_dir())
    reason = (
        f"no free-threaded CPython at {where} "
        "(run .ci/provision-freethreaded-python.sh, or set FEEDSTOCK_FREETHREADED_PYTHON)"
    )
    if required():
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)
