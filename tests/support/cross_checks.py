"""Cross-checks against the real conda-build and conda-smithy.

Locally those tools are usually absent and the cross-checks skip.
``python -m feedstock cross-check``, which installs them, sets
``FEEDSTOCK_REQUIRE_CROSS_CHECKS=1``: a cross-check that would skip fails instead, so that command
cannot pass by skipping everything it exists to run.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

REQUIRE_ENV = "FEEDSTOCK_REQUIRE_CROSS_CHECKS"


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")


def unavailable(reason: str) -> NoReturn:
    """Skip the cross-check, or fail it when the environment requires cross-checks to run."""
    if required():
        pytest.fail(f"{REQUIRE_ENV} is set but the cross-check cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def import_tool(module: str) -> ModuleType:
    """The real tool's module, or skip (fail under FEEDSTOCK_REQUIRE_CROSS_CHECKS)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        unavailable(f"{module} is not importable ({exc})")
