"""The harness records an output's files that hold the host prefix as conda-build does
(``conda_build.build.get_files_with_prefix``): every regular file in which the prefix occurs gets
``prefix_placeholder`` (the prefix itself) and ``file_mode`` ``text``, or ``binary`` when the file
holds a NUL byte; the installer rewrites them to the target prefix (binary ones NUL-padded in
place, as conda does). The real conda-build recorded libtorch's ``include/ATen/Config.h`` (its
build settings name the host prefix) that way."""

from __future__ import annotations

import json
from pathlib import Path

from feedstock.conda_build_standin.packaging import install_package_files, package_from_prefix, write_info

RECORD = {"name": "libtorch", "version": "2.14.1", "build": "cpu_generic_h0_0", "build_number": 0,
          "depends": [], "subdir": "linux-64"}  # fmt: skip


def _prefix(tmp_path: Path) -> Path:
    prefix = tmp_path / "_h_env_placehold_placehold_placehold_placehold_placehold"
    (prefix / "include" / "ATen").mkdir(parents=True)
    (prefix / "lib").mkdir()
    settings = f"CXX_FLAGS=-isystem {prefix}/include -O2"
    (prefix / "include" / "ATen" / "Config.h").write_text(f'#define BUILD_SETTINGS "{settings}"\n')
    (prefix / "lib" / "libsettings.a").write_bytes(b"\x00head\x00" + settings.encode() + b"\x00tail")
    (prefix / "include" / "plain.h").write_text("#define NOTHING 1\n")
    (prefix / "lib" / "link.h").symlink_to(prefix / "include" / "plain.h")
    (prefix / "lib" / "mod.cpython-312.pyc").write_bytes(b"\x00code\x00" + str(prefix).encode())
    return prefix


FILES = [
    "include/ATen/Config.h",
    "lib/libsettings.a",
    "include/plain.h",
    "lib/link.h",
    "lib/mod.cpython-312.pyc",
]


def test_files_holding_the_host_prefix_get_its_placeholder_and_mode(tmp_path: Path) -> None:
    prefix = _prefix(tmp_path)
    pkg = package_from_prefix(RECORD, prefix, FILES, tmp_path / "pkg")
    write_info(pkg)
    paths = {p["_path"]: p for p in json.loads((pkg.root / "info" / "paths.json").read_text())["paths"]}
    assert paths["include/ATen/Config.h"]["prefix_placeholder"] == str(prefix)
    assert paths["include/ATen/Config.h"]["file_mode"] == "text"
    assert paths["lib/libsettings.a"]["prefix_placeholder"] == str(prefix)
    assert paths["lib/libsettings.a"]["file_mode"] == "binary"
    assert "prefix_placeholder" not in paths["include/plain.h"]
    assert "prefix_placeholder" not in paths["lib/link.h"]
    assert "prefix_placeholder" not in paths["lib/mod.cpython-312.pyc"]  # conda-build skips .pyc


def test_the_installer_rewrites_both_modes_to_the_target(tmp_path: Path) -> None:
    prefix = _prefix(tmp_path)
    pkg = package_from_prefix(RECORD, prefix, FILES, tmp_path / "pkg")
    target = tmp_path / "env"
    install_package_files(pkg, target)
    assert f"-isystem {target}/include" in (target / "include" / "ATen" / "Config.h").read_text()
    data = (target / "lib" / "libsettings.a").read_bytes()
    assert len(data) == (prefix / "lib" / "libsettings.a").stat().st_size
    assert f"-isystem {target}/include -O2".encode() + b"\x00" in data and str(prefix).encode() not in data


def test_binary_files_are_left_alone_when_the_output_says_so(tmp_path: Path) -> None:
    """``build/detect_binary_files_with_prefix: false`` (libtorch's and pytorch's outputs): the
    real conda-build recorded libtorch's Config.h but not libtorch_cpu.so, whose build settings
    hold the prefix too."""
    prefix = _prefix(tmp_path)
    pkg = package_from_prefix(RECORD, prefix, FILES, tmp_path / "pkg", binary_prefix=False)
    assert set(pkg.placeholders) == {"include/ATen/Config.h"} and not pkg.binary
