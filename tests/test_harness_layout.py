"""The harness's build folder against conda-build 26.7.1's ``Config`` (``conda_build/config.py``):
names and the padding of the host and test prefixes, computed here as conda-build computes them."""

from __future__ import annotations

import math
import re
from pathlib import Path

from feedstock.conda_build_standin.build_folder import PREFIX_LENGTH, BuildFolder, padded
from megabuild.model import TOP_LEVEL


def _long_prefix(base: str, length: int = 255) -> str:
    """conda-build's ``Config._long_prefix`` (DEFAULT_PREFIX_LENGTH 255), line for line."""
    placeholder_length = length - len(base)
    placeholder = "_placehold"
    repeats = int(math.ceil(placeholder_length / len(placeholder)) + 1)
    placeholder = (base + repeats * placeholder)[:length]
    return max(base, placeholder)


def test_the_folder_is_named_and_laid_out_as_conda_builds(tmp_path: Path) -> None:
    folder = BuildFolder.new(tmp_path, TOP_LEVEL)
    assert folder.root.parent == tmp_path.resolve()
    assert re.fullmatch(rf"{TOP_LEVEL}_[0-9]{{13}}", folder.root.name), folder.root.name
    assert (folder.work.name, folder.build_prefix.name, folder.test_dir.name) == (
        "work",
        "_build_env",
        "test_tmp",
    )
    host, test = str(folder.host_prefix), str(folder.test_prefix)
    assert PREFIX_LENGTH == 255 and len(host) == 255 and len(test) == 253
    assert host == _long_prefix(f"{folder.root}/_h_env")
    assert test == _long_prefix(f"{folder.root}/_test_env")[:-2]
    assert folder.host_prefix.name.startswith("_h_env_placehold_placehold_")
    assert folder.test_prefix.name.startswith("_test_env_placehold_placehold_")


def test_a_base_longer_than_the_padding_stays_as_it_is() -> None:
    base = "/" + "x" * 300 + "/_h_env"
    assert padded(base) == base == _long_prefix(base)


def test_a_new_folder_replaces_the_last_one_of_its_name(tmp_path: Path) -> None:
    old = tmp_path / f"{TOP_LEVEL}_1700000000000"
    other = tmp_path / "pytorch_1700000000000"
    for path in (old, other):
        (path / "work").mkdir(parents=True)
    folder = BuildFolder.new(tmp_path, TOP_LEVEL)
    assert not old.exists() and other.is_dir() and folder.root != old
