#!/usr/bin/env python3
"""This recipe's requirements against conda-forge's pytorch-cpu feedstock's, both rendered by conda-build.

    python -m feedstock requirements-compare --conda-forge DIR           # check the data
    python -m feedstock requirements-compare --conda-forge DIR --write   # rewrite the data

Runs with the Python of the cross-check environment (``run_cross_checks.py`` beside it builds it),
where conda-build is installed. ``DIR`` is a checkout of conda-forge/pytorch-cpu-feedstock at the
commit ``run_cross_checks.py``'s ``SOURCES`` names (its ``recipe/`` and ``.ci_support/``; default:
``$FEEDSTOCK_CONDA_FORGE_FEEDSTOCK``, which the runner sets). Both recipes are rendered and
compared (``scripts/feedstock/requirements_compare.py``); without ``--write`` it exits 1 on any
difference ``tests/data/requirements-vs-conda-forge.json`` does not explain. ``--write`` rewrites
that file with what was found, keeping the recorded reasons: a new difference gets an empty
reason, to be written before the cross-check passes; then ``python -m feedstock update-doc-tables``
regenerates docs/packages.md's table. The cross-check itself is
``tests/test_requirements_compare.py::test_conda_forge_differs_only_as_recorded``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from pathlib import Path

from feedstock import requirements_compare as rc
from feedstock.cross_checks.run_cross_checks import SOURCES
from feedstock.errors import FeedstockError, UsageError

PROG = "feedstock requirements-compare"
SOURCE = next(s for s in SOURCES if s.repo == rc.CONDA_FORGE_REPO)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--conda-forge",
        type=Path,
        default=os.environ.get(rc.CONDA_FORGE_ENV) or None,
        help=f"checkout of {rc.CONDA_FORGE_REPO} at {SOURCE.ref[:10]} (default: ${rc.CONDA_FORGE_ENV})",
    )
    p.add_argument("--write", action="store_true", help=f"rewrite {rc.DATA.name}, keeping the reasons")
    ns = p.parse_args(argv)
    if ns.conda_forge is None:
        raise UsageError(f"no --conda-forge and no ${rc.CONDA_FORGE_ENV}")
    if not (ns.conda_forge / "recipe" / "meta.yaml").is_file():
        raise UsageError(f"{ns.conda_forge} is not a checkout of {rc.CONDA_FORGE_REPO} (no recipe/meta.yaml)")
    try:
        import conda_build  # noqa: F401
    except ImportError as exc:
        raise FeedstockError(
            f"conda-build is not importable ({exc}): run this with the cross-check environment's Python"
        ) from exc
    start = time.monotonic()
    found = rc.compare_feedstocks(ns.conda_forge.resolve())
    print(f"rendered and compared {len(found.pairs)} pairs of configs in {time.monotonic() - start:.0f} s")
    recorded = rc.load() if rc.DATA.exists() else rc.Recorded(SOURCE.ref, rc.Comparison((), {}, ()))
    if ns.write:
        merged = rc.with_reasons(found, recorded.comparison)
        rc.dump(rc.Recorded(SOURCE.ref, merged, recorded.about))
        missing = [d for d in merged.differences if not d.reason.strip()]
        print(f"wrote {rc.DATA}: {len(merged.differences)} differences, {len(missing)} without a reason")
        for d in missing:
            print(f"  no reason yet: {d.describe()}")
        return 1 if missing else 0
    problems = rc.check(found, recorded.comparison)
    if recorded.commit != SOURCE.ref:
        problems.insert(0, f"{rc.DATA.name} records {recorded.commit[:10]}, this renders {SOURCE.ref[:10]}")
    for problem in problems:
        print(problem)
    print(f"{len(found.differences)} differences, {len(problems)} not explained by {rc.DATA.name}")
    return 1 if problems else 0
