"""The real recipe (recipe/meta.yaml + .ci_support/*.yaml) rendered like conda-build would.

Checks the output set, build strings/numbers and the pins between outputs for every config, plus
the recipe hygiene conda-smithy's linter asks for. Set RENDER_TEST_FEEDSTOCK to check another
checkout. Where conda_build is importable, outputs are also compared with conda_build.api.render.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml
from feedstock.configs import Config, list_configs
from feedstock.paths import REPO, TESTS
from feedstock.render import (
    RenderedOutput,
    RenderError,
    conda_glob_match,
    mask_hash,
    render_config,
    split_selector,
)
from megabuild.model import PYTORCH
from support.cross_checks import import_tool

FEEDSTOCK = Path(os.environ.get("RENDER_TEST_FEEDSTOCK", REPO))
RECIPE = FEEDSTOCK / "recipe"
META = RECIPE / "meta.yaml"
CONFIGS = list_configs(FEEDSTOCK) if META.is_file() else []
PYTHONS_MEGABUILD = ["3.10", "3.11", "3.12", "3.13", "3.14", "3.14t"]  # 3.14t: python314t migration

pytestmark = pytest.mark.skipif(
    not CONFIGS, reason=f"no recipe/meta.yaml or .ci_support configs in {FEEDSTOCK}"
)


def _ids(config: Config) -> str:
    return config.name


@cache
def rendered(name: str) -> list[RenderedOutput]:
    config = next(c for c in CONFIGS if c.name == name)
    return render_config(config.path, RECIPE)


def _single(config: Config, key: str) -> str:
    values = sorted(set(config.get(key)))
    assert len(values) == 1, f"{config.name}: expected one {key}, got {values}"
    return values[0]


def _is_cuda(config: Config) -> bool:
    return _single(config, "cuda_compiler_version") != "None"


def _base_build_number() -> int:
    match = re.search(r"{%\s*set\s+build\s*=\s*(\d+)\s*%}", META.read_text())
    assert match, "meta.yaml must `{% set build = N %}`"
    return int(match.group(1))


def _tags(config: Config) -> tuple[str, str, int]:
    cuda = _single(config, "cuda_compiler_version")
    blas = _single(config, "blas_impl") if config.get("blas_impl") else "generic"
    tag = "cpu" if cuda == "None" else "cuda" + cuda.replace(".", "")
    number = _base_build_number() + (200 if cuda != "None" else 0) + (100 if blas == "mkl" else 0)
    return tag, blas, number


def _group(outputs: list[RenderedOutput]) -> dict[str, list[RenderedOutput]]:
    grouped: dict[str, list[RenderedOutput]] = {}
    for out in outputs:
        grouped.setdefault(out.name, []).append(out)
    return grouped


def _one(outputs: dict[str, list[RenderedOutput]], name: str) -> RenderedOutput:
    found = outputs.get(name, [])
    assert len(found) == 1, f"expected one {name}, got {[o.build_string for o in found]}"
    return found[0]


def _spec(specs: list[str], name: str) -> list[str]:
    return [s for s in specs if s.split()[0] == name]


def _matches(spec: str, out: RenderedOutput) -> bool:
    """Does a ``name version build`` spec (globs allowed) match an output?"""
    parts = spec.split()
    if parts[0] != out.name:
        return False
    if len(parts) > 1 and not conda_glob_match(parts[1], out.version):
        return False
    return len(parts) < 3 or conda_glob_match(parts[2], out.build_string)


# -- the .ci_support configs -------------------------------------------------------------------


def test_no_config_file_name_contains_magma() -> None:
    assert [c.name for c in CONFIGS if "magma" in c.name.lower()] == []


def test_every_config_is_a_megabuild_with_every_python() -> None:
    """One CI job per config builds libtorch once and pytorch for every Python (macOS too); no
    variant key selects another flow (the `megabuild` key is retired)."""
    for config in CONFIGS:
        assert "megabuild" not in config.values, config.name
        assert len(config.values.get("python", [])) >= len(PYTHONS_MEGABUILD), config.name


def test_macos_has_three_configs_osx_64_cross_compiled() -> None:
    """osx-64 (mkl, generic) and osx-arm64 (generic): three jobs, not one per Python."""
    osx = sorted(
        (c.subdir, c.values.get("blas_impl", ["generic"])[0]) for c in CONFIGS if c.subdir.startswith("osx")
    )
    assert osx == [("osx-64", "generic"), ("osx-64", "mkl"), ("osx-arm64", "generic")]
    forge = yaml.safe_load((FEEDSTOCK / "conda-forge.yml").read_text(encoding="utf-8"))
    assert forge["build_platform"]["osx_64"] == "osx_arm64"


def test_linux_cuda_versions() -> None:
    """linux-64 and linux-aarch64 (sbsa) build CPU, CUDA 12.6 and CUDA 13.0; the Tegra config
    (linux-aarch64, Jetson) CUDA 12.9 only."""

    def cudas(subdir: str, tegra: bool) -> set[str]:
        return {
            c.values["cuda_compiler_version"][0]
            for c in CONFIGS
            if c.subdir == subdir and ("tegra" in (c.get("arm_variant_type") or [])) == tegra
        }

    for subdir in ("linux-64", "linux-aarch64"):
        assert cudas(subdir, tegra=False) == {"None", "12.6", "13.0"}, subdir
    assert cudas("linux-aarch64", tegra=True) == {"12.9"}


def _has_linalg(config: Config) -> bool:
    """libtorch-cuda-linalg: Linux CUDA only (Windows builds no lazy linalg library)."""
    return _is_cuda(config) and config.platform.startswith("linux")


@pytest.mark.parametrize("config", [c for c in CONFIGS if _has_linalg(c)], ids=_ids)
def test_cuda_config_lists_both_with_magma_values(config: Config) -> None:
    assert sorted(config.get("with_magma")) == ["false", "true"]


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.platform.startswith("win")], ids=_ids)
def test_win_config_has_no_with_magma(config: Config) -> None:
    """The linalg output is skipped on win: with_magma must not reach its configs."""
    assert "with_magma" not in config.values


# -- rendering ---------------------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_config_renders(config: Config) -> None:
    """No undefined Jinja name, every selector evaluates, YAML parses (RenderError otherwise)."""
    try:
        outputs = rendered(config.name)
    except RenderError as exc:
        pytest.fail(f"{config.name}: {exc}", pytrace=False)
    assert outputs, f"{config.name} renders no outputs"
    for out in outputs:
        assert out.subdir == config.subdir and out.version == outputs[0].version


def _python_label(value: str) -> str:
    """``3.14`` for ``3.14.* *_cp314``, ``3.14t`` for the free-threaded ``3.14.* *_cp314t``."""
    return value.split(".*")[0] + ("t" if value.endswith("t") else "")


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_output_set_matches_design(config: Config) -> None:
    outputs = _group(rendered(config.name))
    counts = {name: len(outs) for name, outs in outputs.items()}
    pythons = sorted(_python_label(o.variant.get("python", "?")) for o in outputs.get("pytorch", []))
    # megabuild on every platform (macOS too): one libtorch, one pytorch per Python of the config
    assert pythons == sorted(PYTHONS_MEGABUILD), "one pytorch per Python in every config"
    expected = {"libtorch": 1, "pytorch": len(PYTHONS_MEGABUILD)}
    if _is_cuda(config) and not _has_linalg(config):
        expected["pytorch-gpu"] = 1
    elif _is_cuda(config):
        expected.update({"libtorch-cuda-linalg": 2, "pytorch-gpu": 1})
        magma = sorted(o.variant["with_magma"] for o in outputs["libtorch-cuda-linalg"])
        assert magma == ["false", "true"], f"one linalg per with_magma, got {magma}"
    else:
        expected["pytorch-cpu"] = 1
    assert counts == expected, f"outputs per name {counts}, design says {expected}"


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_build_strings_and_numbers(config: Config) -> None:
    tag, blas, number = _tags(config)
    problems = []
    for out in rendered(config.name):
        if out.name == "libtorch-cuda-linalg":
            magma = "magma" if out.variant["with_magma"] == "true" else "nomagma"
            want = (f"{tag}_{blas}_{magma}_h<hash>_{number}", number + (50 if magma == "magma" else 0))
        elif out.name == "pytorch":
            py = out.variant["python"].split(".*")[0].replace(".", "")
            want = (f"{tag}_{blas}_py{py}_h<hash>_{number}", number)
        else:
            want = (f"{tag}_{blas}_h<hash>_{number}", number)
        got = (mask_hash(out.build_string), out.build_number)
        if got != want or not re.search(r"_h[0-9a-f]{7}_", out.build_string):
            problems.append(f"{out.name}: got {out.build_string} #{out.build_number}, want {want}")
    assert problems == []


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_every_requirement_is_a_well_formed_match_spec(config: Config) -> None:
    bad = []
    for out in rendered(config.name):
        sections = {**out.requirements, "depends": out.depends, "constrains": out.constrains}
        for section, specs in sections.items():
            for spec in specs:
                parts = spec.split()
                if not (
                    1 <= len(parts) <= 3
                    and re.fullmatch(r"(__)?[a-z0-9_][a-z0-9_.\-]*", parts[0])
                    and not any(p == "-" for p in parts)
                ):
                    bad.append(f"{out.name} {section}: {spec!r}")
    assert not bad, "malformed specs (mis-indented YAML lines merge into one): " + "; ".join(bad)


# -- pins between the outputs ------------------------------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_pytorch_requires_exactly_its_own_libtorch(config: Config) -> None:
    outputs = _group(rendered(config.name))
    libtorch = _one(outputs, "libtorch")
    exact = f"libtorch {libtorch.version} {libtorch.build_string}"
    for pytorch in outputs["pytorch"]:
        assert exact in pytorch.depends, pytorch.depends
        assert _spec(pytorch.requirements["host"], "libtorch") == [exact]


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_libtorch_and_linalg_pin_each_other(config: Config) -> None:
    outputs = _group(rendered(config.name))
    libtorch = _one(outputs, "libtorch")
    linalg_specs = _spec(libtorch.depends, "libtorch-cuda-linalg")
    if not _has_linalg(config):
        assert linalg_specs == [] and "libtorch-cuda-linalg" not in outputs
        return
    (spec,) = linalg_specs
    assert all(_matches(spec, linalg) for linalg in outputs["libtorch-cuda-linalg"]), spec
    for linalg in outputs["libtorch-cuda-linalg"]:
        (back,) = _spec(linalg.constrains, "libtorch")
        assert _matches(back, libtorch), back
    (pytorch_spec,) = _spec(libtorch.constrains, "pytorch")
    assert all(_matches(pytorch_spec, p) for p in outputs["pytorch"]), pytorch_spec


@pytest.mark.parametrize("config", [c for c in CONFIGS if _has_linalg(c)], ids=_ids)
def test_nomagma_forbids_libmagma_and_magma_requires_it(config: Config) -> None:
    linalg = {o.variant["with_magma"]: o for o in _group(rendered(config.name))["libtorch-cuda-linalg"]}
    assert "libmagma <0.0a0" in linalg["false"].constrains
    assert _spec(linalg["false"].depends, "libmagma") == []
    assert "libmagma <0.0a0" not in linalg["true"].constrains
    assert _spec(linalg["true"].depends, "libmagma"), "libmagma-devel's run_exports (model) missing"
    assert linalg["true"].build_number == linalg["false"].build_number + 50


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_cpu_and_gpu_packages_exclude_each_other(config: Config) -> None:
    outputs = _group(rendered(config.name))
    mine, other = ("pytorch-gpu", "pytorch-cpu") if _is_cuda(config) else ("pytorch-cpu", "pytorch-gpu")
    meta = _one(outputs, mine)
    assert f"{other} <0.0a0" in meta.constrains
    for out in [*outputs["pytorch"], *outputs["libtorch"]]:
        assert f"{other} <0.0a0" in out.constrains, out.name
    cuda = [p for p in outputs["pytorch"] if "__cuda" in p.depends]
    assert len(cuda) == (len(outputs["pytorch"]) if _is_cuda(config) else 0), "__cuda on CUDA pytorch only"


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_metapackage_matches_every_python_build_of_this_variant(config: Config) -> None:
    outputs = _group(rendered(config.name))
    name = "pytorch-gpu" if _is_cuda(config) else "pytorch-cpu"
    meta = _one(outputs, name)
    (spec,) = _spec(meta.depends, "pytorch")
    assert all(_matches(spec, p) for p in outputs["pytorch"]), (
        spec,
        [p.build_string for p in outputs["pytorch"]],
    )
    # ... and no pytorch of another variant (CPU vs CUDA, other BLAS, other build number)
    others = [
        p
        for c in CONFIGS
        if c.platform == config.platform and _tags(c) != _tags(config)
        for p in _group(rendered(c.name)).get("pytorch", [])
    ]
    assert [p.build_string for p in others if _matches(spec, p)] == []


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_pytorch_depends_on_its_python(config: Config) -> None:
    for pytorch in _group(rendered(config.name))["pytorch"]:
        major, minor = pytorch.variant["python"].split(".*")[0].split(".")[:2]
        flag = "t" if pytorch.variant["python"].endswith("t") else ""  # the free-threaded build's ABI
        assert f"python >={major}.{minor},<{major}.{int(minor) + 1}.0a0" in pytorch.depends
        assert f"python_abi {major}.{minor}.* *_cp{major}{minor}{flag}" in pytorch.depends


# -- recipe hygiene (what conda-smithy's linter asks for) ---------------------------------------


@cache
def _meta_for_lint() -> dict:
    """meta.yaml with Jinja expressions and statements blanked, good enough for key checks."""
    text = re.sub(r"{%.*?%}", "", META.read_text(), flags=re.S)  # a {% set %} may span lines
    text = re.sub(r"{{.*?}}", "x", text)
    return yaml.safe_load("\n".join(split_selector(line)[1] for line in text.splitlines())) or {}


def test_about_and_maintainers() -> None:
    meta = _meta_for_lint()
    about = meta.get("about") or {}
    missing = [key for key in ("home", "license", "license_file", "summary") if not about.get(key)]
    assert missing == []
    assert about["license"].lower() != "unknown"
    assert meta.get("extra", {}).get("recipe-maintainers"), "extra/recipe-maintainers must not be empty"


def test_no_selectors_on_jinja_statement_lines() -> None:
    bad = [
        f"{i}: {line.strip()}"
        for i, line in enumerate(META.read_text().splitlines(), 1)
        if line.lstrip().startswith("{%") and split_selector(line)[0] is not None
    ]
    assert bad == []


def test_selectors_are_in_tidy_form() -> None:
    good = re.compile(r"(.+?)\s{2,}#\s\[(.+)\](?(2).*)$")  # conda-smithy's lint
    bad = []
    for i, line in enumerate(META.read_text().splitlines(), 1):
        selector, _ = split_selector(line)
        if selector is None:
            continue
        if not good.match(line):
            bad.append(f"{i}: {line.strip()}")
        if re.search(r"\bpy\d{2,3}\b", selector):
            bad.append(f"{i}: use py == 3XX, not py3XX: {line.strip()}")
    assert bad == []


# -- cross-check with conda-build (only where it is installed) ----------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_matches_conda_build_render(config: Config) -> None:
    api = import_tool("conda_build.api")
    plat, arch = config.subdir.split("-", 1)
    metas = api.render(
        str(RECIPE),
        variant_config_files=[str(config.path)],
        finalize=False,
        bypass_env_check=True,
        platform=plat,
        arch=arch,
    )
    ours = render_config(config.path, RECIPE, build_platform=config.subdir)
    sibling_names = {o.name for o in ours}

    def key(name: str, version: str, build: str, number: int, python: str) -> tuple[str, str, str, int, str]:
        # 3.14 and 3.14t share the build string (py314) up to the hash: the python variant keeps
        # them apart, or the comparison depends on conda-build's output order (its hash seed)
        return (name, version, mask_hash(build), number, python if name == PYTORCH else "")

    def unresolved(spec: str) -> str:
        # conda-build leaves pin_subpackage(exact=True) unresolved when not finalizing, and then
        # applies the global pinning's key of the same name (`libtorch: 2.12` -> `libtorch 2.12.*`)
        # to the bare name; finalizing replaces both with the exact pin.
        parts = spec.split()
        if parts[0] in sibling_names and (len(parts) == 3 or (len(parts) == 2 and parts[1].endswith(".*"))):
            return parts[0]
        return spec

    def reqs(sections: dict[str, list[str]]) -> dict[str, list[str]]:
        return {sec: [unresolved(s) for s in specs] for sec, specs in sections.items()}

    theirs = {}
    for m, _, _ in metas:
        if m.skip():
            continue
        sections = {s: list(m.get_value(f"requirements/{s}", []) or []) for s in ("build", "host", "run")}
        sections["run_constrained"] = list(m.get_value("requirements/run_constrained", []) or [])
        python = str(m.config.variant.get("python", ""))
        theirs[key(m.name(), m.version(), m.build_id(), m.build_number(), python)] = reqs(sections)
    mine = {
        key(o.name, o.version, o.build_string, o.build_number, o.variant.get("python", "")): reqs(
            o.requirements
        )
        for o in ours
    }
    assert sorted(mine) == sorted(theirs)
    assert mine == theirs


def test_conda_build_orders_the_pytorch_outputs_differently_from_run_to_run() -> None:
    """Why recipe/build.sh keeps the top level's build (``megabuild build-state``) instead of
    configuring the top level for "the Python whose output runs first": conda-build iterates a
    ``set`` of the variant's Python values, so the order follows the string-hash seed of the
    conda-build process. The same config, four seeds: more than one order."""
    import_tool("conda_build")
    config = next(c for c in CONFIGS if c.subdir == "linux-64" and len(c.get("python")) > 2)
    orders = set()
    for seed in range(4):
        env = dict(os.environ, PYTHONHASHSEED=str(seed), CONDARC=os.devnull, PYTHONPATH=str(TESTS))
        proc = subprocess.run(
            [sys.executable, "-m", "support.conda_build_order", str(RECIPE), str(config.path), config.subdir],
            capture_output=True, text=True, env=env, timeout=600, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        order = tuple(json.loads(proc.stdout.strip().splitlines()[-1]))
        assert sorted(order) == sorted(config.get("python")), order
        orders.add(order)
    print("\n" + "\n".join(" ".join(v.split(".*")[0] for v in order) for order in sorted(orders)))
    assert len(orders) > 1


def _host_names(block: str) -> list[str]:
    """The names of a host section's written-out requirement lines (``- name ...``)."""
    host = block[block.index("host:\n") :]
    end = re.search(r"\n\s*(run|run_constrained|build):\n", host)
    host = host[: end.start() if end else len(host)]
    return [m.group(1) for m in re.finditer(r"^\s+- ([A-Za-z0-9_.-]+)", host, re.M)]


def test_each_host_requirement_is_written_once() -> None:
    """The shared host lists (top level, libtorch, pytorch) live in meta.yaml's ``{% set %}``
    lists; a name written out in more than one host is a key of the pinning (conda-build counts
    a key as used by an output only where the output's block names it as a bare ``- name``)."""
    text = META.read_text()
    outputs = text.index("\noutputs:")
    blocks = {"top level": text[:outputs]}
    for name in ("libtorch", "pytorch"):
        start = text.index(f"\n  - name: {name}\n")
        end = text.find("\n  - name:", start + 1)
        blocks[name] = text[start : end if end > 0 else len(text)]
    keys = set()
    for config in sorted((FEEDSTOCK / ".ci_support").rglob("*.yaml")):
        keys |= {k.replace("_", "-") for k in (yaml.safe_load(config.read_text()) or {})}
    seen: dict[str, list[str]] = {}
    for where, block in blocks.items():
        for name in set(_host_names(block)):
            seen.setdefault(name, []).append(where)
    repeated = {n: w for n, w in seen.items() if len(w) > 1 and n not in keys | {"cuda-version", "python"}}
    assert repeated == {}, "write these once, in a {% set %} list of meta.yaml"
