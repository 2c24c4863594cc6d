"""The real upstream torch wheel's files, split as the feedstock packs them, checked by check-binaries.

:func:`split_wheel` runs the build pipeline on the wheel's listing laid out as empty placeholders
(``feedstock.split_check.split_run``: top level, linalg, libtorch, pytorch with its wheel.exclude and
link-back, the same typed split calls as the build), then :func:`check_split` reads every packaged
file's real bytes from the wheel (never unpacked to disk) and checks them where the split put them.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from feedstock.patch_check import cache_dir
from feedstock.paths import REPO
from feedstock.split_check.platforms import BY_NAME, Platform
from feedstock.split_check.recipe import read_recipe
from feedstock.split_check.run import layout_of, prepare
from feedstock.split_check.split_run import Run
from feedstock.split_check.tree_build import Places, packed
from feedstock.split_check.wheels import Fetched, read_wheel
from megabuild.binaries.buffer import Buffer
from megabuild.binaries.checks import Options, check_files
from megabuild.binaries.findings import Finding
from megabuild.binaries.linkage import Tree

VERSION = "2.14.1"
REQUIRE_ENV = "FEEDSTOCK_REQUIRE_REAL_WHEELS"


def cached_wheel(subdir: str) -> Path:
    """The cached upstream cp312 wheel of ``subdir`` (skips with one line without it; fails under
    ``FEEDSTOCK_REQUIRE_REAL_WHEELS=1``)."""
    tag = BY_NAME[subdir].pip_tag
    found = sorted((cache_dir() / tag).glob(f"torch-{VERSION}-cp312-cp312-*.whl"))
    if found:
        return found[0]
    reason = (
        f"no torch {VERSION} cp312 wheel for {subdir} in {cache_dir() / tag} (pip download --no-deps "
        f"--only-binary=:all: --platform {tag} --python-version 3.12 torch=={VERSION} -d <that dir>)"
    )
    if os.environ.get(REQUIRE_ENV, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass(frozen=True)
class SplitWheel:
    wheel: Path
    platform: Platform
    prefix: Path
    packages: dict[str, tuple[str, ...]]  # package -> its files, relative to the prefix
    members: dict[str, str]  # file relative to the prefix -> the wheel member holding its bytes
    python: str
    c_stdlib_version: str | None  # of the config the wheel's layout was rendered with (Linux)


def split_wheel(wheel: Path, platform: Platform, work: Path) -> SplitWheel:
    recipe = read_recipe(REPO)
    checked = prepare(recipe, Fetched(platform, read_wheel(wheel), "cached"))
    layout = layout_of(checked)
    assert layout is not None, f"{wheel.name}: no config or split spec"
    places = Places(work, layout)
    results = Run(layout, places).all_scripts()
    assert not results.failed, results.failed
    prefix = places.prefix
    # what the procedure packs from the prefix (the magma variant has its own: not checked here)
    packages = {p.run.phase.output: p.files for p in packed(layout, places) if p.root == prefix}
    sp = places.prefix_site_packages.relative_to(prefix).as_posix()
    members: dict[str, str] = {}
    for row in layout.rows:
        members[f"{sp}/{row.path}"] = row.path
        if row.path.startswith("torch/"):
            placed = layout.spec.install_path(row.path.removeprefix("torch/"))
            if placed is not None:
                members[placed] = row.path
    stdlib = next(
        (o.variant["c_stdlib_version"] for o in layout.outputs if "c_stdlib_version" in o.variant), None
    )
    return SplitWheel(wheel, platform, prefix, packages, members, layout.python, stdlib)


def check_split(
    split: SplitWheel,
    options: Options,
    dll_dirs: tuple[str, ...] = (),
    rewrite: Callable[[bytes], bytes] = bytes,
) -> dict[str, list[Finding]]:
    """Findings per package, each file read from the wheel and passed through ``rewrite`` (upstream's
    build root made a conda-build work dir: ``support.real_gates``)."""
    tree = Tree(split.prefix.resolve(), dll_dirs)
    with zipfile.ZipFile(split.wheel) as archive:

        @contextmanager
        def opener(rel: str) -> Iterator[Buffer]:
            member = split.members.get(rel)
            if member is None:  # written by the split itself (the magma placeholder)
                yield (split.prefix / rel).read_bytes()
                return
            yield rewrite(archive.read(member))

        return {name: check_files(tree, files, options, opener) for name, files in split.packages.items()}
