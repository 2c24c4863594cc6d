"""Format checks for recipe/patches/*.patch and their listing in recipe/meta.yaml."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from feedstock.paths import REPO as ROOT

PATCH_DIR = ROOT / "recipe" / "patches"
META = ROOT / "recipe" / "meta.yaml"
PATCHES = sorted(PATCH_DIR.glob("*.patch"))

HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


def recipe_version() -> str:
    """The PyTorch version recipe/meta.yaml builds (its ``{% set version = "..." %}``)."""
    m = re.search(r'^\{%\s*set\s+version\s*=\s*"([^"]+)"\s*%\}', META.read_text(encoding="utf-8"), re.M)
    assert m, "recipe/meta.yaml sets no version"
    return m.group(1)


def parse(text: str) -> list[dict]:
    """Return one dict per file diff; raise AssertionError on malformed hunks."""
    lines = text.splitlines()
    files: list[dict] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old = line[4:].split("\t")[0].strip()
            new = lines[i + 1][4:].split("\t")[0].strip()
            cur = {"old": old, "new": new, "hunks": 0}
            files.append(cur)
            i += 2
            while i < len(lines) and (m := HUNK_RE.match(lines[i])):
                old_n = int(m.group(2)) if m.group(2) is not None else 1
                new_n = int(m.group(4)) if m.group(4) is not None else 1
                i += 1
                seen_old = seen_new = 0
                while i < len(lines) and (seen_old < old_n or seen_new < new_n):
                    body = lines[i]
                    if body.startswith("\\"):  # "\ No newline at end of file"
                        i += 1
                        continue
                    tag = body[:1]
                    if tag == " " or body == "":
                        seen_old += 1
                        seen_new += 1
                    elif tag == "-":
                        seen_old += 1
                    elif tag == "+":
                        seen_new += 1
                    else:
                        raise AssertionError(f"{old}: unexpected line in hunk: {body!r}")
                    i += 1
                assert (seen_old, seen_new) == (old_n, new_n), (
                    f"{old}: hunk {m.group(0)} has {seen_old}/{seen_new} lines"
                )
                cur["hunks"] += 1
            continue
        i += 1
    return files


def test_there_are_patches():
    assert PATCHES, "no recipe/patches/*.patch"


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_is_well_formed(patch: Path):
    text = patch.read_text(encoding="utf-8")
    head = text.split("\n---\n", 1)[0]
    assert head.startswith("From "), "git format-patch style: starts with 'From '"
    assert re.search(r"^Subject: ", head, re.M), "Subject: header missing"
    version = recipe_version()
    checked = re.findall(rf"^Checked against: PyTorch v{re.escape(version)}\b.*\S", head, re.M)
    assert checked, f"header needs a 'Checked against: PyTorch v{version} (...)' line (meta.yaml's version)"
    body = head.split("\n\n", 1)[1] if "\n\n" in head else ""
    assert len(body.replace(checked[0], "").strip()) > 80, "header must explain why"
    assert re.match(r"\d{4}-", patch.name), "name starts with a 4-digit number"

    files = parse(text)
    assert files, "no file diffs found"
    for f in files:
        assert f["hunks"] > 0, f"{f['old']}: no hunks"
        for side, prefix in (("old", "a/"), ("new", "b/")):
            path = f[side]
            if path == "/dev/null":
                continue
            assert path.startswith(prefix), f"{path}: must start with {prefix}"
            rel = path[len(prefix) :]
            assert not rel.startswith("/") and ".." not in Path(rel).parts, path
    # every 'diff --git' header has a matching ---/+++ pair
    assert len(re.findall(r"^diff --git ", text, re.M)) == len(files)


# absolute paths of a build machine (home dirs, temp dirs, conda installs)
MACHINE_PATH = re.compile(r"/(?:home|tmp|work|root|opt/conda)/")


def test_no_machine_paths():
    for patch in PATCHES:
        text = patch.read_text(encoding="utf-8")
        found = MACHINE_PATH.search(text)
        assert found is None, f"{patch.name} mentions {found.group(0)}"


def test_readme_lists_every_patch():
    readme = (PATCH_DIR / "README.md").read_text(encoding="utf-8")
    for patch in PATCHES:
        assert patch.name in readme, f"{patch.name} missing from recipe/patches/README.md"


def meta_patches() -> list[str]:
    """`source.patches` entries of recipe/meta.yaml (text-based: meta.yaml is Jinja)."""
    entries: list[str] = []
    in_source = in_patches = False
    for raw in META.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            in_source = line.startswith("source:")
            in_patches = False
            continue
        if in_source and line.strip() == "patches:":
            in_patches, patches_indent = True, indent
            continue
        if in_patches:
            if indent <= patches_indent and not line.strip().startswith("- "):
                in_patches = False
                continue
            item = line.strip()
            if item.startswith("- "):
                entries.append(item[2:].strip().strip("'\""))
    return entries


def test_meta_yaml_lists_exactly_the_patches():
    if not META.exists():
        pytest.skip("recipe/meta.yaml not written yet")
    listed = meta_patches()
    assert all(e.startswith("patches/") for e in listed), listed
    listed_names = sorted(Path(e).name for e in listed)
    assert len(listed_names) == len(set(listed_names)), "duplicate entries"
    assert listed_names == sorted(p.name for p in PATCHES), (
        f"meta.yaml source.patches {listed_names} != recipe/patches {[p.name for p in PATCHES]}"
    )


# a file compiled only in CUDA builds
CUDA_ONLY_FILE = re.compile(r"(?:^|/)cuda/|\.cuh?$")
CUDA_SELECTOR = '[cuda_compiler_version != "None"]'


def test_cuda_only_patches_apply_only_in_cuda_configs():
    """A patch that changes nothing but CUDA sources carries the CUDA selector, and only such a patch."""
    if not META.exists():
        pytest.skip("recipe/meta.yaml not written yet")
    lines = META.read_text(encoding="utf-8").splitlines()
    for patch in PATCHES:
        entry = [line for line in lines if line.strip().startswith(f"- patches/{patch.name}")]
        assert len(entry) == 1, f"{patch.name}: {entry}"
        paths = [f["new"][2:] for f in parse(patch.read_text(encoding="utf-8"))]
        cuda_only = all(CUDA_ONLY_FILE.search(p) for p in paths)
        has_selector = CUDA_SELECTOR in entry[0].split("#", 1)[-1]
        assert has_selector == cuda_only, (
            f"{patch.name}: files {paths}; CUDA selector {'missing' if cuda_only else 'not wanted'}"
        )


def readme_deleted_numbers() -> set[int]:
    """Patch numbers listed in the first column of the README's "## Deleted" table."""
    text = (PATCH_DIR / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Deleted\n", 1)[1].split("\n## ", 1)[0] if "\n## Deleted\n" in text else ""
    return {int(m.group(1)) for m in re.finditer(r"^\|\s*`?(\d{4})\b", section, re.M)}


def test_series_numbers_are_unique_and_every_gap_is_documented():
    """Numbers go up from 0001; a number left out (a deleted patch) is listed under "Deleted"."""
    numbers = [int(p.name[:4]) for p in PATCHES]
    assert numbers == sorted(set(numbers)) and numbers[0] == 1, numbers
    gaps = set(range(1, numbers[-1] + 1)) - set(numbers)
    undocumented = gaps - readme_deleted_numbers()
    assert not undocumented, f"numbers {sorted(undocumented)} missing without a line under '## Deleted'"


# -- the table of conda-forge's patches: each reason must hold for this recipe ---------------------

UPSTREAM_TESTS = ROOT / "recipe" / "upstream_tests.json"
# words of that table that name a conda platform family
PLATFORM_WORDS = {"windows": "win", "win": "win", "macos": "osx", "osx": "osx", "linux": "linux"}


def conda_forge_rows(readme: str) -> dict[str, str]:
    """conda-forge patch (first cell, e.g. "0008 remove ...") -> the "here" cell of its table."""
    heading = "\n## The conda-forge pytorch-cpu feedstock's patches\n"
    section = readme.split(heading, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.match(r"(?:tensorpipe )?\d{4}\b", cells[0]):
            rows[cells[0]] = cells[1]
    return rows


def built_families() -> set[str]:
    """Platform families with a variant config in .ci_support (linux, osx, win)."""
    from feedstock.configs import list_configs

    return {c.values["target_platform"][0].split("-")[0] for c in list_configs(ROOT)}


def stale_claims(rows: dict[str, str], families: set[str], test_files: set[str], xdist: bool) -> list[str]:
    """Reasons in the table of conda-forge's patches that contradict what the recipe builds and tests."""
    stale = []
    for patch, here in rows.items():
        # "not built here", or a reason that is only a platform ("Windows-only (...)")
        if "not built here" in here or re.match(r"(?:Windows|macOS|Linux)-only\b", here):
            named = {PLATFORM_WORDS[w] for w in re.findall(r"[A-Za-z]+", here.lower()) if w in PLATFORM_WORDS}
            if not named or named & families:
                built = sorted(named & families) or "a platform"
                stale.append(f"{patch}: 'not built here', but {built} is built")
        for name in re.findall(r"`(test_\w+\.py)` is not", here):
            if any(path.endswith("/" + name) for path in test_files):
                stale.append(f"{patch}: says {name} is not run; recipe/upstream_tests.json runs it")
        if xdist and re.search(r"without (?:pytest-)?xdist", here):
            stale.append(f"{patch}: says the tests run without xdist; the test section has pytest-xdist")
    return stale


def test_conda_forge_table_reasons_hold_for_this_recipe():
    """No conda-forge patch is waved off for a platform .ci_support builds or a test the recipe runs."""
    import json

    rows = conda_forge_rows((PATCH_DIR / "README.md").read_text(encoding="utf-8"))
    assert len(rows) > 20, sorted(rows)
    tests = json.loads(UPSTREAM_TESTS.read_text(encoding="utf-8"))
    files = {f["path"] for f in tests["files"]}
    xdist = "- pytest-xdist" in META.read_text(encoding="utf-8")
    assert not stale_claims(rows, built_families(), files, xdist)


def test_stale_conda_forge_reasons_are_caught():
    """The check above refuses each kind of stale reason (rows as this table once had them)."""
    rows = {
        "0008 remove `DESTINATION lib`": "Windows-only (`lib` vs `bin` for DLLs); not built here",
        "0014 Use Intel/LLVM openmp": "Windows-only (MSVC `-openmp:llvm`)",
        "0010 skip test_norm_matrix": "tests-only: `test_linalg.py` is not in this recipe's test subset",
        "0020 serializable subtest labels": "tests-only (pytest-xdist); the subset runs without xdist",
    }
    stale = stale_claims(rows, {"linux", "osx", "win"}, {"test/test_linalg.py"}, xdist=True)
    assert len(stale) == 4, stale
    assert not stale_claims(rows, {"linux", "osx"}, set(), xdist=False)


def test_the_rehearsal_applies_the_patches_its_config_selects() -> None:
    """The rehearsal (linux-64, CUDA 13.0) packs the source conda-build would build for its
    config: the Windows patches (0014: win and CUDA; 0015: win) are in the recipe's directory but
    not applied, the others are, in the recipe's order."""
    from feedstock.commands import rehearse

    (config,) = sorted(
        (ROOT / ".ci_support").glob("linux_64_blas_implgeneric*cuda_compiler_version13.0*.yaml")
    )
    names = [p.name for p in rehearse._rendered_patches(config, ROOT / "recipe")]
    on_disk = sorted(p.name for p in (ROOT / "recipe" / "patches").glob("*.patch"))
    assert [n for n in on_disk if n not in names] == [n for n in on_disk if n.startswith(("0014-", "0015-"))]
    assert names == sorted(names), "conda-build applies them in the recipe's order"
