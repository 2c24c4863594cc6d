"""Breaking the recipe's solver-relevant lines must break a solver scenario.

Each test copies recipe/ and .ci_support/ to tmp_path, applies one mutation to the copy's
meta.yaml, renders only the linux-64 configs the scenario needs (two Pythons, to stay fast) and
checks the scenario against the control (the unmutated copy, rendered once).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from feedstock.channel import Channel
from feedstock.commands import solver_check
from feedstock.paths import REPO

FEEDSTOCK = Path(os.environ.get("SOLVER_CHECK_FEEDSTOCK", REPO))
KEEP_PYTHONS = ("3.12", "3.13")


@dataclasses.dataclass(frozen=True)
class Mutation:
    id: str
    pattern: str  # regex (MULTILINE) that must match meta.yaml at least once
    replacement: str
    configs: tuple[str, ...]  # aliases to render
    scenarios: tuple[str, ...] = ()  # scenario keys that must go wrong
    order_check: bool = False  # preference_problems must report something


MUTATIONS = [
    Mutation(
        "no-cuda-build-offset",
        r"^\{% set build = build \+ 200 %\}$",
        "",
        ("linux_64_cpu_mkl", "linux_64_cuda12.6_mkl"),
        ("gpu",),
        order_check=True,
    ),
    Mutation(
        "no-mkl-build-offset",
        r"^\{% set build = build \+ 100 %\}$",
        "",
        ("linux_64_cpu",),
        ("cpu",),
        order_check=True,
    ),
    # rattler happens to prefer the magma variant on a tie; other solvers need not: the order check
    Mutation(
        "no-magma-build-offset",
        r"^\{% set magma_build_offset = 50 %\}$",
        "{% set magma_build_offset = 0 %}",
        ("linux_64_cuda12.6_mkl",),
        order_check=True,
    ),
    Mutation(
        "no-libmagma-run-constrained",
        r"^ *- libmagma <0\.0a0 .*\n",
        "",
        ("linux_64_cuda12.6_mkl",),
        ("nomagma-with-libmagma",),
    ),
    Mutation(
        "no-__cuda-run-dependency",
        r"^ *- __cuda +# .*\n",
        "",
        ("linux_64_cpu_mkl", "linux_64_cuda12.6_mkl"),
        ("cpu", "gpu-meta-no-gpu"),
    ),
    # without the arm-variant build requirement nothing ties a build to its CUDA packages' variant
    Mutation(
        "no-arm-variant-requirement",
        r"^ *- arm-variant \* \{\{ arm_variant_type \}\} .*\n",
        "",
        ("linux_aarch64_tegra", "linux_aarch64_cuda12.6"),
        ("jetson-no-sbsa-build", "sbsa-server-no-tegra-build"),
    ),
]


# Only the values under `python:`; other keys have values like `3.9.* *netlib`.
_PYTHON_BLOCK = re.compile(r"^python:\n((?:- .*\n)+)", re.MULTILINE)
_PYTHON_VALUE = re.compile(r"^- '?(3\.\d+)\.\*.*\n", re.MULTILINE)


def _keep_some_pythons(block: re.Match[str]) -> str:
    values = _PYTHON_VALUE.sub(lambda m: m.group(0) if m.group(1) in KEEP_PYTHONS else "", block.group(1))
    return "python:\n" + values


def copy_feedstock(dest: Path) -> Path:
    shutil.copytree(FEEDSTOCK / "recipe", dest / "recipe", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(FEEDSTOCK / ".ci_support", dest / ".ci_support")
    if (FEEDSTOCK / "conda-forge.yml").is_file():
        shutil.copy2(FEEDSTOCK / "conda-forge.yml", dest / "conda-forge.yml")
    for config in (dest / ".ci_support").glob("*.yaml"):
        text = config.read_text()
        zipped = re.search(r"^zip_keys:\n(?:[ -].*\n)*", text, re.MULTILINE)
        if zipped and re.search(r"^\s*-+ python$", zipped.group(0), re.MULTILINE):
            continue  # python zipped with other keys: keep every value
        trimmed = _PYTHON_BLOCK.sub(_keep_some_pythons, text)
        if re.search(r"^python:\n(?!- )", trimmed, re.MULTILINE):
            config.unlink()  # a one-Python (osx) config of a Python not kept
        else:
            config.write_text(trimmed)
    return dest


def solve_scenarios(feedstock: Path, mutation: Mutation) -> tuple[list[solver_check.Outcome], list[str]]:
    records = solver_check.build_channel(feedstock, feedstock / "channel", mutation.configs)
    wanted = [s for s in solver_check.scenarios(records) if s.key in mutation.scenarios]
    assert sorted(s.key for s in wanted) == sorted(mutation.scenarios), "scenario missing from the channel"
    return solver_check.run(Channel(feedstock / "channel"), wanted), solver_check.preference_problems(records)


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> tuple[Channel, dict[str, list[dict[str, Any]]]]:
    """The unmutated copy, rendered once for every config the mutations use."""
    try:
        import feedstock.render
    except ImportError as exc:
        pytest.skip(f"render library not available: {exc}")
    if not list((FEEDSTOCK / ".ci_support").glob("*.yaml")):
        pytest.skip(f"no .ci_support configs in {FEEDSTOCK}")
    feedstock = copy_feedstock(tmp_path_factory.mktemp("control"))
    configs = sorted({c for m in MUTATIONS for c in m.configs})
    records = solver_check.build_channel(feedstock, feedstock / "channel", configs)
    return Channel(feedstock / "channel"), records


def test_control_build_number_order(control: tuple[Channel, dict[str, list[dict[str, Any]]]]) -> None:
    assert solver_check.preference_problems(control[1]) == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=[m.id for m in MUTATIONS])
def test_mutation_is_caught(
    mutation: Mutation, control: tuple[Channel, dict[str, list[dict[str, Any]]]], tmp_path: Path
) -> None:
    channel, records = control
    outcomes = solver_check.run(
        channel, [s for s in solver_check.scenarios(records) if s.key in mutation.scenarios]
    )
    assert [o.problems for o in outcomes] == [[]] * len(outcomes), "control:\n" + solver_check.table(outcomes)

    mutated = copy_feedstock(tmp_path / "mutated")
    meta = mutated / "recipe" / "meta.yaml"
    text, count = re.subn(mutation.pattern, mutation.replacement, meta.read_text(), flags=re.MULTILINE)
    assert count, f"{mutation.id}: {mutation.pattern!r} not found in meta.yaml; update this test"
    meta.write_text(text)

    outcomes, order = solve_scenarios(mutated, mutation)
    unchanged = [o.scenario.key for o in outcomes if not o.problems]
    assert not unchanged, f"{mutation.id} went unnoticed by {unchanged}:\n" + solver_check.table(outcomes)
    if mutation.order_check:
        assert order, f"{mutation.id}: build-number order check reported nothing"
