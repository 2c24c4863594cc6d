"""``install_roots`` in the split spec: where ``split install`` puts files per platform family
(Windows: conda's ``Library/`` layout), validated with one-line errors; linux/osx unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _split_util import REAL_SPEC, run_cli, snapshot, write
from megabuild.errors import MegabuildError
from megabuild.split.install import plan_install
from megabuild.split.spec import load_spec

WIN_LIBTORCH = {
    "lib/c10.dll": "Library/bin/c10.dll",
    "lib/c10.lib": "Library/lib/c10.lib",
    "lib/torch_cpu.dll": "Library/bin/torch_cpu.dll",
    "lib/torch_cpu.lib": "Library/lib/torch_cpu.lib",
    "include/torch/csrc/api/include/torch/torch.h": "Library/include/torch/csrc/api/include/torch/torch.h",
    "include/ATen/ATen.h": "Library/include/ATen/ATen.h",
    "share/cmake/Torch/TorchConfig.cmake": "Library/share/cmake/Torch/TorchConfig.cmake",
    "bin/torch_shm_manager.exe": "Library/bin/torch_shm_manager.exe",
}


@pytest.mark.parametrize(("staged", "placed"), sorted(WIN_LIBTORCH.items()))
def test_real_spec_places_windows_files_in_library(staged: str, placed: str) -> None:
    assert load_spec(REAL_SPEC, "win-64").install_path(staged) == placed


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64", "osx-64", "osx-arm64"])
def test_real_spec_keeps_unix_paths(platform: str) -> None:
    spec = load_spec(REAL_SPEC, platform)
    assert spec.install_roots == ()
    for staged in ("lib/libc10.so", "include/ATen/ATen.h", "share/cmake/Torch/TorchConfig.cmake"):
        assert spec.install_path(staged) == staged


def test_real_spec_win_has_no_place_for_odd_files() -> None:
    spec = load_spec(REAL_SPEC, "win-64")
    assert spec.install_path("lib/sub/x.dll") is None
    assert spec.install_path("README.txt") is None


def _win_staging(tmp_path: Path, files: list[str]) -> Path:
    staging = tmp_path / "staging"
    for rel in files:
        write(staging / "libtorch" / rel, rel.encode())
    return staging


def test_win_install_moves_into_library(tmp_path: Path) -> None:
    staging = _win_staging(tmp_path, ["lib/c10.dll", "lib/c10.lib", "include/ATen/ATen.h",
                                      "share/cmake/Torch/TorchConfig.cmake"])  # fmt: skip
    prefix = tmp_path / "prefix"
    res = run_cli("install", "libtorch", "--spec", REAL_SPEC, "--target-platform", "win-64",
                  "--staging", staging, "--prefix", prefix)  # fmt: skip
    assert res.returncode == 0, res.stderr
    got = {rel: data[-1] for rel, data in snapshot(prefix).items() if data[0] == "file"}
    assert got == {
        "Library/bin/c10.dll": b"lib/c10.dll",
        "Library/lib/c10.lib": b"lib/c10.lib",
        "Library/include/ATen/ATen.h": b"include/ATen/ATen.h",
        "Library/share/cmake/Torch/TorchConfig.cmake": b"share/cmake/Torch/TorchConfig.cmake",
    }
    assert not (staging / "libtorch").exists()


def test_win_install_dry_run_names_the_destinations(tmp_path: Path) -> None:
    staging = _win_staging(tmp_path, ["lib/c10.dll"])
    prefix = tmp_path / "prefix"
    res = run_cli("install", "libtorch", "--spec", REAL_SPEC, "--target-platform", "win-64",
                  "--staging", staging, "--prefix", prefix, "--dry-run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"-> {prefix / 'Library/bin/c10.dll'}" in res.stdout
    assert not prefix.exists()


def test_win_install_refuses_unplaced_and_existing_files(tmp_path: Path) -> None:
    staging = _win_staging(tmp_path, ["lib/c10.dll", "lib/torch.dll", "share/x.txt"])
    write(staging / "libtorch/lib/sub/odd.dll")  # lib/*.dll stays in one segment
    prefix = tmp_path / "prefix"
    write(prefix / "Library/bin/torch.dll", b"other package")
    before = snapshot(tmp_path)
    spec = load_spec(REAL_SPEC, "win-64")
    with pytest.raises(MegabuildError) as err:
        plan_install(spec, "libtorch", staging, prefix).run()
    message = str(err.value)
    assert "\n" not in message
    assert "would overwrite 1 file(s) in the prefix: Library/bin/torch.dll" in message
    assert "match no install root of win in the split spec: lib/sub/odd.dll" in message
    assert snapshot(tmp_path) == before


def test_two_staged_files_for_one_place_are_refused(tmp_path: Path) -> None:
    spec_path = _spec_with(tmp_path, {"win": [{"pattern": "lib/*", "dest": "Library/bin"},
                                              {"pattern": "bin/*", "dest": "Library/bin"}]})  # fmt: skip
    staging = tmp_path / "staging"
    write(staging / "libtorch/lib/c10.dll")
    write(staging / "libtorch/bin/c10.dll")
    with pytest.raises(
        MegabuildError, match=r"same place in the prefix: bin/c10.dll and lib/c10.dll -> Library/bin/c10.dll"
    ):
        plan_install(load_spec(spec_path, "win-64"), "libtorch", staging, tmp_path / "prefix").run()


def _spec_with(tmp_path: Path, install_roots: object) -> Path:
    data = json.loads(REAL_SPEC.read_text(encoding="utf-8"))
    data["install_roots"] = install_roots
    # the bad tables here are about install_roots only: keep the rules the real spec has
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("install_roots", "message"),
    [
        ([], r"'install_roots' must be a non-empty object"),
        ({"win": []}, r"install_roots.win: must be a non-empty list"),
        ({"beos": [{"pattern": "lib/*", "dest": "x"}]}, r"install_roots.beos: not a platform family"),
        ({"win": ["lib/*"]}, r"install_roots.win\[0\]: must be an object"),
        ({"win": [{"pattern": "lib/*", "dest": "x", "to": "y"}]}, r"unknown keys \['to'\]"),
        ({"win": [{"pattern": "../lib/*", "dest": "x"}]}, r"escapes the torch/ tree"),
        ({"win": [{"pattern": "lib/*"}]}, r"'dest' must be a relative path"),
        ({"win": [{"pattern": "lib/*", "dest": "/Library/bin"}]}, r"'dest' must be a relative path"),
        ({"win": [{"pattern": "lib/*", "dest": "Library\\bin"}]}, r"'dest' must be a relative path"),
        ({"win": [{"pattern": "lib/*", "dest": "Library/*"}]}, r"'dest' must be a relative path"),
        ({"win": [{"pattern": "lib/*", "dest": "Library/../bin"}]}, r"must stay inside the prefix"),
        ({"win": [{"pattern": "lib/*", "dest": "C:/bin"}]}, r"must stay inside the prefix"),
        ({"win": [{"pattern": "lib/*", "dest": "x", "note": 1}]}, r"'note' must be a string"),
    ],
)
def test_bad_install_roots(tmp_path: Path, install_roots: object, message: str) -> None:
    path = _spec_with(tmp_path, install_roots)
    with pytest.raises(MegabuildError, match=message) as err:
        load_spec(path, "linux-64")  # validated whatever the target
    assert "\n" not in str(err.value)
