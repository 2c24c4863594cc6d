"""Several machines build one CFEP-03 upload: ``python -m feedstock build-all --shard I/N`` and the merge in
``cfep03_bundle.py --artifacts DIR --artifacts DIR``."""

from __future__ import annotations

import json
import random
import subprocess
import zipfile
from pathlib import Path

import pytest
from feedstock.configs import Config, list_configs
from feedstock.errors import UsageError
from feedstock.paths import REPO
from feedstock.shards import expected_hours, parse_shard, split
from support.fake_feedstock import SYNTHETIC_CONFIGS, FakeFeedstock
from support.tools import tool_argv

SYNTHETIC = [Config(n, Path(f"{n}.yaml"), v) for n, v in sorted(SYNTHETIC_CONFIGS.items())]


def _config_sets() -> list[list[Config]]:
    real = list_configs(REPO)
    return [SYNTHETIC, real] if real else [SYNTHETIC]


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 7, 12])
def test_shards_cover_every_config_exactly_once(count: int) -> None:
    for configs in _config_sets():
        shards = split(configs, count)
        assert len(shards) == count
        names = [c.name for shard in shards for c in shard]
        assert sorted(names) == sorted(c.name for c in configs)  # each once, none lost
        # the same split whatever order the machine listed its configs in
        shuffled = list(configs)
        random.Random(count).shuffle(shuffled)
        assert [[c.name for c in s] for s in split(shuffled, count)] == [[c.name for c in s] for s in shards]


def test_shards_are_balanced_by_expected_hours() -> None:
    configs = _config_sets()[-1]
    for count in (2, 3, 4):
        loads = [sum(expected_hours(c) for c in shard) for shard in split(configs, count)]
        # greedy longest-first: no shard exceeds another by more than one config's time
        assert max(loads) - min(loads) <= max(expected_hours(c) for c in configs)
    cuda = next(c for c in SYNTHETIC if "12.6" in c.name)
    cpu = next(c for c in SYNTHETIC if c.name.endswith("None"))
    assert expected_hours(cuda) > 3 * expected_hours(cpu)


@pytest.mark.parametrize("text", ["0/3", "4/3", "1/0", "a/b", "2", "1/2/3"])
def test_bad_shard_is_a_usage_error(text: str) -> None:
    with pytest.raises(UsageError, match="--shard"):
        parse_shard(text)


def _build_all(fs: FakeFeedstock, *args: str) -> subprocess.CompletedProcess[str]:
    argv = tool_argv("build-all", *args, "--build-locally", str(fs.root / "build-locally.py"))
    return subprocess.run(argv, cwd=fs.root, env=fs.env(), capture_output=True, text=True, timeout=600)


def test_build_all_builds_only_its_shard(tmp_path: Path, repo_root: Path) -> None:
    if not (repo_root / ".scripts" / "run_docker_build.sh").is_file():
        pytest.skip(".scripts/run_docker_build.sh not rendered yet")
    built: list[str] = []
    for i in (1, 2):
        (tmp_path / f"machine{i}").mkdir()
        fs = FakeFeedstock.create(tmp_path / f"machine{i}", repo_root, configs=SYNTHETIC_CONFIGS)
        proc = _build_all(fs, "--shard", f"{i}/2", "--no-compiler-cache")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"shard {i}/2: " in proc.stdout
        built += fs.built()
    assert sorted(built) == sorted(SYNTHETIC_CONFIGS)


# ------------------------------------------------------------------------------- CFEP-03 merge

CONFIGS = sorted(SYNTHETIC_CONFIGS)[:2]


def _machine(root: Path, configs: list[str], outputs: list[dict[str, object]]) -> Path:
    """A build_artifacts dir holding ``configs``' packages, done markers and logs."""
    artifacts = root / "build_artifacts"
    (artifacts / "linux-64").mkdir(parents=True)
    (artifacts / "build-locally-done").mkdir()
    (artifacts / "logs").mkdir()
    for config in configs:
        (artifacts / "build-locally-done" / f"{config}.json").write_text("{}")
        (artifacts / "logs" / f"{config}.log").write_text("BUILD START\n")
        for o in outputs:
            if o["config"] == config:
                name = f"{o['name']}-{o['version']}-{o['build_string']}.conda"
                (artifacts / "linux-64" / name).write_bytes(str(o).encode())
    return artifacts


@pytest.fixture
def outputs(tmp_path: Path) -> list[dict[str, object]]:
    return [
        {"config": c, "name": name, "version": "2.14.1", "build_string": f"b{i}_h1234567_0",
         "build_number": 0, "subdir": "linux-64"}
        for i, c in enumerate(CONFIGS) for name in ("libtorch", "pytorch")
    ]  # fmt: skip


def _bundle(
    tmp_path: Path, outputs: list[dict[str, object]], *dirs: Path
) -> subprocess.CompletedProcess[str]:
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps(outputs))
    argv = [*tool_argv("cfep03-bundle"), "--expected", str(expected)]
    for d in dirs:
        argv += ["--artifacts", str(d)]
    return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_two_machines_merge_into_one_bundle(tmp_path: Path, outputs: list[dict[str, object]]) -> None:
    one = _machine(tmp_path / "m1", CONFIGS[:1], outputs)
    two = _machine(tmp_path / "m2", CONFIGS[1:], outputs)
    proc = _bundle(tmp_path, outputs, one, two)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"present:    {len(outputs)}" in proc.stdout
    sums = (one / "cfep03" / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == len(outputs)
    with zipfile.ZipFile(one / "cfep03" / "build_logs.zip") as zf:
        assert sorted(zf.namelist()) == [f"machine1/{CONFIGS[0]}.log", f"machine2/{CONFIGS[1]}.log"]
    assert str(two / "linux-64") in proc.stdout  # upload commands name each file where it lies


def _one_line_refusal(proc: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_merge_refuses_a_config_built_nowhere(tmp_path: Path, outputs: list[dict[str, object]]) -> None:
    one = _machine(tmp_path / "m1", CONFIGS[:1], outputs)
    two = _machine(tmp_path / "m2", [], outputs)
    proc = _bundle(tmp_path, outputs, one, two)
    _one_line_refusal(proc, f"config {CONFIGS[1]} was built in none of the 2 dirs")
    assert not (one / "cfep03").exists()


def test_merge_refuses_a_config_built_twice(tmp_path: Path, outputs: list[dict[str, object]]) -> None:
    one = _machine(tmp_path / "m1", CONFIGS, outputs)
    two = _machine(tmp_path / "m2", CONFIGS[1:], outputs)
    _one_line_refusal(_bundle(tmp_path, outputs, one, two), f"config {CONFIGS[1]} was built in several dirs")
    assert not (one / "cfep03").exists()


def test_merge_refuses_a_package_in_two_dirs(tmp_path: Path, outputs: list[dict[str, object]]) -> None:
    one = _machine(tmp_path / "m1", CONFIGS[:1], outputs)
    two = _machine(tmp_path / "m2", CONFIGS[1:], outputs)
    stray = next((one / "linux-64").iterdir())
    (two / "linux-64" / stray.name).write_bytes(stray.read_bytes())
    _one_line_refusal(_bundle(tmp_path, outputs, one, two), f"linux-64/{stray.name} is in")
