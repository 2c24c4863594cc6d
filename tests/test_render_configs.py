"""scripts/feedstock/configs.py: the .ci_support parser (strict, stdlib-only) and config aliases."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import yaml
from feedstock.configs import (
    Config,
    ConfigError,
    example_aliases,
    list_configs,
    load_config,
    parse_config_text,
    resolve_configs,
    short_alias,
)
from feedstock.paths import REPO

ROOT = REPO
FIXTURE = ROOT / "tests" / "projects" / "render_recipe"
CONFIGS_PY = ROOT / "scripts" / "feedstock" / "configs.py"

SMITHY_STYLE = """\
blas_impl:
- mkl
channel_targets:
- conda-forge main
cuda_compiler_version:
- '12.6'
docker_image:
- quay.io/condaforge/linux-anvil-x86_64:alma9
numpy:
- '2'
- '2'
pin_run_as_build:
  python:
    min_pin: x.x
    max_pin: x.x
python:
- 3.12.* *_cpython
- 3.13.* *_cp313
target_platform:
- linux-64
with_magma:
- 'false'
- 'true'
zip_keys:
- - python
  - numpy
- - cuda_compiler_version
  - docker_image
"""


def _config(name: str, **values: list[str]) -> Config:
    return Config(name, Path(f"{name}.yaml"), {k: list(v) for k, v in values.items()})


@pytest.fixture
def sample_configs() -> list[Config]:
    return [
        _config("a", target_platform=["linux-64"], cuda_compiler_version=["None"], blas_impl=["generic"]),
        _config("b", target_platform=["linux-64"], cuda_compiler_version=["None"], blas_impl=["mkl"]),
        _config("c", target_platform=["linux-64"], cuda_compiler_version=["12.6"], blas_impl=["mkl"]),
        _config("d", target_platform=["linux-64"], cuda_compiler_version=["13.0"], blas_impl=["mkl"]),
        _config("e", target_platform=["linux-aarch64"], cuda_compiler_version=["12.6"]),
        _config("f", target_platform=["osx-64"], blas_impl=["mkl"], python=["3.12.* *_cpython"]),
        _config("g", target_platform=["osx-64"], blas_impl=["mkl"], python=["3.1.* *_cpython"]),
    ]


def test_parses_smithy_subset_like_yaml() -> None:
    values, zip_keys, pins = parse_config_text(SMITHY_STYLE, "x.yaml")
    expected = yaml.safe_load(SMITHY_STYLE)
    assert zip_keys == expected.pop("zip_keys")
    assert pins == expected.pop("pin_run_as_build")
    assert values == {k: [str(v) for v in vs] for k, vs in expected.items()}
    assert values["with_magma"] == ["false", "true"]  # strings, as conda-build sees them


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("python: [3.12, 3.13]\n", "expected 'key:'"),
        ("python:\n  3.12\n", "expected '- value'"),
        ("python:\n- {a: 1}\n", "unsupported YAML value"),
        ("python:\n- &anchor 3.12\n", "unsupported YAML value"),
        ("python:\n- 'unterminated\n", "unterminated"),
        ("python:\n- 3.12\npython:\n- 3.13\n", "duplicate key"),
        ("python:\n", "has no values"),
        ("zip_keys:\n- python\n", "zip_keys"),
        ("a:\n- 1\n- 2\nb:\n- 1\nzip_keys:\n- - a\n  - b\n", "different lengths"),
        ("python:\n\t- 3.12\n", "tab"),
        ("- 3.12\n", "expected 'key:'"),
    ],
)
def test_rejects_anything_outside_the_subset(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_config_text(text, "bad.yaml")
    assert "bad.yaml:" in str(info.value)


def test_configs_module_needs_only_the_standard_library_and_the_model() -> None:
    """build-locally reads configs before anything else: no third-party import may stop it."""
    tree = ast.parse(CONFIGS_PY.read_text())
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    third_party = {name for name in imported if name not in sys.stdlib_module_names} - {"megabuild"}
    assert third_party == set(), f"configs.py imports {sorted(third_party)}"


def test_list_configs_skips_readme_and_migrations(tmp_path: Path) -> None:
    ci = tmp_path / ".ci_support"
    (ci / "migrations").mkdir(parents=True)
    (ci / "migrations" / "m.yaml").write_text("python:\n- 3.12\n")
    (ci / "README").write_text("not a config\n")
    (ci / "linux_64_x.yaml").write_text("target_platform:\n- linux-64\n")
    assert [c.name for c in list_configs(tmp_path)] == ["linux_64_x"]
    assert list_configs(tmp_path / "nowhere") == []


def test_platform_and_subdir_come_from_target_platform() -> None:
    config = load_config(FIXTURE / ".ci_support" / "osx_64_python3.12.____cpython.yaml")
    assert (config.subdir, config.platform) == ("osx-64", "osx_64")
    with pytest.raises(ConfigError, match="no target_platform"):
        _ = _config("x").subdir


@pytest.mark.parametrize(
    ("alias", "expected"),
    [
        ("a", ["a"]),
        ("a.yaml", ["a"]),
        ("linux_64", ["a", "b", "c", "d"]),
        ("linux_64_cpu", ["a", "b"]),
        ("linux_64_cuda12.6", ["c"]),
        ("linux_64_cuda126", ["c"]),
        ("linux_64_mkl", ["b", "c", "d"]),
        ("linux_64_mkl_cpu", ["b"]),
        ("linux_64_blas_impl=generic", ["a"]),
        ("linux_aarch64", ["e"]),
        ("linux_aarch64_generic", ["e"]),  # no blas_impl key counts as generic
        ("osx_64_py3.12", ["f"]),
        ("osx_64_py3.1", ["g"]),  # 3.1 does not match 3.12
        ("osx_64_cpu", ["f", "g"]),  # no cuda_compiler_version key counts as cpu
    ],
)
def test_resolve_configs(sample_configs: list[Config], alias: str, expected: list[str]) -> None:
    assert [c.name for c in resolve_configs(alias, sample_configs)] == expected


@pytest.mark.parametrize("alias", ["linux_64_cuda11.8", "win_64", "linux_64_foo", "nonsense", "osx_arm64"])
def test_unknown_config_counts_configs_and_lists_aliases(sample_configs: list[Config], alias: str) -> None:
    with pytest.raises(ConfigError) as info:
        resolve_configs(alias, sample_configs)
    message = str(info.value)
    assert "\n" not in message
    assert f"unknown config {alias!r}" in message
    assert "7 configs in .ci_support/" in message
    assert "aliases: linux_64, linux_aarch64, osx_64, " in message
    assert "linux_64_cuda12.6" in message


def test_unknown_config_caps_a_long_list_of_aliases() -> None:
    # conda-smithy's real config names are ~150 characters; 40 of them once made a 6,000-character line.
    configs = [
        _config(f"linux_64_{'x' * 140}{n}", target_platform=["linux-64"], python=[f"3.{n}.* *_cpython"])
        for n in range(10, 50)
    ]
    with pytest.raises(ConfigError) as info:
        resolve_configs("nosuch", configs)
    message = str(info.value)
    assert "40 configs in .ci_support/" in message
    assert message.endswith(", ... (and 33 more)")
    assert "x" * 140 not in message
    assert len(message) < 400


def test_key_value_tokens_may_contain_underscores(sample_configs: list[Config]) -> None:
    configs = [*sample_configs, _config("h", target_platform=["linux-64"], c_stdlib_version=["2.28"])]
    assert [c.name for c in resolve_configs("linux_64_c_stdlib_version=2.28", configs)] == ["h"]


def test_short_aliases_are_unique_and_resolve_back(sample_configs: list[Config]) -> None:
    aliases = {c.name: short_alias(c, sample_configs) for c in sample_configs}
    assert aliases == {
        "a": "linux_64_cpu_generic",
        "b": "linux_64_cpu_mkl",
        "c": "linux_64_cuda12.6",
        "d": "linux_64_cuda13.0",
        "e": "linux_aarch64",
        "f": "osx_64_cpu_mkl_py3.12",
        "g": "osx_64_cpu_mkl_py3.1",
    }
    for name, alias in aliases.items():
        assert [c.name for c in resolve_configs(alias, sample_configs)] == [name]
    assert example_aliases(sample_configs)[:3] == ["linux_64", "linux_aarch64", "osx_64"]


def test_real_ci_support_configs_parse_and_have_unique_aliases() -> None:
    configs = list_configs(ROOT)
    if not configs:
        pytest.skip(".ci_support/ has no configs yet")
    for config in configs:
        expected = yaml.safe_load(config.path.read_text())
        assert config.zip_keys == expected.get("zip_keys", [])
        assert config.subdir in ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64")
    aliases = [short_alias(c, configs) for c in configs]
    assert len(set(aliases)) == len(aliases)


def test_carried_migrations_are_applied_to_the_configs() -> None:
    """Each .ci_support/migrations file shows in the configs (else the rerender is stale).

    A replacing migration (pybind11_abi11) sets its keys' values in every config that uses the key;
    a ``key_add`` migration (python314) adds its values to the matrix.
    """
    configs = list_configs(ROOT)
    if not configs:
        pytest.skip(".ci_support/ has no configs yet")
    for path in sorted((ROOT / ".ci_support" / "migrations").glob("*.yaml")):
        migration = yaml.safe_load(path.read_text()) or {}
        adds = (migration.get("__migrator") or {}).get("operation") == "key_add"
        for key, values in migration.items():
            if key in ("__migrator", "migrator_ts", "zip_keys") or not isinstance(values, list):
                continue
            want = [str(v) for v in values]
            users = [c for c in configs if key in c.values]
            if adds:
                present = {v for c in users for v in c.get(key)}
                if users:
                    assert set(want) <= present, f"{path.name}: {key} {want} missing from every config"
            else:
                for config in users:
                    have = config.get(key)
                    assert have == want, f"{config.name}: {key} {have}, {path.name} says {want}"


def test_the_tegra_config_is_the_models() -> None:
    """linux_aarch64_tegra selects the one Tegra config, with megabuild.model's facts (CUDA, glibc);
    the alias tokens are the model's arm variants (configs.py cannot import recipe/)."""
    from feedstock.configs import ARM_VARIANTS
    from megabuild import model

    assert tuple(v.name for v in model.ARM_VARIANTS) == ARM_VARIANTS
    configs = list_configs(ROOT)
    aarch64 = [c for c in configs if c.subdir == "linux-aarch64"]
    if not aarch64:
        pytest.skip(".ci_support/ has no linux-aarch64 configs yet")
    (tegra,) = resolve_configs("linux_aarch64_tegra", configs)
    assert short_alias(tegra, configs) == "linux_aarch64_tegra"
    assert tegra.get("arm_variant_type") == [model.TEGRA.name]
    assert tegra.get("cuda_compiler_version") == list(model.TEGRA.cuda_versions)
    assert tegra.get("c_stdlib_version") == [model.TEGRA.c_stdlib_version]
    sbsa = resolve_configs("linux_aarch64_sbsa", configs)
    assert sorted(c.name for c in sbsa) == sorted(c.name for c in aarch64 if c is not tegra)
