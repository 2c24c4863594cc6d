"""The split spec: pattern semantics and validation of the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _split_util import MINI_SPEC, REAL_SPEC, run_cli, write_spec
from megabuild.errors import MegabuildError
from megabuild.split.spec import DEFAULT_SPEC, compile_pattern, load_spec


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("lib/libc10.so*", "lib/libc10.so", True),
        ("lib/libc10.so*", "lib/libc10.so.2.13", True),
        ("lib/libc10.so*", "lib/libc10_cuda.so", False),
        ("lib/*.so", "lib/sub/x.so", False),
        ("include/ATen/**", "include/ATen/a.h", True),
        ("include/ATen/**", "include/ATen/native/cpu/a.h", True),
        ("include/ATen/**", "include/ATen", False),
        ("include/ATen/**", "include/ATenX/a.h", False),
        ("**/__pycache__/*.pyc", "__pycache__/a.pyc", True),
        ("**/__pycache__/*.pyc", "a/b/__pycache__/a.pyc", True),
        ("bin/test_?", "bin/test_a", True),
        ("bin/test_[!a]", "bin/test_a", False),
        ("lib/lib+x.so", "lib/lib+x.so", True),
    ],
)
def test_pattern_semantics(pattern: str, path: str, hit: bool) -> None:
    assert (compile_pattern(pattern).match(path) is not None) is hit


def test_real_spec_is_the_default_and_well_formed() -> None:
    assert DEFAULT_SPEC == REAL_SPEC
    spec = load_spec(target_platform="linux-64")
    outputs = {rule.output for rule in spec.rules}
    assert outputs == {"libtorch", "libtorch-cuda-linalg", "pytorch", "_dropped"}
    assert spec.variants("libtorch-cuda-linalg") == ("magma", "nomagma")
    required_cpu = {r.pattern for r in spec.rules if r.required_for(cuda=False)}
    required_cuda = {r.pattern for r in spec.rules if r.required_for(cuda=True)}
    assert "lib/libtorch_cpu{shlib}" in required_cpu and "lib/libtorch_python{shlib}" in required_cpu
    assert {"lib/libtorch_cuda{shlib}", "lib/libtorch_cuda_linalg{shlib}", "include/THC/**"} <= (
        required_cuda - required_cpu
    )
    assert [r.pattern for r in spec.rules if r.prefix_link] == ["lib/libtorch_python{shlib}"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"version": 2}, "unsupported version"),
        ({"default_output": "nope"}, "not a declared output"),
        ({"rules": [{"pattern": "lib/x", "output": "nope"}]}, "unknown output 'nope'"),
        ({"rules": [{"pattern": "lib/x", "output": "libtorch", "required": "sometimes"}]}, "'required'"),
        ({"rules": [{"pattern": "lib/x", "output": "_dropped"}]}, "must say why"),
        ({"rules": [{"pattern": "lib/x", "output": "libtorch", "prefix_link": True}]}, "prefix_link"),
        ({"rules": [{"pattern": "lib/x", "output": "libtorch", "typo": 1}]}, "unknown keys"),
        ({"rules": [{"pattern": "..", "output": "libtorch"}]}, "escapes"),
        ({"rules": [{"pattern": "C:/x", "output": "libtorch"}]}, "absolute"),
        ({"strict_areas": ["/lib/**"]}, "absolute"),
    ],
)
def test_bad_specs(tmp_path: Path, change: dict[str, object], message: str) -> None:
    data = dict(MINI_SPEC, **change)
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MegabuildError, match=message) as info:
        load_spec(path)
    assert "\n" not in str(info.value)


def test_bad_json_is_one_line_on_the_cli(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = run_cli("verify", "--spec", bad, "--staging", tmp_path)
    assert res.returncode == 1 and res.stderr.startswith("megabuild: error: ") and res.stderr.count("\n") == 1
    res = run_cli("verify", "--spec", write_spec(tmp_path / "ok.json"), "--staging", tmp_path / "missing")
    assert res.returncode == 1 and "not a directory" in res.stderr


def test_classify_has_one_result_type(tmp_path: Path) -> None:
    spec = load_spec(
        write_spec(
            tmp_path / "spec.json",
            extra_rules=[{"pattern": "lib/libtorch_cpu.so", "output": "pytorch"}],
        ),
        "linux-64",
    )
    ruled = spec.classify("lib/libc10.so")
    assert (ruled.output, [r.pattern for r in ruled.rules]) == ("libtorch", ["lib/libc10.so*"])
    default = spec.classify("nn/modules/linear.py")
    assert (default.output, default.rules, default.conflict, default.unmatched) == (
        "pytorch",
        (),
        False,
        False,
    )
    clash = spec.classify("lib/libtorch_cpu.so")
    assert clash.output is None and clash.conflict and not clash.unmatched
    assert sorted(r.output for r in clash.rules) == ["libtorch", "pytorch"]
    stray = spec.classify("lib/libstray.so")
    assert stray.output is None and stray.unmatched and not stray.conflict


def test_outputs_are_typed() -> None:
    spec = load_spec(REAL_SPEC, "linux-64")
    linalg = spec.outputs["libtorch-cuda-linalg"]
    assert (linalg.name, linalg.variants) == ("libtorch-cuda-linalg", ("magma", "nomagma"))
    assert "staged as libtorch-cuda-linalg-<variant>" in linalg.note
    assert spec.outputs["libtorch"].variants == ()
