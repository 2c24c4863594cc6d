#!/usr/bin/env python3
"""``python scripts/run_cross_checks.py ...``: the command the developers' guide names.

The cross-checks live with their requirements in ``scripts/cross_checks/``
(``run_cross_checks.py`` there); this entry point runs the same ``main``.
"""

from __future__ import annotations

import sys

from cross_checks.run_cross_checks import main
from feedstock.errors import run_main

if __name__ == "__main__":
    sys.exit(run_main("run_cross_checks.py", main))
