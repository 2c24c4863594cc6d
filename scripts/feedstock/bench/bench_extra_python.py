#!/usr/bin/env python3
"""What one more Python costs in the scikit-build-core megabuild, on the fixture (prints numbers).

Usage: python -m feedstock bench-extra-python [--skbuild VERSION] [--pythons A,B] [--keep DIR]
                                                  [--unpatched]

The fixture (tests/fixture/minitorch) is built for Python A by the real scikit-build-core in a
conda-like host env; then the host env is recreated at the same prefix for Python B with its own
scikit-build-core, and B's build runs three ways from copies of A's tree:

* before, naive: ``pip install .`` as it is (the backend clears the cache: a full rebuild);
* recipe, full wheel: typed cache swap + ``megabuild build adopt``, then ``pip install .``;
* recipe: the same, plus the per-Python ``wheel.exclude`` of ``megabuild build pytorch``.

For each: Ninja edges and compiles (from ``.ninja_log``), the files and bytes ``cmake --install``
wrote into the temporary wheel dir, and what the wheel packed (uncompressed, as pip unpacks it)
and its compressed size. The fixture's source is patched as the recipe's is; ``--unpatched``
leaves out the recipe patches it mirrors (0012: the configure rewrites libtorch's ``empty.cpp``),
to compare. Needs cmake, ninja, a C/C++ compiler and two CPythons (pyenv).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

from megabuild.pipeline import frontend, wheel_settings
from megabuild.split.spec import load_spec

from feedstock.conda_build_standin import ninja
from feedstock.conda_build_standin.conda_build import CONDA_FORGE_SKBUILD
from feedstock.conda_build_standin.cpythons import CPython, find_cpythons
from feedstock.conda_build_standin.skbuild_tree import SkbuildTree
from feedstock.errors import UsageError
from feedstock.paths import RECIPE

PROG = "feedstock bench-extra-python"


CLEARED: dict[object, str] = {None: "-", True: "CLEARED", False: "kept"}


def _measure(tree: SkbuildTree, history: ninja.LogHistory, log: str, label: str) -> dict[str, object]:
    ran = history.ran(tree.build)
    created = [line for line in log.splitlines() if "Created wheel for" in line]
    sp_dir = next((tree.prefix / "lib").glob("python3.*/site-packages"))
    return {
        "step": label,
        "edges": len(ran),
        "compiles": sum(1 for o in ran if ninja.kind(o) == "compile"),
        "by_target": ninja.by_target(ran),
        "installed": frontend.installed_bytes(tree.build, sp_dir, tree.prefix),
        "packed": frontend.record_bytes(frontend.installed_dist_info(sp_dir, tree.src)),
        "compressed": int(created[-1].split("size=")[1].split()[0]),
        "cleared": not (tree.build / "CMakeFiles/megabuild-tree-kept").is_file(),
    }


def _second_python(tree: SkbuildTree, kept: Path, a: CPython, b: CPython, how: str) -> dict[str, object]:
    tree.reset(kept)
    history = ninja.LogHistory()
    history.ran(tree.build)  # A's build counts as seen
    settings: list[str] = []
    if how == "naive":
        (tree.build / "CMakeFiles/megabuild-tree-kept").write_text("")
    else:
        tree.megabuild(
            "cache", "restore", "build/CMakeCache.txt", "--swap-python-from", a.short, "--to", b.short
        )
        tree.megabuild("build", "adopt")
    if how == "recipe":
        spec = load_spec(RECIPE / "split_spec.json", "linux-64")
        excludes = wheel_settings.project_excludes(tree.src) + wheel_settings.libtorch_excludes(spec)
        settings = [wheel_settings.exclude_setting(excludes)]
    labels = {"naive": "before: naive", "full": "recipe, full wheel", "recipe": "recipe (wheel.exclude)"}
    return _measure(tree, history, tree.pip_install(*settings), f"python {b.short}, {labels[how]}")


def _print(rows: list[dict[str, object]]) -> None:
    head = f"{'step':42} {'edges':>5} {'compiles':>8} {'install: files/bytes':>22}"
    print(f"{head} {'packed: files/bytes':>22} {'wheel':>9}  cache")
    for r in rows:
        inst, packed = r["installed"], r["packed"]
        assert isinstance(inst, frontend.Bytes) and isinstance(packed, frontend.Bytes)
        print(f"{r['step']:42} {r['edges']:>5} {r['compiles']:>8} {inst.files:>8} {inst.size:>13,} "
              f"{packed.files:>8} {packed.size:>13,} {r['compressed']:>9,}  "
              f"{CLEARED[r['cleared']]}")  # fmt: skip
    for r in rows:
        print(f"  {r['step']}: {r['by_target']}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument(
        "--skbuild", default=CONDA_FORGE_SKBUILD, help="scikit-build-core version (%(default)s)"
    )
    parser.add_argument("--pythons", default="3.12,", help="A,B (default: 3.12 and the newest other one)")
    parser.add_argument("--keep", type=Path, help="work dir to keep (default: a temp dir)")
    parser.add_argument(
        "--unpatched", action="store_true", help="without the recipe patches the fixture mirrors (0012)"
    )
    args = parser.parse_args(argv)
    found = {c.short: c for c in find_cpythons()}
    wanted_a, _, wanted_b = args.pythons.partition(",")
    others = [v for v in found if v != wanted_a]
    b_short = wanted_b or (others[-1] if others else "")
    if wanted_a not in found or b_short not in found:
        raise UsageError(f"needs CPythons {wanted_a} and {b_short or 'another'}; found {', '.join(found)}")
    a, b = found[wanted_a], found[b_short]
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-extra-python-"))
    tree = SkbuildTree.create(work / f"skbuild-{args.skbuild}", args.skbuild, patched=not args.unpatched)
    tree.host_env(a)
    history = ninja.LogHistory()
    rows = [_measure(tree, history, tree.pip_install(), f"top level, python {a.short}")]
    tree.megabuild("cache", "save", "build/CMakeCache.txt")
    kept = work / "kept-build"
    tree.keep(kept)
    tree.host_env(b)
    rows += [_second_python(tree, kept, a, b, how) for how in ("naive", "full", "recipe")]
    rows[0]["cleared"] = None  # a first configure: nothing to keep
    # wheel.exclude acts on the pack only: cmake --install wrote what it wrote for the full wheel
    # (sizing it here would look for the excluded files in a libtorch this prefix does not have)
    rows[-1]["installed"] = rows[-2]["installed"]
    patches = "without" if args.unpatched else "with"
    print(
        f"scikit-build-core {args.skbuild}, fixture tests/fixture/minitorch ({patches} the recipe's"
        f" patch 0012), Pythons {a.short} -> {b.short}"
    )
    _print(rows)
    print(f"work dir: {work}")
    return 0
