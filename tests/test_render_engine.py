"""scripts/feedstock/render.py on its own: selectors, used variables, pins, and a toy recipe.

The toy feedstock in tests/projects/render_recipe has the real recipe's shape (linalg per
with_magma, one lib, one Python package per Python, a cpu/gpu metapackage). Its expected
hashes were cross-checked once against conda-build 25.x (``conda_build.api.render``); the
conda-build comparison itself lives in test_render_recipe.py and needs conda_build installed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from feedstock.configs import Config, load_config
from feedstock.paths import REPO
from feedstock.render import (
    RenderedOutput,
    RenderError,
    apply_pin_expressions,
    conda_glob_match,
    ensure_valid_spec,
    expand_variants,
    find_used_variables_in_shell_script,
    find_used_variables_in_text,
    mask_hash,
    render_all,
    render_config,
    select_lines,
    selector_namespace,
    split_selector,
)
from feedstock.specs import spec_name, spec_parts

ROOT = REPO
TOY = ROOT / "tests" / "projects" / "render_recipe"
TOY_CUDA = TOY / ".ci_support" / "linux_64_cuda_compiler_version12.6.yaml"
TOY_CPU = TOY / ".ci_support" / "linux_64_cuda_compiler_versionNone.yaml"
TOY_OSX = TOY / ".ci_support" / "osx_64_python3.12.____cpython.yaml"


# -- selectors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  - foo  # [linux]", ("linux", "  - foo")),
        ("  - foo # comment [osx and x86_64]", ("osx and x86_64", "  - foo")),
        ("  - foo", (None, "  - foo")),
        ("# a comment [linux]", (None, "")),
        ('  - "foo"  # [win]', ("win", '  - "foo"')),
        ("  - see [the docs](http://x)", (None, "  - see [the docs](http://x)")),
        ("{% set x = 1 %}  # [py == 312]", ("py == 312", "{% set x = 1 %}")),
    ],
)
def test_split_selector_like_conda_build(line: str, expected: tuple[str | None, str]) -> None:
    assert split_selector(line) == expected


def test_selector_namespace_linux_64_cuda() -> None:
    ns = selector_namespace(
        "linux-64",
        "linux-64",
        {"python": "3.13.* *_cp313", "numpy": "2", "with_magma": "false", "cuda_compiler_version": "12.6"},
    )
    assert ns["linux"] and ns["linux64"] and ns["unix"] and ns["x86_64"] and ns["x86"]
    assert not (ns["osx"] or ns["win"] or ns["aarch64"] or ns["arm64"])
    assert (ns["py"], ns["py3k"], ns["np"]) == (313, True, 2)
    assert ns["with_magma"] is False  # "false" -> False for selectors
    assert ns["cuda_compiler_version"] == "12.6"
    assert "osx64" not in ns  # conda-build has no such selector


def test_selector_namespace_osx_arm64() -> None:
    ns = selector_namespace("osx-arm64", "osx-64", {"python": "3.10.* *_cpython"})
    assert ns["osx"] and ns["arm64"] and ns["unix"] and not ns["x86_64"] and not ns["x86"]
    assert (ns["py"], ns["build_platform"]) == (310, "osx-64")


def test_select_lines_keeps_true_lines_and_blanks_comments() -> None:
    ns = selector_namespace("linux-64", "linux-64", {"megabuild": "true"})
    text = "a: 1  # [linux]\nb: 2  # [osx]\n# c: 3 [linux]\nd: 4  # [megabuild and py >= 310]\n"
    assert select_lines(text, ns) == "a: 1\n\nd: 4\n"


def test_unknown_selector_name_is_an_error_not_false() -> None:
    ns = selector_namespace("linux-64", "linux-64", {})
    with pytest.raises(RenderError, match=r"meta.yaml:2: unknown name 'with_magam'"):
        select_lines("a: 1\nb: 2  # [with_magam]\n", ns)
    with pytest.raises(RenderError, match="invalid selector"):
        select_lines("b: 2  # [linux and]\n", ns)
    # attribute names are not variables
    assert select_lines(
        "b: 2  # [target_platform.startswith('linux')]\n", {**ns, "target_platform": "linux-64"}
    )


# -- used variables (conda-build's rules) -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "used"),
    [
        ("    - python\n", {"python"}),
        ("    - python  # [linux]\n", {"python"}),
        ("    - python 3.12\n", set()),  # a fixed version does not use the variant
        ("    - python {{ megabuild_python }}\n", set()),
        ("    - python *\n", set()),
        ("    string: py{{ python }}\n", {"python"}),
        ("{% if with_magma == 'true' %}\n", {"with_magma"}),
        ("{% set x = blas_impl ~ '_' %}\n", {"blas_impl"}),
        ("    - {{ compiler('cxx') }}\n", {"cxx_compiler", "cxx_compiler_version"}),
        ("    - {{ stdlib('c') }}\n", {"c_stdlib", "c_stdlib_version"}),
        ("    - cuda-version\n", {"cuda_version"}),  # '-' and '_' are the same in requirement names
    ],
)
def test_find_used_variables_in_text(text: str, used: set[str]) -> None:
    keys = [
        "python",
        "with_magma",
        "blas_impl",
        "cxx_compiler",
        "cxx_compiler_version",
        "c_stdlib",
        "c_stdlib_version",
        "cuda_version",
    ]
    assert find_used_variables_in_text(keys, text) == used


def test_selector_use_is_found_in_unselected_text_only_with_selectors_only() -> None:
    text = "    - libmagma-devel  # [with_magma]\n"
    assert find_used_variables_in_text(["with_magma"], text, selectors_only=True) == {"with_magma"}


def test_shell_script_variables(tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text(
        'case "${with_magma}" in\n'
        "esac\n"
        "echo $blas_impl\n"
        'echo "${PKG_NAME} ${megabuild}"\n'  # conda-build only sees the first $ of a line
        "python -c 'import os; os.environ[\"python\"]'\n"  # not a $ reference
    )
    keys = ["with_magma", "blas_impl", "megabuild", "python"]
    assert find_used_variables_in_shell_script(keys, script) == {"with_magma", "blas_impl"}


# -- versions and specs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "min_pin", "max_pin", "expected"),
    [
        ("2.13.0", "x.x.x.x.x.x", "x.x", ">=2.13.0,<2.14.0a0"),
        ("3.12.*", "x.x", "x.x", ">=3.12,<3.13.0a0"),
        ("3.12", "x.x", "x.x", ">=3.12,<3.13.0a0"),
        ("1.2.3", "x", "x", ">=1,<2.0a0"),
        ("9", "x.x.x", "x.x", ">=9,<10.0a0"),
    ],
)
def test_apply_pin_expressions(version: str, min_pin: str, max_pin: str, expected: str) -> None:
    assert apply_pin_expressions(version, min_pin, max_pin) == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gcc_linux-64 13", "gcc_linux-64 13.*"),
        ("nccl 2", "nccl 2.*"),
        ("python 3.12.* *_cpython", "python 3.12.* *_cpython"),
        ("libtorch 2.13.0 cpu_generic_h1234567_0", "libtorch 2.13.0 cpu_generic_h1234567_0"),
        ("numpy >=1.23", "numpy >=1.23"),
    ],
)
def test_ensure_valid_spec(spec: str, expected: str) -> None:
    assert ensure_valid_spec(spec) == expected


def test_conda_glob_and_hash_mask() -> None:
    assert conda_glob_match("cuda126_mkl_py*_200", "cuda126_mkl_py313_h1a2b3c4_200")
    assert not conda_glob_match("cuda126_mkl_py*_200", "cuda126_mkl_py313_h1a2b3c4_2000")
    assert not conda_glob_match("cpu_*_0", "cuda126_mkl_h1a2b3c4_0")
    assert mask_hash("cuda126_mkl_py312_h1a2b3c4_200") == "cuda126_mkl_py312_h<hash>_200"
    assert mask_hash("cpu_generic_hdeadbee_0") == "cpu_generic_h<hash>_0"


@pytest.mark.parametrize(
    ("build", "masked"),
    [
        ("h1234567_0", "h<hash>_0"),
        ("cuda126_mkl_py312_h1a2b3c4_300", "cuda126_mkl_py312_h<hash>_300"),
        ("hcafe_1", "hcafe_1"),  # too short for a hash
        ("x_habcdefg_1", "x_habcdefg_1"),  # not hex
        ("py312h1234567_0", "py312h1234567_0"),  # glued to a word: not conda-build's hash field
    ],
)
def test_mask_hash_only_masks_a_standalone_hash(build: str, masked: str) -> None:
    assert mask_hash(build) == masked


@pytest.mark.parametrize(
    ("spec", "parts"),
    [
        ("numpy", ("numpy", None, None)),
        ("numpy >=1.26", ("numpy", ">=1.26", None)),
        ("numpy>=1.26,<3", ("numpy", ">=1.26,<3", None)),
        ("python_abi 3.12.* *_cp312", ("python_abi", "3.12.*", "*_cp312")),
        ("python=3.12", ("python", "3.12.*", None)),
        ("libblas=3.9=*mkl", ("libblas", "3.9.*", "*mkl")),
        ("pytorch==2.13.0", ("pytorch", "==2.13.0", None)),
        ("  cuda-version !=12.0  ", ("cuda-version", "!=12.0", None)),
    ],
)
def test_spec_parts(spec: str, parts: tuple[str, str | None, str | None]) -> None:
    assert spec_parts(spec) == parts
    assert spec_name(spec) == parts[0]


def test_spec_name_stops_at_bracket_options() -> None:
    assert spec_name("libtorch[build=*cuda*]") == "libtorch"


def test_expand_variants_zips_and_multiplies() -> None:
    config = Config(
        "x",
        Path("x.yaml"),
        {"python": ["3.11", "3.12"], "numpy": ["1", "2"], "with_magma": ["false", "true"], "z": ["1"]},
        zip_keys=[["python", "numpy"]],
    )
    variants = expand_variants(config)
    assert len(variants) == 4
    assert {(v["python"], v["numpy"]) for v in variants} == {("3.11", "1"), ("3.12", "2")}
    assert {v["with_magma"] for v in variants} == {"false", "true"}


# -- the toy recipe ----------------------------------------------------------------------------


def _by_name(outputs: list[RenderedOutput]) -> dict[str, list[RenderedOutput]]:
    grouped: dict[str, list[RenderedOutput]] = {}
    for out in outputs:
        grouped.setdefault(out.name, []).append(out)
    return grouped


def test_toy_cuda_outputs_names_strings_numbers() -> None:
    outputs = render_config(TOY_CUDA, TOY / "recipe")
    got = [(o.name, mask_hash(o.build_string), o.build_number) for o in outputs]
    assert got == [
        ("toy-linalg", "cuda126_mkl_nomagma_h<hash>_303", 303),
        ("toy-linalg", "cuda126_mkl_magma_h<hash>_303", 353),
        ("toylib", "cuda126_mkl_h<hash>_303", 303),
        ("toy", "cuda126_mkl_py311_h<hash>_303", 303),
        ("toy", "cuda126_mkl_py312_h<hash>_303", 303),
        ("toy", "cuda126_mkl_py313_h<hash>_303", 303),
        ("toy-gpu", "cuda126_mkl_h<hash>_303", 303),
    ]
    # these hashes matched conda_build.api.render for this config (conda-build 25.x)
    assert [o.build_string for o in outputs][:3] == [
        "cuda126_mkl_nomagma_ha043b71_303",
        "cuda126_mkl_magma_haecb133_303",
        "cuda126_mkl_hbbd34a5_303",
    ]


def test_toy_used_variables() -> None:
    outputs = _by_name(render_config(TOY_CUDA, TOY / "recipe"))
    linalg = outputs["toy-linalg"][0].variant
    assert linalg["with_magma"] == "false" and "python" not in linalg  # `python 3.12`, `python *`
    lib = outputs["toylib"][0].variant
    assert "with_magma" not in lib and "python" not in lib and lib["megabuild"] == "true"
    assert [o.variant["python"] for o in outputs["toy"]] == [
        "3.11.* *_cpython",
        "3.12.* *_cpython",
        "3.13.* *_cp313",
    ]
    assert "megabuild" not in outputs["toy"][0].variant  # ${megabuild} is the 2nd $ on its line
    assert set(outputs["toy-gpu"][0].variant) == {
        "blas_impl",
        "channel_targets",
        "cuda_compiler_version",
        "target_platform",
    }


def test_toy_pins_and_finalized_depends() -> None:
    outputs = _by_name(render_config(TOY_CUDA, TOY / "recipe"))
    (lib,) = outputs["toylib"]
    for toy in outputs["toy"]:
        assert toy.requirements["host"][0] == f"toylib 1.2.0 {lib.build_string}"
        assert toy.depends[0] == f"toylib 1.2.0 {lib.build_string}"
        py = toy.variant["python"].split(".*")[0]
        assert f"python >={py},<3.{int(py.split('.')[1]) + 1}.0a0" in toy.depends
        assert f"python_abi {py}.* *_cp{py.replace('.', '')}" in toy.depends
        # toylib's run_export from host (>=1.2.0,<1.3.0a0) gives way to the exact pin, as conda-build's
        # finalization (_simplify_to_exact_constraints) does; the real conda-build's pytorch showed it
        assert [d for d in toy.depends if d.startswith("toylib ")] == [toy.depends[0]]
        assert "__cuda" in toy.depends
        assert toy.run_exports == {"weak": ["toy >=1.2.0,<1.3.0a0"], "strong": []}
        assert toy.test == {"commands": ['python -c "import toy"']} or toy.variant["python"][:4] != "3.12"
    nomagma, magma = outputs["toy-linalg"]
    assert "libmagma <0.0a0" in nomagma.constrains and "libmagma" not in nomagma.depends
    assert "libmagma" in magma.depends and "libmagma <0.0a0" not in magma.constrains
    (gpu,) = outputs["toy-gpu"]
    (pattern,) = gpu.depends
    name, version, build = pattern.split()
    assert (name, version) == ("toy", "1.2.0")
    assert all(conda_glob_match(build, t.build_string) for t in outputs["toy"])
    assert lib.depends[0].startswith("toy-linalg 1.2.0 cuda126_mkl_*_303")
    assert all(conda_glob_match(lib.depends[0].split()[2], o.build_string) for o in outputs["toy-linalg"])


def test_toy_cpu_config_skips_linalg_and_sets_track_features() -> None:
    outputs = render_config(TOY_CPU, TOY / "recipe")
    assert [o.name for o in outputs] == ["toylib", "toy", "toy", "toy", "toy-cpu"]
    assert outputs[-1].track_features == ["toy-cpu"]
    assert all(o.build_string.startswith("cpu_generic_") for o in outputs)
    assert {o.build_number for o in outputs} == {3}


def test_toy_osx_uses_recipe_cbc_for_missing_keys_and_splits_per_python() -> None:
    # with_magma is not in the osx config; conda-build still reads recipe/conda_build_config.yaml
    outputs = render_config(TOY_OSX, TOY / "recipe")
    assert [(o.name, o.subdir) for o in outputs] == [
        ("toylib", "osx-64"),
        ("toy", "osx-64"),
        ("toy-cpu", "osx-64"),
    ]
    assert outputs[0].variant["python"] == "3.12.* *_cpython"  # `- python  # [not megabuild]`
    assert "libcxx >=18" in outputs[0].depends  # clangxx_osx-64 run_exports (model)


def test_json_shape_is_stable() -> None:
    out = render_config(TOY_CUDA, TOY / "recipe")[0]
    data = out.to_json()
    assert list(data) == [
        "config",
        "name",
        "version",
        "build_string",
        "build_number",
        "subdir",
        "depends",
        "constrains",
        "track_features",
        "requirements",
        "script",
        "variant",
        "run_exports",
        "test",
        "noarch",
        "detect_binary_files_with_prefix",
    ]
    assert list(data["requirements"]) == ["build", "host", "run", "run_constrained"]
    assert set(data["run_exports"]) == {"weak", "strong"}
    assert json.loads(json.dumps(data)) == data
    assert (
        data["config"] == TOY_CUDA.stem and data["script"] == "install_linalg.sh" and data["noarch"] is None
    )


def test_render_all_renders_every_config() -> None:
    result = render_all(TOY)
    assert sorted(result) == sorted(p.stem for p in (TOY / ".ci_support").glob("*.yaml"))
    assert [len(v) for _, v in sorted(result.items())] == [7, 5, 3]


def _toy_copy(tmp_path: Path, old: str, new: str) -> Path:
    recipe = tmp_path / "recipe"
    recipe.mkdir()
    for path in (TOY / "recipe").iterdir():
        (recipe / path.name).write_text(path.read_text())
    meta = recipe / "meta.yaml"
    text = meta.read_text()
    assert old in text
    meta.write_text(text.replace(old, new, 1))
    return recipe


def test_undefined_jinja_name_is_an_error(tmp_path: Path) -> None:
    recipe = _toy_copy(tmp_path, "{{ blas_impl }}_magma", "{{ blas_implementation }}_magma")
    with pytest.raises(RenderError, match="'blas_implementation' is undefined"):
        render_config(TOY_CUDA, recipe)


def test_bare_python_in_an_output_multiplies_it(tmp_path: Path) -> None:
    # the trap the real recipe must avoid: a bare `- python` anywhere in the linalg block
    recipe = _toy_copy(tmp_path, "        - python *\n", "        - python\n")
    outputs = render_config(TOY_CUDA, recipe)
    assert len([o for o in outputs if o.name == "toy-linalg"]) == 6


def test_circular_exact_pins_are_reported(tmp_path: Path) -> None:
    recipe = _toy_copy(
        tmp_path,
        "      host:\n        - python  # [not megabuild]\n",
        "      host:\n        - {{ pin_subpackage('toy', exact=True) }}\n",
    )
    with pytest.raises(RenderError, match="circular"):
        render_config(TOY_CUDA, recipe)


@pytest.mark.parametrize("config", [TOY_CUDA, TOY_CPU, TOY_OSX], ids=lambda p: p.stem)
def test_toy_matches_conda_build(config: Path) -> None:
    """Same outputs, build strings (hash included), numbers, requirements and used keys."""
    api = pytest.importorskip("conda_build.api")
    subdir = load_config(config).subdir
    plat, arch = subdir.split("-", 1)
    metas = api.render(
        str(TOY / "recipe"),
        variant_config_files=[str(config)],
        finalize=False,
        bypass_env_check=True,
        platform=plat,
        arch=arch,
    )
    ours = render_config(config, TOY / "recipe", build_platform=subdir)
    names = {o.name for o in ours}

    def unpin(specs: list[str]) -> list[str]:  # conda-build leaves exact sibling pins unresolved
        return [s.split()[0] if s.split()[0] in names and len(s.split()) == 3 else s for s in specs]

    theirs = {
        (m.name(), m.build_id(), m.build_number()): (
            {s: unpin(list(m.get_value(f"requirements/{s}", []) or [])) for s in ("build", "host", "run")},
            {k: m.config.variant[k] for k in m.get_used_vars() if k in m.config.variant},
        )
        for m, _, _ in metas
        if not m.skip()
    }
    mine = {
        (o.name, o.build_string, o.build_number): (
            {s: unpin(o.requirements[s]) for s in ("build", "host", "run")},
            o.variant,
        )
        for o in ours
    }
    assert mine == theirs
