"""build-locally.py (feedstock.commands.build_locally): docker invocation, aliases, resume
markers, dry run and preflight errors.

Most tests run the copy's build-locally.py (and the real ``.scripts/run_docker_build.sh``) in a
copy of the feedstock, with a fake ``docker`` on PATH that records its argv and environment;
the others call the module on the copy's root.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support.fake_feedstock import SYNTHETIC_CONFIGS, FakeFeedstock

CPU_GENERIC = "linux_64_blas_implgenericc_stdlib_version2.17cuda_compiler_versionNone"
CUDA126_MKL = "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_version12.6"
CUDA126 = sorted(n for n in SYNTHETIC_CONFIGS if n.endswith("12.6"))
CPU = sorted(n for n in SYNTHETIC_CONFIGS if n.endswith("None"))


@pytest.fixture
def fs(tmp_path: Path, repo_root: Path) -> FakeFeedstock:
    if not (repo_root / ".scripts" / "run_docker_build.sh").is_file():
        pytest.skip(".scripts/run_docker_build.sh not rendered yet")
    return FakeFeedstock.create(tmp_path, repo_root, configs=SYNTHETIC_CONFIGS)


@pytest.fixture
def real_fs(tmp_path: Path, repo_root: Path) -> FakeFeedstock:
    if not list((repo_root / ".ci_support").glob("linux_64_*.yaml")):
        pytest.skip(".ci_support has no linux_64 configs yet (rerender pending)")
    return FakeFeedstock.create(tmp_path, repo_root)


def load_module() -> ModuleType:
    """The command's module (the install's); its functions take the feedstock's root."""
    return importlib.import_module("feedstock.commands.build_locally")


def assert_clean_error(proc, *fragments: str) -> None:
    """Exit status 2, a one-line 'build-locally: error:' message, no traceback."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("build-locally: error:")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


# -- the docker invocation ----------------------------------------------------------------------


def test_linux_config_runs_docker_like_ci(fs: FakeFeedstock) -> None:
    proc = fs.run(CUDA126_MKL)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = fs.docker_calls()
    assert [c["argv"][0] for c in calls] == ["info", "info", "pull", "run"]  # preflight + script
    image = "quay.io/condaforge/linux-anvil-x86_64:alma9"
    assert calls[2]["argv"] == ["pull", image]
    run = calls[3]
    argv = run["argv"]
    root = str(fs.root)
    assert f"{root}/recipe:/home/conda/recipe_root:rw,z,delegated" in argv
    assert f"{root}:/home/conda/feedstock_root:rw,z,delegated" in argv
    assert argv[-3:] == [image, "bash", "/home/conda/feedstock_root/.scripts/build_steps.sh"]
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-e"}
    assert {"CONFIG", "UPLOAD_PACKAGES", "IS_PR_BUILD", "CPU_COUNT", "HOST_USER_ID"} <= forwarded
    assert {"BINSTAR_TOKEN", "FEEDSTOCK_TOKEN", "STAGING_BINSTAR_TOKEN"} <= forwarded  # names only
    env = run["env"]
    assert env["CONFIG"] == CUDA126_MKL
    assert env["UPLOAD_PACKAGES"] == "False"
    assert env["IS_PR_BUILD"] == "True"
    assert env["DOCKER_IMAGE"] == image
    # output validation in build_steps.sh checks the outputs against this feedstock's name,
    # whatever the checkout's directory is called (here a temp dir)
    assert env["FEEDSTOCK_NAME"] == "pytorch-cpu-feedstock"
    assert env["CPU_COUNT"].isdigit() and int(env["CPU_COUNT"]) >= 1
    assert env["BUILD_WITH_CONDA_DEBUG"] is None
    assert fs.marker(CUDA126_MKL).is_file()


def test_docker_image_comes_from_the_config(fs: FakeFeedstock) -> None:
    name = "linux_64_blas_implmklc_stdlib_version2.28cuda_compiler_version13.0"
    assert fs.run(name).returncode == 0
    run = fs.docker_calls()[-1]
    assert run["env"]["DOCKER_IMAGE"] == "quay.io/condaforge/linux-anvil-x86_64:alma10"
    assert "quay.io/condaforge/linux-anvil-x86_64:alma10" in run["argv"]


def test_cpu_count_from_caller_is_passed_through(fs: FakeFeedstock) -> None:
    assert fs.run(CPU_GENERIC, CPU_COUNT="7").returncode == 0
    assert fs.docker_calls()[-1]["env"]["CPU_COUNT"] == "7"
    assert fs.run(CPU_GENERIC, "--cpu-count", "3").returncode == 0
    assert fs.docker_calls()[-1]["env"]["CPU_COUNT"] == "3"


def test_debug_sets_conda_debug_variables_and_writes_no_marker(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, "--debug", "--output-id", "libtorch")
    assert proc.returncode == 0, proc.stderr
    env = fs.docker_calls()[-1]["env"]
    assert env["BUILD_WITH_CONDA_DEBUG"] == "1"
    assert env["BUILD_OUTPUT_ID"] == "libtorch"
    assert not fs.marker(CPU_GENERIC).exists()


def test_debug_refuses_several_configs(fs: FakeFeedstock) -> None:
    proc = fs.run("linux_64_cuda12.6", "--debug")
    assert_clean_error(proc, "--debug needs exactly one config")
    assert fs.built() == []


def test_failed_build_writes_no_marker(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, FAKE_DOCKER_FAIL_CONFIG=CPU_GENERIC)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert not fs.marker(CPU_GENERIC).exists()


# -- aliases and resume --------------------------------------------------------------------------


def test_alias_matching_one_config_builds_it(fs: FakeFeedstock) -> None:
    proc = fs.run("linux_64_cuda12.6_mkl")
    assert proc.returncode == 0, proc.stderr
    assert fs.built() == [CUDA126_MKL]


def test_alias_matching_several_lists_and_builds_each(fs: FakeFeedstock) -> None:
    proc = fs.run("linux_64_cuda12.6")
    assert proc.returncode == 0, proc.stderr
    assert "'linux_64_cuda12.6' matches 2 configs:" in proc.stdout
    assert fs.built() == CUDA126
    assert all(fs.marker(n).is_file() for n in CUDA126)


def test_resume_after_interrupted_run(fs: FakeFeedstock) -> None:
    first = fs.run("linux_64_cpu", FAKE_DOCKER_FAIL_CONFIG=CPU[1])
    assert first.returncode == 1
    assert fs.built() == CPU  # the second one was attempted and failed
    assert fs.marker(CPU[0]).is_file() and not fs.marker(CPU[1]).exists()

    fs.log.unlink()
    second = fs.run("linux_64_cpu")
    assert second.returncode == 0, second.stderr
    assert fs.built() == [CPU[1]]
    assert f"[1/2] {CPU[0]}: already built, skipping" in second.stdout

    fs.log.unlink()
    assert fs.run("linux_64_cpu", "--force").returncode == 0
    assert fs.built() == CPU


def test_exact_name_rebuilds_even_when_done(fs: FakeFeedstock) -> None:
    assert fs.run(CPU_GENERIC).returncode == 0
    assert fs.run(CPU_GENERIC).returncode == 0
    assert fs.built() == [CPU_GENERIC, CPU_GENERIC]


def test_unknown_name_is_one_line_with_aliases_and_exits_2(fs: FakeFeedstock) -> None:
    proc = fs.run("linux_64_cuda11.8")
    assert_clean_error(proc, f"'linux_64_cuda11.8' matches none of the {len(SYNTHETIC_CONFIGS)} configs")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "aliases: " in proc.stderr
    assert fs.docker_calls() == []


def test_no_config_without_a_terminal_lists_choices(fs: FakeFeedstock) -> None:
    proc = fs.run()
    assert_clean_error(proc, "no config given and stdin is not a terminal")
    assert fs.docker_calls() == []


def test_interactive_choice_on_a_terminal(
    fs: FakeFeedstock, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = load_module()
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True, raising=False)
    monkeypatch.setattr("builtins.input", lambda prompt="": "2")
    opts = module.resolve_options([], {}, fs.root)
    assert module.select_configs(opts) == [sorted(SYNTHETIC_CONFIGS)[1]]
    out = capsys.readouterr().out
    assert "config not selected, please choose from the following:" in out
    assert f"2. {sorted(SYNTHETIC_CONFIGS)[1]}" in out


def test_filter_limits_the_choices(fs: FakeFeedstock) -> None:
    proc = fs.run("--filter", "*cuda_compiler_version13.0")
    assert proc.returncode == 0, proc.stderr
    assert (
        "Found linux_64_blas_implmklc_stdlib_version2.28cuda_compiler_version13.0 configuration"
        in proc.stdout
    )


# -- preflight errors ----------------------------------------------------------------------------


def test_missing_docker_is_a_one_line_error(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, with_docker=False)
    assert_clean_error(proc, "'docker' not found on PATH")


def test_daemon_down_is_a_one_line_error(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, FAKE_DOCKER_DAEMON="down")
    assert_clean_error(proc, "docker daemon is not running", "Is the docker daemon running?")
    assert [c["argv"][0] for c in fs.docker_calls()] == ["info"]


@pytest.mark.parametrize(
    ("name", "free_gib", "needed"),
    [(CPU_GENERIC, 40, 60), (CUDA126_MKL, 100, 150)],
    ids=["cpu-needs-60", "cuda-needs-150"],
)
def test_low_disk_is_a_one_line_error(fs: FakeFeedstock, name: str, free_gib: int, needed: int) -> None:
    proc = fs.run(name, BUILD_LOCALLY_FREE_BYTES=str(free_gib * 1024**3))
    assert_clean_error(proc, f"{free_gib}.0 GiB free", f"needs about {needed} GiB")
    assert fs.built() == []


def test_enough_disk_for_cpu_is_not_enough_for_cuda(fs: FakeFeedstock) -> None:
    free = str(100 * 1024**3)
    assert fs.run(CPU_GENERIC, BUILD_LOCALLY_FREE_BYTES=free).returncode == 0
    assert fs.run(CUDA126_MKL, BUILD_LOCALLY_FREE_BYTES=free).returncode == 2
    ok = fs.run(CUDA126_MKL, "--skip-disk-check", BUILD_LOCALLY_FREE_BYTES=free)
    assert ok.returncode == 0, ok.stderr


# -- options ---------------------------------------------------------------------------------------


def test_options_are_resolved_once_into_a_frozen_dataclass(fs: FakeFeedstock) -> None:
    module = load_module()
    env = {"CPU_COUNT": "5", "DOCKER_EXECUTABLE": "podman", "BUILD_LOCALLY_MIN_FREE_GB": "7"}
    opts = module.resolve_options(["x", "--no-compiler-cache"], env, fs.root)
    assert (opts.config, opts.cpu_count, opts.docker, opts.min_free_gb) == ("x", "5", "podman", 7)
    assert opts.root == fs.root
    assert opts.compiler_cache is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.cpu_count = "1"
    assert module.resolve_options(["--cpu-count", "3"], env, fs.root).cpu_count == "3"
    default = module.resolve_options([], {}, fs.root)
    assert default.compiler_cache.local_dir == fs.root / "build_artifacts" / "compiler-cache"
    assert default.compiler_cache.remote is None


def test_bad_number_in_the_environment_is_a_one_line_error(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, BUILD_LOCALLY_MIN_FREE_GB="lots")
    assert_clean_error(proc, "BUILD_LOCALLY_MIN_FREE_GB='lots' is not a whole number")
    assert fs.built() == []


# -- compiler cache and report -------------------------------------------------------------------


def _run_args(fs: FakeFeedstock) -> list[str]:
    """``docker run``'s options before the image (CONDA_FORGE_DOCKER_RUN_ARGS lands there)."""
    return fs.docker_calls()[-1]["argv"]


def _forwarded(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e" and "=" in argv[i + 1])


def test_default_compiler_cache_lies_under_build_artifacts(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC)
    assert proc.returncode == 0, proc.stderr
    argv = _run_args(fs)
    inside = "/home/conda/feedstock_root/build_artifacts/compiler-cache"
    assert _forwarded(argv)["FEEDSTOCK_COMPILER_CACHE"] == inside
    assert _forwarded(argv)["FEEDSTOCK_BUILD_TELEMETRY"] == (
        f"/home/conda/feedstock_root/build_artifacts/telemetry/{CPU_GENERIC}"
    )
    assert not any(a.endswith(":/home/conda/compiler-cache:rw") for a in argv)  # no extra mount
    assert (fs.root / "build_artifacts" / "compiler-cache").is_dir()


def test_compiler_cache_outside_the_feedstock_is_mounted(fs: FakeFeedstock, tmp_path: Path) -> None:
    cache = tmp_path / "shared-cache"
    proc = fs.run(CPU_GENERIC, "--compiler-cache", str(cache), CONDA_FORGE_DOCKER_RUN_ARGS="--rm")
    assert proc.returncode == 0, proc.stderr
    argv = _run_args(fs)
    assert f"{cache}:/home/conda/compiler-cache:rw" in argv
    assert _forwarded(argv)["FEEDSTOCK_COMPILER_CACHE"] == "/home/conda/compiler-cache"
    assert "--rm" in argv  # the caller's own docker run arguments stay
    assert cache.is_dir()


def test_no_compiler_cache_passes_nothing(fs: FakeFeedstock) -> None:
    assert fs.run(CPU_GENERIC, "--no-compiler-cache").returncode == 0
    assert "FEEDSTOCK_COMPILER_CACHE" not in _forwarded(_run_args(fs))
    assert not (fs.root / "build_artifacts" / "compiler-cache").exists()


def test_several_configs_do_not_pile_up_mounts(fs: FakeFeedstock, tmp_path: Path) -> None:
    assert fs.run("linux_64_cuda12.6", "--compiler-cache", str(tmp_path / "c")).returncode == 0
    runs = [c["argv"] for c in fs.docker_calls() if c["argv"][0] == "run"]
    assert len(runs) == 2
    for name, argv in zip(CUDA126, runs):
        assert argv.count("-v") == 3  # recipe, feedstock, cache
        assert _forwarded(argv)["FEEDSTOCK_BUILD_TELEMETRY"].endswith(f"/telemetry/{name}")


@pytest.mark.parametrize("kind", ["a-file", "below-a-file"])
def test_unusable_compiler_cache_is_a_one_line_error(fs: FakeFeedstock, tmp_path: Path, kind: str) -> None:
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    cache = blocker if kind == "a-file" else blocker / "cache"
    proc = fs.run(CPU_GENERIC, "--compiler-cache", str(cache))
    assert_clean_error(proc, f"cannot create compiler cache dir {cache}", "--no-compiler-cache")
    assert fs.built() == []
    assert not fs.marker(CPU_GENERIC).exists()


def test_report_lands_next_to_the_telemetry(fs: FakeFeedstock) -> None:
    proc = fs.run(CPU_GENERIC, "--no-compiler-cache", FAKE_DOCKER_TELEMETRY="1", PYTHONPATH="")
    assert proc.returncode == 0, proc.stderr
    tdir = fs.root / "build_artifacts" / "telemetry" / CPU_GENERIC
    assert f"build report: build_artifacts/telemetry/{CPU_GENERIC}/report.md" in proc.stdout
    report = (tdir / "report.md").read_text()
    assert "| libtorch | 3.0 | 2.0 | 2 | 1 | - | off |" in report  # no rebuild check in the top level


def test_earlier_telemetry_is_cleared_before_a_build(fs: FakeFeedstock) -> None:
    tdir = fs.root / "build_artifacts" / "telemetry" / CPU_GENERIC
    tdir.mkdir(parents=True)
    (tdir / "passes.jsonl").write_text('{"pass": "stale", "start": 0, "end": 1}\n')
    assert fs.run(CPU_GENERIC).returncode == 0
    assert not (tdir / "passes.jsonl").exists()


# -- dry run -------------------------------------------------------------------------------------


def block_render_dependencies(fs: FakeFeedstock) -> str:
    """A PYTHONPATH whose sitecustomize makes jinja2/yaml unimportable (keeps dry runs fast)."""
    blocker = fs.root.parent / "blocker"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('jinja2', 'yaml'):\n"
        "            raise ImportError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    return str(blocker)


def test_dry_run_needs_no_docker_and_runs_nothing(fs: FakeFeedstock) -> None:
    blocker = block_render_dependencies(fs)
    proc = fs.run("linux_64_cuda12.6", "--dry-run", with_docker=False, PYTHONPATH=blocker)
    assert proc.returncode == 0, proc.stderr
    for name in CUDA126:
        assert f"] {name}\n" in proc.stdout
    assert "docker image: quay.io/condaforge/linux-anvil-x86_64:alma9" in proc.stdout
    assert "cuda_compiler_version: 12.6" in proc.stdout
    assert "with_magma: true, false" in proc.stdout
    assert "needs about 150 GiB" in proc.stdout
    assert "steps:" in proc.stdout and ".scripts/run_docker_build.sh" in proc.stdout
    assert "outputs:" in proc.stdout
    assert "dry run: nothing was run" in proc.stdout
    assert not fs.log.exists()
    assert not (fs.root / "build_artifacts").exists()
    # without jinja2/pyyaml: a one-line note on how to get them, once per config
    notes = [ln for ln in proc.stdout.splitlines() if "outputs not shown" in ln]
    assert len(notes) == len(CUDA126)
    if (fs.root / "scripts" / "feedstock" / "render.py").is_file():
        assert "python3 -m pip install jinja2 pyyaml" in notes[0]


def render_library_available(root: Path) -> bool:
    if not (root / "scripts" / "feedstock" / "render.py").is_file():
        return False
    return all(importlib.util.find_spec(m) for m in ("jinja2", "yaml"))


def test_dry_run_on_the_real_configs_prints_each_configs_outputs(real_fs: FakeFeedstock) -> None:
    proc = real_fs.run("linux_64_cuda12.6", "--dry-run", with_docker=False, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    blocks = proc.stdout.split("\n[")[1:]
    assert blocks, proc.stdout
    for block in blocks:
        name = block.split("] ", 1)[1].splitlines()[0]
        assert "cuda_compiler_version12.6" in name
        assert "outputs:" in block
        if render_library_available(real_fs.root):
            meta = (real_fs.root / "recipe" / "meta.yaml").read_text()
            version = re.search(r'{%\s*set version = "([^"]+)"', meta)
            assert version
            for output in ("libtorch-cuda-linalg", "libtorch", "pytorch", "pytorch-gpu"):
                assert f"linux-64/{output}-{version[1]}-" in block, block
            assert "_magma_" in block and "_nomagma_" in block
        else:
            assert "pip install jinja2 pyyaml" in block or "render" in block


# -- real .ci_support aliases ----------------------------------------------------------------------


def test_real_alias_resolution(real_fs: FakeFeedstock) -> None:
    names = real_fs.config_names
    module = load_module()
    root = real_fs.root
    cuda = module.resolve(root, "linux_64_cuda12.6", None)
    assert cuda and all(n.startswith("linux_64_") and "cuda_compiler_version12.6" in n for n in cuda)
    assert module.resolve(root, "linux_64_cpu_mkl", None) == [
        n for n in names if n.startswith("linux_64_") and "blas_implmkl" in n and "versionNone" in n
    ]
    assert module.resolve(root, names[0], None) == [names[0]]
    assert module.resolve(root, "linux_64_cuda11.0", None) == []
    assert not any("magma" in n for n in names), "with_magma must not split CI jobs"


# -- static properties ---------------------------------------------------------------------------


def test_entry_is_thin_and_imports_only_the_stdlib_and_feedstock(repo_root: Path) -> None:
    """build-locally.py stays conda-smithy's thin entry: the standard library and the installed
    tools, no sys.path changes, and old interpreters parse it far enough to say what they lack."""
    source = (repo_root / "build-locally.py").read_text()
    tree = ast.parse(source, feature_version=(3, 7))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert "feedstock" in imported
    assert not imported - set(sys.stdlib_module_names) - {"feedstock"}
    assert "sys.path" not in source
    assert len(source.splitlines()) <= 50
    assert source.startswith('#!/bin/sh\n"""exec" "python3" "$0" "$@" #"""')


def test_conda_forge_yml_keeps_build_locally_out_of_rerender(repo_root: Path) -> None:
    yaml = pytest.importorskip("yaml")
    forge = yaml.safe_load((repo_root / "conda-forge.yml").read_text()) or {}
    assert "build-locally.py" in (forge.get("skip_render") or []), (
        "conda-forge.yml needs `skip_render: [build-locally.py]` or a rerender overwrites it"
    )


def pyenv_pythons() -> dict[tuple[int, int], str]:
    """The pyenv CPythons by (minor, micro) version: the interpreters themselves, not the shims."""
    root = os.environ.get("PYENV_ROOT")
    if not root:
        try:
            root = subprocess.run(
                ["pyenv", "root"], capture_output=True, text=True, check=True
            ).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            root = os.path.expanduser("~/.pyenv")
    found = {}
    for version in Path(root, "versions").glob("3.*"):
        match = re.fullmatch(r"3\.(\d+)\.(\d+)", version.name)
        python = version / "bin" / f"python3.{match[1]}" if match else None
        if match and python and python.is_file():
            found[int(match[1]), int(match[2])] = str(python)
    return found


def find_oldest_supported_python() -> str | None:
    """The oldest pyenv CPython >= 3.10 (pyproject's requires-python)."""
    supported = [found for found in sorted(pyenv_pythons().items()) if found[0] >= (10, 0)]
    return supported[0][1] if supported else None


def test_runs_under_the_oldest_supported_python(fs: FakeFeedstock) -> None:
    """The copy's own tools (PYTHONPATH), on the oldest Python they support."""
    python = find_oldest_supported_python()
    if python is None:
        pytest.skip("no pyenv CPython >= 3.10 on this machine")

    def run(*args: str, with_docker: bool = True, pythonpath: str = fs.tools_pythonpath):
        return subprocess.run(
            [python, str(fs.root / "build-locally.py"), *args],
            cwd=fs.root,
            env=fs.env(with_docker, PYTHONPATH=pythonpath),
            capture_output=True,
            text=True,
            timeout=300,
        )

    blocked = os.pathsep.join([block_render_dependencies(fs), fs.tools_pythonpath])
    proc = run("linux_64_cuda12.6", "--dry-run", with_docker=False, pythonpath=blocked)
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing was run" in proc.stdout
    proc = run(CPU_GENERIC)
    assert proc.returncode == 0, proc.stderr
    assert fs.built() == [CPU_GENERIC]


def test_without_the_tools_installed_is_a_one_line_error(fs: FakeFeedstock) -> None:
    # -I -S: no site-packages (the editable install), no PYTHONPATH, no user site
    proc = subprocess.run(
        [sys.executable, "-I", "-S", str(fs.root / "build-locally.py"), CPU_GENERIC],
        cwd=fs.root,
        env=fs.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean_error(proc, "the feedstock's tools are not installed")
    assert proc.stderr == (
        "build-locally: error: the feedstock's tools are not installed: "
        f"run `python -m pip install -e .` in {fs.root}\n"
    )
    assert fs.docker_calls() == []


def test_an_old_python_is_a_one_line_error(fs: FakeFeedstock) -> None:
    old = [python for version, python in sorted(pyenv_pythons().items()) if (7, 0) <= version < (10, 0)]
    if not old:
        pytest.skip("no pyenv CPython 3.7 to 3.9 on this machine")
    proc = subprocess.run(
        [old[-1], str(fs.root / "build-locally.py"), CPU_GENERIC],
        cwd=fs.root,
        env=fs.env(PYTHONPATH=fs.tools_pythonpath),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert_clean_error(proc, "the feedstock's tools need Python >= 3.10", old[-1])
    assert fs.docker_calls() == []


def test_python_m_feedstock_builds_the_current_directory(fs: FakeFeedstock, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "feedstock", "build-locally", CPU_GENERIC]
    proc = subprocess.run(cmd, cwd=fs.root, env=fs.env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert fs.built() == [CPU_GENERIC] and fs.marker(CPU_GENERIC).is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run(cmd, cwd=elsewhere, env=fs.env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"feedstock build-locally: error: {elsewhere} is not a feedstock's root "
        "(no .ci_support/ or conda-forge.yml): run this in the feedstock, or run its build-locally.py"
    ]
