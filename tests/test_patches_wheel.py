"""recipe/patches against the real files of the upstream torch wheels of the recipe's version.

The macOS arm64 and the Windows x86_64 wheel (the smallest; the Windows one with
CRLF endings) come from PyPI through ``python -m feedstock check-patches``'s cache
(``~/.cache/pytorch-feedstock/wheels/<platform>``, or
``$PYTORCH_FEEDSTOCK_WHEEL_CACHE``) and are checked each on its own;
``$PYTORCH_FEEDSTOCK_TORCH_WHEEL`` points at a local macOS wheel instead. The
Linux x86_64 wheel (CUDA, 550 MB) joins only when a patched file can only be in
it. Which patched files a wheel holds is decided from its member list, not from
a list kept here.
"""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from feedstock import patch_check
from feedstock.commands import check_patches
from feedstock.paths import REPO as ROOT
from test_patches import recipe_version

PATCH_DIR = ROOT / "recipe" / "patches"
README = PATCH_DIR / "README.md"


def _wheel(platform: str) -> Path:
    local = os.environ.get("PYTORCH_FEEDSTOCK_TORCH_WHEEL")
    if local and platform == patch_check.DEFAULT_PLATFORM:
        return Path(local)
    try:
        return patch_check.download_wheel(platform)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, FileNotFoundError) as exc:
        pytest.skip(f"torch {patch_check.TORCH_VERSION} wheel for {platform} not reachable on PyPI: {exc}")


pytestmark = pytest.mark.slow  # fetches and unpacks the real torch wheels

# Checked each on its own: every hunk must apply to each wheel that holds its file.
PLATFORMS = (patch_check.DEFAULT_PLATFORM, "win_amd64")


@pytest.fixture(scope="module", params=PLATFORMS)
def wheels(request: pytest.FixtureRequest) -> list[Path]:
    found = [_wheel(request.param)]
    # CUDA-only files (CUDA headers, include/THC) are only in a Linux CUDA wheel:
    # fetch it when a patch touches a file that may live there.
    with zipfile.ZipFile(found[0]) as zf:
        names = set(zf.namelist())
    for patch in sorted(PATCH_DIR.glob("*.patch")):
        for diff in patch_check.split_patch(patch.read_text(encoding="utf-8")):
            members = [m for m, _ in patch_check.candidates(diff.path)]
            if (
                members
                and not any(m in names for m in members)
                and any("cuda" in m.lower() or "/THC/" in m for m in members)
            ):
                found.append(_wheel("manylinux_2_28_x86_64"))
                return found
    return found


@pytest.fixture(scope="module")
def results(wheels: list[Path]) -> list[patch_check.PatchResult]:
    return patch_check.check(wheels)


def test_wheels_are_the_recipe_version(wheels: list[Path]) -> None:
    assert recipe_version() == patch_check.TORCH_VERSION, "check_patches.py and recipe/meta.yaml disagree"
    for wheel in wheels:
        assert wheel.name.startswith(f"torch-{patch_check.TORCH_VERSION}-"), wheel


def test_every_reachable_hunk_applies_without_fuzz_or_offset(
    results: list[patch_check.PatchResult],
) -> None:
    print("\n" + check_patches.report(results))
    failed = [f"{r.patch}: {f.path}: {f.message}" for r in results for f in r.files if not f.ok]
    assert not failed, "\n".join(failed)
    fuzzy = [(r.patch, f.path, h) for r in results for f in r.files for h in f.hunks if h.fuzz]
    assert not fuzzy, fuzzy
    # rebased on this version: line numbers of the verifiable hunks are exact
    moved = [(r.patch, f.path, h) for r in results for f in r.files for h in f.hunks if h.offset]
    assert not moved, moved
    assert any(r.reachable for r in results), "no patched file found in the wheel at all"


def readme_wheel_column() -> dict[str, str]:
    """patch name -> first word of the 'wheel-verified' column of the README table."""
    rows: dict[str, str] = {}
    header = None
    for line in README.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if "wheel-verified" in cells:
            header = cells
            continue
        if header and len(cells) == len(header) and cells[0].startswith("`0"):
            word = re.match(r"\w+", cells[header.index("wheel-verified")])
            rows[cells[0].strip("`")] = word.group(0) if word else ""
    return rows


def test_readme_says_which_patches_the_wheel_verifies(results: list[patch_check.PatchResult]) -> None:
    column = readme_wheel_column()
    expected = {"all": "yes", "partly": "partly", "none": "no"}
    assert sorted(column) == sorted(r.patch for r in results)
    wrong = {
        r.patch: (column[r.patch], expected[r.coverage])
        for r in results
        if column[r.patch] != expected[r.coverage]
    }
    assert not wrong, f"README says / wheel shows: {wrong}"


def test_unverified_files_name_the_upstream_version_compared(
    results: list[patch_check.PatchResult],
) -> None:
    for res in results:
        if res.coverage == "all":
            continue
        text = (PATCH_DIR / res.patch).read_text(encoding="utf-8")
        checked = re.search(r"^Checked against: .*$", text, re.M)
        assert checked, res.patch
        assert "unverified" in checked.group(0), f"{res.patch}: say which files are unverified"
        assert re.search(r"\b(?:blob|commits?) [0-9a-f]{7,40}\b", checked.group(0)), (
            f"{res.patch}: name the upstream blob or commit compared"
        )
