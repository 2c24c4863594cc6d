"""cuFile (GPUDirect Storage) on every Linux CUDA config, as conda-forge's pytorch and upstream's
Linux CUDA wheels build it: ``USE_CUFILE=1`` from ``megabuild env`` and ``libcufile-dev`` in the
host of every step that compiles or links CUDA code (the top level, libtorch, each pytorch), so
that libtorch_cuda's ``libcufile.so.0`` resolves in the user's env (libcufile-dev's run export).
Windows has no libcufile: ``USE_CUFILE=0`` and no requirement. CPU configs have neither.

The real 2.14.1 Linux CUDA wheel's libtorch_cuda.so needs libcufile.so.0 (checked when the wheel
is in the shared wheel cache; tests/test_binary_check_wheels.py explains that finding of the
split wheel as a CUDA library conda-forge's packages provide).
"""

from __future__ import annotations

import zipfile
from functools import cache

import pytest
from feedstock import parity
from feedstock.configs import Config, list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import render_config, render_top_level_requirements, spec_name
from megabuild.binaries.elf import read_elf
from megabuild.buildenv import switches
from megabuild.model import LIBTORCH, PYTORCH

CONFIGS = list_configs(REPO)
CUFILE_DEV = "libcufile-dev"


def _ids(config: Config) -> str:
    return config.name


def _cuda(config: Config) -> str | None:
    (cuda,) = set(config.get("cuda_compiler_version") or ["None"])
    return None if cuda == "None" else cuda


@cache
def _hosts(config_name: str) -> dict[str, list[tuple[str, ...]]]:
    """The host requirements of the top level and of every libtorch and pytorch output."""
    config = next(c for c in CONFIGS if c.name == config_name)
    (top,) = render_top_level_requirements(config.path, RECIPE)
    hosts: dict[str, list[tuple[str, ...]]] = {"libtorch-split": [tuple(top.get("host", []))]}
    for out in render_config(config.path, RECIPE):
        if out.name in (LIBTORCH, PYTORCH):
            hosts.setdefault(out.name, []).append(tuple(out.requirements.get("host", [])))
    return hosts


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_cufile_on_every_linux_cuda_config(config: Config) -> None:
    cuda = _cuda(config)
    linux_cuda = cuda is not None and config.subdir.startswith("linux-")
    for target in parity.build_targets([config]):
        env = switches(target)
        assert env.get("USE_CUFILE", "0") == ("1" if linux_cuda else "0"), config.name
    hosts = _hosts(config.name)
    assert set(hosts) == {"libtorch-split", LIBTORCH, PYTORCH}
    for where, envs in hosts.items():
        for host in envs:
            has = [s for s in host if spec_name(s) == CUFILE_DEV]
            assert bool(has) is linux_cuda, (config.name, where, has)


def test_the_configs_hold_linux_cuda_and_windows_cuda() -> None:
    """Both sides of the rule above are exercised by the committed configs."""
    kinds = {(c.subdir.split("-")[0], _cuda(c) is not None) for c in CONFIGS}
    assert {("linux", True), ("win", True), ("linux", False)} <= kinds


def test_the_real_linux_cuda_wheel_links_libcufile() -> None:
    """Parity: upstream's Linux CUDA libtorch_cuda.so needs libcufile (USE_CUFILE=1 there too)."""
    from test_binary_check_wheels import cached_wheel

    wheel = cached_wheel("linux-64")
    with zipfile.ZipFile(wheel) as zf:
        elf = read_elf(zf.read("torch/lib/libtorch_cuda.so"))
    assert any(name.startswith("libcufile.so") for name in elf.needed), elf.needed
