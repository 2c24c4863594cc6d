"""What the rendered recipe must give the real 2.13.0 build, for every ``.ci_support`` config.

These are the build blockers a fixture cannot show: host packages a Python-dependent compile
reaches, test-time compilers, and version pins that follow from upstream facts.
"""

from __future__ import annotations

from functools import cache

import pytest
from feedstock.configs import Config, list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config, render_top_level_requirements, spec_name
from megabuild.buildenv import cuda_arch_list

CONFIGS = list_configs(REPO)
CUDA_CONFIGS = [c for c in CONFIGS if set(c.get("cuda_compiler_version")) != {"None"}]


def _ids(config: Config) -> str:
    return config.name


@cache
def _outputs(name: str) -> list[RenderedOutput]:
    config = next(c for c in CONFIGS if c.name == name)
    return render_config(config.path, RECIPE)


@cache
def _top_host(name: str) -> tuple[str, ...]:
    config = next(c for c in CONFIGS if c.name == name)
    (reqs,) = render_top_level_requirements(config.path, RECIPE)
    return tuple(reqs.get("host", []))


def _cpu_twin(config: Config) -> Config:
    """The CPU config of the same platform and BLAS (what the CUDA config adds is its CUDA part)."""
    blas = set(config.get("blas_impl"))
    for other in CONFIGS:
        if (
            other.subdir == config.subdir
            and set(other.get("cuda_compiler_version")) == {"None"}
            and set(other.get("blas_impl")) == blas
        ):
            return other
    raise AssertionError(f"no CPU config for {config.name}")


def _hosts(config: Config) -> list[tuple[str, tuple[str, ...]]]:
    """The host requirements of the top level and of every output, with where they come from."""
    return [("top level", _top_host(config.name))] + [
        (o.dist, tuple(o.requirements.get("host", []))) for o in _outputs(config.name)
    ]


def _cuda_version(config: Config) -> str:
    (version,) = set(config.get("cuda_compiler_version"))
    return version


def test_there_are_cuda_configs() -> None:
    assert CUDA_CONFIGS, [c.name for c in CONFIGS]


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=_ids)
def test_pytorch_host_has_every_cuda_package_of_the_top_level_host(config: Config) -> None:
    """Each pytorch output rebuilds torch_python, whose sources include CUDA headers
    (cuda_profiler_api.h, nvToolsExt, cuDNN, NCCL, ...): the packages the top-level build had
    for CUDA must all be in the pytorch host, with the same constraints."""
    cuda_specs = set(_top_host(config.name)) - set(_top_host(_cpu_twin(config).name))
    cuda_names = {spec_name(s) for s in cuda_specs}
    assert "cuda-profiler-api" in cuda_names, sorted(cuda_names)
    pytorch = [o for o in _outputs(config.name) if o.name == "pytorch"]
    assert pytorch
    for out in pytorch:
        host = out.requirements.get("host", [])
        names = {spec_name(s) for s in host}
        missing = sorted(cuda_names - names)
        assert not missing, f"{out.dist}: host lacks {missing}"
        # the same constraints, e.g. nccl <2.29 (the rendered host also carries variant pins)
        constrained = sorted(s for s in cuda_specs if len(s.split()) > 1 and s not in host)
        assert not constrained, f"{out.dist}: host lacks {constrained}"


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=_ids)
def test_cmake_tests_of_cuda_builds_have_the_cuda_compiler(config: Config) -> None:
    """TorchConfig.cmake / Caffe2Config.cmake of a CUDA build call enable_language(CUDA):
    every output whose test runs cmake needs nvcc in its test environment."""
    checked = 0
    for out in _outputs(config.name):
        commands = out.test.get("commands", [])
        if not any(str(c).startswith("cmake ") for c in commands):
            continue
        requires = {spec_name(s) for s in out.test.get("requires", [])}
        assert any(n.startswith("cuda-nvcc") for n in requires), f"{out.dist}: {sorted(requires)}"
        checked += 1
    assert checked >= 2  # libtorch and every pytorch


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=_ids)
def test_nccl_pinned_below_2_29_for_cuda_12(config: Config) -> None:
    """NCCL 2.29 dropped the SMs below 7.0: capped wherever the config's architecture list
    (``megabuild env``'s) has one (CUDA 12.6), not for 13.0 or the Tegra build's 8.7."""
    arms = config.get("arm_variant_type") or [None]
    archs = cuda_arch_list(_cuda_version(config), config.subdir, arms[0])
    below_7 = any(float(a.split("+")[0]) < 7.0 for a in archs.split(";"))
    hosts = _hosts(config)
    for where, host in hosts:
        specs = [s for s in host if spec_name(s) == "nccl"]
        if not specs:
            continue
        pinned = "nccl <2.29" in specs
        assert pinned or not below_7, f"{where}: {specs} ({archs})"
        # CUDA 12.6 everywhere (one selector: its linux-aarch64 list has no SM below 7.0 either)
        assert pinned == (_cuda_version(config) == "12.6"), f"{where}: {specs}"


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_no_fmt_in_any_host(config: Config) -> None:
    """2.13 has no USE_SYSTEM_FMT switch (build.sh uses the bundled fmt): a conda fmt in the
    host would only put a second, different fmt on the include path."""
    assert not [(where, s) for where, host in _hosts(config) for s in host if spec_name(s) == "fmt"]


@pytest.mark.parametrize("config", CUDA_CONFIGS, ids=_ids)
def test_cudss_at_least_0_8(config: Config) -> None:
    """Patch 0009 calls cuDSS 0.8's matrix constructors (cudssDataType_t, offset type)."""
    hosts = _hosts(config)
    for where, host in hosts:
        specs = [s for s in host if spec_name(s) == "libcudss-dev"]
        assert not specs or "libcudss-dev >=0.8" in specs, f"{where}: {specs}"
