"""Every output of every config runs the binary checks in its rendered test section, with the
config's own values (c_stdlib_version, CUDA version, BLAS), and has what they need at test time:
the megabuild package among the test files (conda-build copies ``test: files`` from the recipe
into the test's working directory, where ``python -m megabuild`` finds it), a Python, and
cuobjdump on CUDA. Rendered with the feedstock's renderer (scripts/feedstock/render.py); the
cross-checks compare it with conda-build's render of every config."""

from __future__ import annotations

import argparse
import shlex
from functools import cache

import pytest
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config
from megabuild.binaries import cli as binaries_cli
from megabuild.buildenv.cuda import cuda_arch_list
from megabuild.model import LIBTORCH, LINALG, PYTORCH

CONFIGS = list_configs(REPO)


@cache
def outputs(name: str) -> tuple[RenderedOutput, ...]:
    config = next(c for c in CONFIGS if c.name == name)
    return tuple(render_config(config.path, RECIPE))


def commands(output: RenderedOutput, tool: str) -> list[str]:
    return [c for c in output.test.get("commands", []) if f"-m megabuild {tool} " in c]


@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_every_output_checks_its_binaries(config: str) -> None:
    checked = [o for o in outputs(config) if o.name in (LIBTORCH, LINALG, PYTORCH)]
    assert {o.name for o in checked} >= {LIBTORCH, PYTORCH}
    for output in checked:
        variant = output.variant
        found = commands(output, "check-binaries")
        assert len(found) == 1, (output.name, found)
        line = found[0]
        assert f"--package {output.name} " in line + " "
        assert "megabuild/" in output.test.get("files", []), output.name
        assert any(
            r.split()[0] == "python"
            for r in output.test.get("requires", []) + (["python"] if output.name == PYTORCH else [])
        )
        if output.subdir.startswith("linux"):
            assert f"--c-stdlib-version {variant['c_stdlib_version']}" in line
        cuda = variant.get("cuda_compiler_version", "None")
        if output.name == LIBTORCH and cuda != "None" and not output.subdir.startswith("osx"):
            assert f"--cuda-version {cuda}" in line
            assert "cuda-cuobjdump" in [r.split()[0] for r in output.test["requires"]]
        if output.name == PYTORCH:
            (config_check,) = commands(output, "check-torch-config")
            assert f"--blas {variant['blas_impl']} --cuda-version {cuda}" in config_check


@pytest.mark.parametrize("config", [c.name for c in CONFIGS])
def test_every_rendered_architecture_lookup_finds_a_list(config: str) -> None:
    """Each rendered check-binaries command that names a CUDA version gets its list, with the arm
    variant where the platform has one (Tegra's differs from SBSA's); without it the Tegra config's
    test stopped at 'no CUDA architecture list for CUDA 12.9 on linux-aarch64'."""
    parser = argparse.ArgumentParser()
    binaries_cli.register(parser.add_subparsers())
    for output in outputs(config):
        for line in commands(output, "check-binaries"):
            if "--cuda-version" not in line:
                continue
            args = parser.parse_args(shlex.split(line.replace("$PREFIX", "/p").replace("%PREFIX%", "/p"))[3:])
            cuda = output.variant["cuda_compiler_version"]
            arm_variant = output.variant.get("arm_variant_type")
            assert args.arm_variant == (None if cuda == "None" else arm_variant), (output.name, line)
            listed = binaries_cli._arch_list(args, output.subdir)
            assert listed == (None if cuda == "None" else cuda_arch_list(cuda, output.subdir, arm_variant))
