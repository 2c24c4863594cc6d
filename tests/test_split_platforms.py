"""The split per target platform: ``{shlib}`` expansion, per-platform rules, --target-platform."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _split_util import MINI_SPEC, REAL_SPEC, run_cli, snapshot, write
from megabuild.errors import MegabuildError
from megabuild.split import spec as spec_module
from megabuild.split.spec import (
    expand_pattern,
    host_target_platform,
    load_spec,
    show_pattern,
)

LINUX = {"shlib": (".so", ".so.*")}
OSX = {"shlib": (".dylib", ".*.dylib")}


def _output(spec_platform: str, relpath: str) -> str | None:
    return load_spec(REAL_SPEC, spec_platform).classify(relpath).output


def test_expansion_and_display() -> None:
    assert expand_pattern("lib/libc10{shlib}", LINUX) == ["lib/libc10.so", "lib/libc10.so.*"]
    assert expand_pattern("lib/libc10{shlib}", OSX) == ["lib/libc10.dylib", "lib/libc10.*.dylib"]
    assert expand_pattern("include/ATen/**", OSX) == ["include/ATen/**"]
    assert show_pattern("lib/libc10{shlib}", OSX) == "lib/libc10{.dylib,.*.dylib}"
    assert show_pattern("lib/x{one}", {"one": (".a",)}) == "lib/x.a"


@pytest.mark.parametrize(
    ("platform", "path", "hit"),
    [
        ("linux-64", "lib/libtorch.so", True),
        ("linux-64", "lib/libtorch.so.2.13", True),
        ("linux-64", "lib/libtorch_cpu.so", False),
        ("linux-64", "lib/libtorch_python.so", False),
        ("linux-64", "lib/libtorch.dylib", False),
        ("osx-arm64", "lib/libtorch.dylib", True),
        ("osx-arm64", "lib/libtorch.2.13.dylib", True),
        ("osx-arm64", "lib/libtorch_python.dylib", False),
        ("osx-arm64", "lib/libtorch_cpu.dylib", False),
        ("osx-arm64", "lib/libtorch.so", False),
    ],
)
def test_shlib_never_spills_into_longer_names(platform: str, path: str, hit: bool) -> None:
    rule = next(r for r in load_spec(REAL_SPEC, platform).rules if r.pattern == "lib/libtorch{shlib}")
    assert rule.matches(path) is hit


def test_real_spec_per_platform() -> None:
    osx = load_spec(REAL_SPEC, "osx-arm64")
    py = osx.classify("lib/libtorch_python.dylib")
    assert py.output == "pytorch" and py.rules[0].prefix_link
    omp = osx.classify("lib/libomp.dylib")
    assert omp.output == "_dropped" and "llvm-openmp" in omp.rules[0].note
    assert (
        _output("osx-64", "include/omp.h") == "_dropped" and _output("linux-64", "include/omp.h") == "pytorch"
    )
    # each OpenMP runtime is dropped on its own platform only; elsewhere it is a surprise
    assert _output("linux-64", "lib/libomp.dylib") is None
    assert _output("osx-arm64", "lib/libgomp.so.1") is None
    assert _output("linux-aarch64", "lib/libgomp.so.1") == "_dropped"
    # a .dylib in a Linux build (or a .so in lib/ on osx) is unmatched in the strict lib/ area
    assert _output("linux-64", "lib/libc10.dylib") is None
    assert _output("osx-arm64", "lib/libc10.so") is None
    for platform in ("linux-64", "osx-arm64"):
        assert _output(platform, "include/THC/THCAtomics.cuh") == "libtorch"
        assert _output(platform, "include/torch/csrc/api/include/torch/torch.h") == "libtorch"
    rules = {r.pattern: r for r in osx.rules}
    assert rules["lib/libc10{shlib}"].shown == "lib/libc10{.dylib,.*.dylib}"
    assert "lib/libgomp*{shlib}" not in rules


def test_host_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for sys_platform, machine, expected in [
        ("linux", "x86_64", "linux-64"),
        ("linux", "aarch64", "linux-aarch64"),
        ("linux", "ppc64le", "linux-ppc64le"),
        ("darwin", "arm64", "osx-arm64"),
        ("darwin", "x86_64", "osx-64"),
    ]:
        monkeypatch.setattr(spec_module.sys, "platform", sys_platform)
        monkeypatch.setattr(spec_module.platform, "machine", lambda m=machine: m)
        assert host_target_platform() == expected
        assert load_spec(REAL_SPEC).target_platform == expected


def _osx_tree(root: Path) -> Path:
    for name in ("libc10", "libtorch", "libtorch_cpu", "libtorch_global_deps", "libshm", "libtorch_python"):
        write(root / f"lib/{name}.dylib", b"x", 0o755)
    write(root / "lib/libomp.dylib", b"omp", 0o644)
    write(root / "bin/torch_shm_manager", b"x", 0o755)
    write(root / "share/cmake/Torch/TorchConfig.cmake", b"cmake")
    for sub in ("ATen", "c10", "caffe2", "torch"):
        write(root / f"include/{sub}/x.h", b"//")
    write(root / "include/omp.h", b"//")
    write(root / "__init__.py", b"")
    return root


def test_stage_for_the_wrong_platform_fails_and_moves_nothing(tmp_path: Path) -> None:
    tree = _osx_tree(tmp_path / "torch")
    before = snapshot(tree)
    linux = ("--spec", REAL_SPEC, "--target-platform", "linux-64")
    res = run_cli("stage", *linux, "--tree", tree, "--staging", tmp_path / "staging")
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("megabuild: error: ")
    assert "match no rule for linux-64: lib/libc10.dylib" in res.stderr
    assert "lib/libc10{.so,.so.*} (libtorch)" in res.stderr  # required, and shown for the platform
    assert snapshot(tree) == before and not (tmp_path / "staging").exists()


def test_osx_stage_install_link_back(tmp_path: Path) -> None:
    tree, staging, prefix = _osx_tree(tmp_path / "torch"), tmp_path / "staging", tmp_path / "prefix"
    osx = ("--spec", REAL_SPEC, "--target-platform", "osx-arm64")
    res = run_cli("stage", *osx, "--tree", tree, "--staging", staging, "--linalg-variant", "nomagma")
    assert res.returncode == 0, res.stderr
    assert "split stage (CPU, osx-arm64)" in res.stdout
    assert (staging / "libtorch/lib/libc10.dylib").is_file()
    assert {p.name for p in (staging / "_dropped").rglob("*") if p.is_file()} == {"libomp.dylib", "omp.h"}
    assert (tree / "lib/libtorch_python.dylib").is_file()
    assert run_cli("verify", *osx, "--staging", staging).returncode == 0

    # an osx staging dir is not a Linux libtorch
    linux = ("--spec", REAL_SPEC, "--target-platform", "linux-64")
    res = run_cli("install", "libtorch", *linux, "--staging", staging, "--prefix", prefix)
    assert res.returncode == 1 and "does not give to libtorch: lib/libc10.dylib" in res.stderr
    assert not prefix.exists()
    res = run_cli("install", "libtorch", *osx, "--staging", staging, "--prefix", prefix)
    assert res.returncode == 0, res.stderr

    # pip install brings everything back, bundled libomp and omp.h included
    sp_dir = prefix / "lib/python3.12/site-packages"
    _osx_tree(sp_dir / "torch")
    flags = ("--drop-libtorch-headers", "--python-tag", "cpython-312")
    res = run_cli("link-back", *osx, "--prefix", prefix, "--sp-dir", sp_dir, *flags)
    assert res.returncode == 0, res.stderr
    torch = sp_dir / "torch"
    link = os.readlink(prefix / "lib/libtorch_python.dylib")
    assert link == "python3.12/site-packages/torch/lib/libtorch_python.dylib"
    assert not (torch / "lib/libtorch_python.dylib").is_symlink()
    assert (torch / "lib/libc10.dylib").resolve() == (prefix / "lib/libc10.dylib").resolve()
    assert not os.path.lexists(torch / "lib/libomp.dylib") and not os.path.lexists(torch / "include/omp.h")
    assert not os.path.lexists(torch / "include/torch") and (torch / "include").is_dir()


def _rule(pattern: str, **extra: object) -> dict[str, object]:
    return {"rules": [{"pattern": pattern, "output": "libtorch", **extra}]}


@pytest.mark.parametrize(
    ("change", "platform", "message"),
    [
        ({}, "win-64", r"has no rules for target platform win-64 \(its platforms: linux, osx\)"),
        ({}, "linux", "not a conda platform"),
        (_rule("lib/x{nope}"), "linux-64", r"unknown placeholder\(s\) \{nope\}"),
        (_rule("lib/x", platforms=["win"]), "linux-64", "not in the spec's 'platforms'"),
        (_rule("lib/x", platforms="osx"), "linux-64", "non-empty list"),
        ({"platforms": {"linux": {"shlib": [".so"]}, "osx": {"x": [".a"]}}}, "linux-64", "same placeholders"),
        ({"platforms": {"linux": {"shlib": ["/x"]}}}, "linux-64", "without '/'"),
        ({"platforms": []}, "linux-64", "'platforms' must be a non-empty object"),
    ],
)
def test_bad_platform_specs(tmp_path: Path, change: dict[str, object], platform: str, message: str) -> None:
    data = dict(MINI_SPEC, platforms={"linux": {"shlib": [".so", ".so.*"]}, "osx": {"shlib": [".dylib"]}})
    data.update(change)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MegabuildError, match=message) as info:
        load_spec(path, platform)
    assert "\n" not in str(info.value)


def test_rule_for_one_platform_of_a_family(tmp_path: Path) -> None:
    data = dict(MINI_SPEC, platforms={"linux": {"shlib": [".so"]}, "osx": {"shlib": [".dylib"]}})
    data["rules"] = [
        *MINI_SPEC["rules"],  # type: ignore[misc]
        {
            "pattern": "lib/libonly_arm{shlib}",
            "output": "_dropped",
            "platforms": ["linux-aarch64"],
            "note": "x",
        },
    ]
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    assert load_spec(path, "linux-aarch64").classify("lib/libonly_arm.so").output == "_dropped"
    assert load_spec(path, "linux-64").classify("lib/libonly_arm.so").unmatched
    assert load_spec(path, "osx-arm64").classify("lib/libonly_arm.dylib").unmatched


def test_cli_rejects_unknown_platform(tmp_path: Path) -> None:
    res = run_cli("verify", "--spec", REAL_SPEC, "--target-platform", "osx", "--staging", tmp_path)
    assert res.returncode == 1 and res.stderr.count("\n") == 1 and "not a conda platform" in res.stderr
