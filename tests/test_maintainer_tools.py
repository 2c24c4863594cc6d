"""python -m feedstock build-all, python -m feedstock cfep03-bundle and python -m feedstock
upstream-versions."""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest
from support.fake_feedstock import SYNTHETIC_CONFIGS, FakeFeedstock
from support.tools import tool_argv

CPU = sorted(n for n in SYNTHETIC_CONFIGS if n.endswith("None"))


def load(name: str) -> ModuleType:
    return importlib.import_module(f"feedstock.commands.{name}")


def run_script(command: str, *args: str, cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(
        tool_argv(command, *args),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


# -- build_all.py --------------------------------------------------------------------------------


@pytest.fixture
def fs(tmp_path: Path, repo_root: Path) -> FakeFeedstock:
    if not (repo_root / ".scripts" / "run_docker_build.sh").is_file():
        pytest.skip(".scripts/run_docker_build.sh not rendered yet")
    return FakeFeedstock.create(tmp_path, repo_root, configs=SYNTHETIC_CONFIGS)


def build_all(fs: FakeFeedstock, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``python -m feedstock build-all`` running the copy's build-locally.py (on the copy)."""
    entry = ["--build-locally", str(fs.root / "build-locally.py")]
    return subprocess.run(
        [sys.executable, "-m", "feedstock", "build-all", *args, *entry],
        cwd=fs.root,
        env=fs.env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_build_all_builds_in_sequence_with_logs_and_zip(fs: FakeFeedstock) -> None:
    proc = build_all(fs, "linux_64_cpu", "--prune")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert fs.built() == CPU
    logs = fs.root / "build_artifacts" / "logs"
    for name in CPU:
        text = (logs / f"{name}.log").read_text()
        assert "Start Docker" in text  # run_docker_build.sh's output went to the config's log
        assert f"[{CPU.index(name) + 1}/2] {name} | ok | " in proc.stdout
    with zipfile.ZipFile(logs / "build_logs.zip") as zf:
        assert sorted(zf.namelist()) == sorted(f"{n}.log" for n in CPU)
    prunes = [c["argv"] for c in fs.docker_calls() if c["argv"][:1] == ["system"]]
    assert prunes == [["system", "prune", "-f"]]  # between the two configs, not after the last


def test_build_all_resumes_after_an_interrupted_run(fs: FakeFeedstock) -> None:
    first = build_all(fs, "linux_64_cpu", FAKE_DOCKER_FAIL_CONFIG=CPU[1])
    assert first.returncode == 1
    assert f"FAILED (exit 1, see logs/{CPU[1]}.log)" in first.stdout
    assert fs.marker(CPU[0]).is_file() and not fs.marker(CPU[1]).exists()

    fs.log.unlink()
    second = build_all(fs, "linux_64_cpu")
    assert second.returncode == 0, second.stdout + second.stderr
    assert fs.built() == [CPU[1]]
    assert f"[1/2] {CPU[0]} | done earlier, skipped" in second.stdout
    assert (fs.root / "build_artifacts" / "logs" / f"{CPU[1]}.log.prev").is_file()


def test_build_all_stops_when_build_locally_refuses(fs: FakeFeedstock) -> None:
    proc = build_all(fs, "--keep-going", FAKE_DOCKER_DAEMON="down")
    assert proc.returncode == 1
    assert "refused to start" in proc.stderr
    assert fs.built() == []
    first_log = fs.root / "build_artifacts" / "logs" / f"{sorted(SYNTHETIC_CONFIGS)[0]}.log"
    assert "docker daemon is not running" in first_log.read_text()


def test_build_all_unknown_alias_is_a_usage_error(fs: FakeFeedstock) -> None:
    proc = build_all(fs, "linux_64_cuda9.0")
    assert proc.returncode == 2
    assert "unknown config 'linux_64_cuda9.0'" in proc.stderr
    assert "Traceback" not in proc.stderr


def _forwarded(argv: list[str]) -> dict[str, str]:
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-e" and "=" in argv[i + 1])


def test_build_all_shares_one_compiler_cache(fs: FakeFeedstock, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    proc = build_all(fs, "linux_64_cpu", "--compiler-cache", str(cache))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = [c["argv"] for c in fs.docker_calls() if c["argv"][:1] == ["run"]]
    assert len(runs) == 2
    for argv in runs:
        assert f"{cache}:/home/conda/compiler-cache:rw" in argv
        assert _forwarded(argv)["FEEDSTOCK_COMPILER_CACHE"] == "/home/conda/compiler-cache"


def test_build_all_without_compiler_cache(fs: FakeFeedstock) -> None:
    assert build_all(fs, "linux_64_cpu", "--no-compiler-cache").returncode == 0
    runs = [c["argv"] for c in fs.docker_calls() if c["argv"][:1] == ["run"]]
    assert runs and all("FEEDSTOCK_COMPILER_CACHE" not in _forwarded(argv) for argv in runs)


def test_build_all_aggregates_the_reports_next_to_the_logs(fs: FakeFeedstock) -> None:
    pytest.importorskip("matplotlib")
    proc = build_all(fs, "linux_64_cpu", FAKE_DOCKER_TELEMETRY="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = fs.root / "build_artifacts" / "logs"
    table = (logs / "build_times.md").read_text()
    for name in CPU:
        # the fake build's one pass: 3 s wall, 2 edge seconds, 1 compile, cache off
        assert f"| {name} | 3.0 | 2.0 | 1 | off | libtorch 3 |" in table
    assert (logs / "build_times.png").read_bytes().startswith(b"\x89PNG")
    assert set(json.loads((logs / "build_times.json").read_text())) == set(CPU)
    with zipfile.ZipFile(logs / "build_logs.zip") as zf:
        names = set(zf.namelist())
    assert {"build_times.md", "build_times.png", "build_times.json"} <= names
    assert {f"{n}/report.md" for n in CPU} | {f"{n}/timeline.png" for n in CPU} <= names


@pytest.mark.parametrize(
    ("line", "phase"),
    [
        ("Configuring conda\n", "Configuring conda"),
        ("BUILD START: ['libtorch-2.13.0-cuda126_mkl_h1234567_300.conda']\n", "build libtorch"),
        ("TEST START: /x/linux-64/pytorch-2.13.0-cpu_mkl_py312_h1234567_100.conda\n", "test pytorch"),
        ("[123/1475] Building CXX object caffe2/CMakeFiles/torch_cpu.dir/x.cpp.o\n", "ninja 123/1475"),
        ("Packaging libtorch-cuda-linalg\n", "package libtorch-cuda-linalg"),
        ("Validating outputs\n", "Validating outputs"),
        ("some compiler warning\n", None),
    ],
)
def test_phase_parsing(line: str, phase: str | None) -> None:
    from feedstock.commands.build_all import phase_of

    assert phase_of(line) == phase


# -- cfep03_bundle.py ----------------------------------------------------------------------------


def fake_outputs(config: str, cuda: str, blas: str, number: int) -> list[dict]:
    tag = f"cuda{cuda.replace('.', '')}" if cuda != "None" else "cpu"
    outs = []
    if cuda != "None":
        outs += [
            ("libtorch-cuda-linalg", f"{tag}_{blas}_magma_h1111111_{number}", number + 50),
            ("libtorch-cuda-linalg", f"{tag}_{blas}_nomagma_h2222222_{number}", number),
        ]
    outs.append(("libtorch", f"{tag}_{blas}_h3333333_{number}", number))
    outs += [("pytorch", f"{tag}_{blas}_py{py}_h4444444_{number}", number) for py in ("310", "311", "312")]
    outs.append(
        ("pytorch-gpu" if cuda != "None" else "pytorch-cpu", f"{tag}_{blas}_h5555555_{number}", number)
    )
    return [
        {
            "config": config,
            "name": n,
            "version": "2.13.0",
            "build_string": b,
            "build_number": bn,
            "subdir": "linux-64",
        }
        for n, b, bn in outs
    ]


@pytest.fixture
def bundle_tree(tmp_path: Path, repo_root: Path) -> tuple[FakeFeedstock, Path, list[dict]]:
    fs = FakeFeedstock.create(tmp_path, repo_root, configs=SYNTHETIC_CONFIGS)
    outputs = fake_outputs(CPU[1], "None", "mkl", 100) + fake_outputs(
        "linux_64_blas_implmklc_stdlib_version2.17cuda_compiler_version12.6", "12.6", "mkl", 300
    )
    expected = tmp_path / "expected.json"
    expected.write_text(json.dumps(outputs))
    subdir = fs.root / "build_artifacts" / "linux-64"
    subdir.mkdir(parents=True)
    for o in outputs:
        # rebuilt packages get other hashes than the renderer's: the check must not care
        build = re.sub(r"_h[0-9a-f]{7}_", "_habcdef0_", o["build_string"])
        (subdir / f"{o['name']}-{o['version']}-{build}.conda").write_bytes(b"")
    logs = fs.root / "build_artifacts" / "logs"
    logs.mkdir()
    (logs / f"{CPU[1]}.log").write_text("BUILD START\n")
    (logs / "build_times.md").write_text("| config | wall |\n")  # build_all.py's aggregate
    return fs, expected, outputs


def test_cfep03_complete_tree_writes_manifest_and_prints_upload_commands(bundle_tree) -> None:
    fs, expected, outputs = bundle_tree
    proc = run_script(
        "cfep03-bundle",
        "--feedstock",
        str(fs.root),
        "--expected",
        str(expected),
        "--channel",
        "some-delegate",
        cwd=fs.root,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"present:    {len(outputs)}" in proc.stdout
    assert "missing:    0" in proc.stdout
    out = fs.root / "build_artifacts" / "cfep03"
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert len(sums) == len(outputs)
    empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert all(line.startswith(f"{empty_sha}  linux-64/") for line in sums)
    request = (out / "admin-request.yml").read_text()
    assert request.startswith("action: cfep3_copy\nanaconda_org_packages:\n")
    assert (
        "  - package: some-delegate/label/cfep03/linux-64/pytorch-2.13.0-cpu_mkl_py312_habcdef0_100.conda"
        in request
    )
    with zipfile.ZipFile(out / "build_logs.zip") as zf:
        assert zf.namelist() == [f"{CPU[1]}.log", "build_times.md"]
    assert "anaconda upload --user some-delegate --label cfep03" in proc.stdout
    copy = "anaconda copy --from-label cfep03 --to-label main --to-owner conda-forge"
    assert f"{copy} some-delegate/pytorch/2.13.0" in proc.stdout


def test_cfep03_reports_the_missing_package_and_fails(bundle_tree) -> None:
    fs, expected, _ = bundle_tree
    victim = next((fs.root / "build_artifacts" / "linux-64").glob("libtorch-cuda-linalg-*_nomagma_*.conda"))
    victim.unlink()
    (
        fs.root / "build_artifacts" / "linux-64" / "pytorch-2.12.0-cpu_mkl_py312_h0000000_100.conda"
    ).write_bytes(b"")
    proc = run_script("cfep03-bundle", "--feedstock", str(fs.root), "--expected", str(expected), cwd=fs.root)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "missing:    1" in proc.stdout
    assert "MISSING linux-64/libtorch-cuda-linalg-2.13.0-cuda126_mkl_nomagma_h<hash>_300.conda" in proc.stdout
    assert "UNEXPECTED linux-64/pytorch-2.12.0-cpu_mkl_py312_h0000000_100.conda" in proc.stdout
    assert "INCOMPLETE" in proc.stdout
    assert "anaconda upload" not in proc.stdout


def test_cfep03_checks_build_numbers_from_repodata(bundle_tree) -> None:
    fs, expected, _ = bundle_tree
    subdir = fs.root / "build_artifacts" / "linux-64"
    magma = next(subdir.glob("libtorch-cuda-linalg-*_magma_*.conda"))
    (subdir / "repodata.json").write_text(
        json.dumps({"packages.conda": {magma.name: {"build_number": 300}}})  # should be 350
    )
    proc = run_script("cfep03-bundle", "--feedstock", str(fs.root), "--expected", str(expected), cwd=fs.root)
    assert proc.returncode == 1
    assert f"BUILD NUMBER linux-64/{magma.name}: 300, expected 350" in proc.stdout


def test_cfep03_matching_counts_duplicates() -> None:
    mod = load("cfep03_bundle")
    out = {
        "config": "c",
        "name": "x",
        "version": "1",
        "build_string": "h1234567_0",
        "build_number": 0,
        "subdir": "linux-64",
    }
    expected = mod.expected_from_outputs([out, dict(out, build_string="h7654321_0")])
    found = [
        mod.Found(mod.Key("linux-64", "x", "1", "h<hash>_0"), Path("linux-64/x-1-h0000000_0.conda"), None)
    ]
    report = mod.compare(expected, found)
    assert len(report.matched) == 1 and len(report.missing) == 1


def test_cfep03_render_expected_raises_a_feedstock_error_without_the_render_library(
    monkeypatch: pytest.MonkeyPatch, repo_root: Path
) -> None:
    # Library code raises; only run_main decides how the program ends (it used to raise SystemExit).
    from feedstock.errors import FeedstockError

    mod = load("cfep03_bundle")
    monkeypatch.setitem(sys.modules, "feedstock.render", None)  # as if jinja2/pyyaml were missing
    with pytest.raises(FeedstockError, match="pass --expected"):
        mod.render_expected(repo_root, ["linux_64_x"])


# -- upstream_versions.py ------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "PATH": "/usr/bin:/bin",
        "HOME": str(cwd),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(
        ["git", "-c", "protocol.file.allow=always", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def write_upstream_files(src: Path) -> None:
    pins = src / ".ci" / "docker" / "ci_commit_pins"
    pins.mkdir(parents=True)
    (pins / "triton.txt").write_text("3.7.1\n")
    (pins / "nccl-cu12.txt").write_text("v2.27.5-1\n")
    common = src / ".ci" / "docker" / "common"
    common.mkdir(parents=True)
    (common / "install_mkl.sh").write_text(
        "#!/bin/bash\nMKL_VERSION=2024.2.0\npip install mkl-static==${MKL_VERSION}\n"
    )
    (common / "install_cuda.sh").write_text(
        'function install_126 {\n  CUDNN_VERSION=9.10.2.21\n  local NCCL_VERSION="2.27.5"\n}\n'
        "function install_130 {\n  CUDNN_VERSION=9.13.0.50\n}\n"
    )
    (src / "requirements.txt").write_text("# build\nnumpy\nsympy>=1.13.3\ntyping-extensions>=4.10.0\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=70.1.0", "cmake>=3.27", "numpy"]\n'
        '[project]\nname = "torch"\ndependencies = ["filelock", "sympy>=1.13.3", "networkx>=2.5.1"]\n'
    )


def fake_feedstock(tmp_path: Path) -> Path:
    fs = tmp_path / "feedstock"
    (fs / "recipe").mkdir(parents=True)
    (fs / "recipe" / "meta.yaml").write_text(
        '{% set triton = "3.7.1" %}\n'
        "requirements:\n  host:\n    - libprotobuf\n    - mkl-devel {{ mkl }}  # [blas_impl == 'mkl']\n"
        "    - sleef >=3.8\n  run:\n    - sympy >=1.13.3\n    - triton {{ triton }}  # [linux]\n"
        "test:\n  commands:\n    - cmake -S cmake_test -B build\n"
        "outputs:\n  - name: pytorch\n    requirements:\n      run:\n        - networkx >=3\n"
    )
    (fs / ".ci_support").mkdir()
    (fs / ".ci_support" / "linux_64_.yaml").write_text(
        "libprotobuf:\n- 6.31.1\nmkl:\n- '2024'\nnccl:\n- '2'\ntarget_platform:\n- linux-64\n"
    )
    return fs


@pytest.fixture
def pytorch_checkout(tmp_path: Path) -> Path:
    sleef = tmp_path / "sleef-origin"
    sleef.mkdir()
    git("init", "-q", cwd=sleef)
    (sleef / "CMakeLists.txt").write_text("project(SLEEF VERSION 3.8.0)\n")
    git("add", ".", cwd=sleef)
    git("commit", "-qm", "sleef", cwd=sleef)
    git("tag", "3.8", cwd=sleef)
    src = tmp_path / "pytorch"
    src.mkdir()
    git("init", "-q", cwd=src)
    write_upstream_files(src)
    git("submodule", "add", "-q", str(sleef), "third_party/sleef", cwd=src)
    git("add", ".", cwd=src)
    git("commit", "-qm", "pytorch", cwd=src)
    return src


def test_upstream_versions_from_a_git_checkout(pytorch_checkout: Path, tmp_path: Path) -> None:
    feedstock = fake_feedstock(tmp_path)
    proc = run_script(
        "upstream-versions", str(pytorch_checkout), "--feedstock", str(feedstock), "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    rows = {(r["package"], r["source"]): r for r in json.loads(proc.stdout)}
    sleef = rows[("sleef", "third_party/sleef")]
    assert sleef["upstream"] == "3.8" and sleef["recipe"] == ">=3.8"
    assert rows[("triton", ".ci/docker/ci_commit_pins/triton.txt")]["upstream"] == "3.7.1"
    assert rows[("triton", ".ci/docker/ci_commit_pins/triton.txt")]["recipe"] == "3.7.1"
    nccl_pin = rows[("nccl-cu12", ".ci/docker/ci_commit_pins/nccl-cu12.txt")]
    assert nccl_pin["upstream"] == "v2.27.5-1" and nccl_pin["configs"] == "2"
    mkl = rows[("mkl", ".ci/docker/common/install_mkl.sh")]
    assert mkl["upstream"] == "2024.2.0" and mkl["recipe"] == "{{ mkl }}" and mkl["configs"] == "2024"
    assert rows[("cudnn", ".ci/docker/common/install_cuda.sh")]["upstream"] == "9.10.2.21, 9.13.0.50"
    assert rows[("nccl", ".ci/docker/common/install_cuda.sh")]["upstream"] == "2.27.5"
    assert rows[("sympy", "requirements.txt")]["upstream"] == ">=1.13.3"
    assert rows[("sympy", "requirements.txt")]["recipe"] == ">=1.13.3"
    assert rows[("numpy", "requirements.txt")]["upstream"] == "(any)"
    networkx = rows[("networkx", "pyproject.toml [project] dependencies")]
    assert networkx["upstream"] == ">=2.5.1" and networkx["recipe"] == ">=3"  # from an output's block
    cmake = rows[("cmake", "pyproject.toml [build-system] requires")]
    assert cmake["recipe"] == ""  # `- cmake -S ...` under test/commands is not a requirement
    assert rows[("setuptools", "pyproject.toml [build-system] requires")]["upstream"] == ">=70.1.0"


def test_upstream_versions_markdown_table(pytorch_checkout: Path, tmp_path: Path) -> None:
    proc = run_script(
        "upstream-versions",
        str(pytorch_checkout),
        "--feedstock",
        str(fake_feedstock(tmp_path)),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split("|")[1:-1] == [
        f" {h.ljust(len(c) - 2)} "
        for h, c in zip(("Package", "Upstream", "Recipe", "Configs", "Source"), lines[0].split("|")[1:-1])
    ]
    assert set(lines[1]) <= {"|", "-"}
    assert any(line.startswith("| sleef ") and "`third_party/sleef`" in line for line in lines)


def test_upstream_versions_from_a_tarball_tree(tmp_path: Path) -> None:
    src = tmp_path / "pytorch-v2.13.0"
    src.mkdir()
    write_upstream_files(src)
    (src / ".gitmodules").write_text(
        '[submodule "third_party/sleef"]\n\tpath = third_party/sleef\n\turl = https://github.com/shibatch/sleef\n'
        '[submodule "third_party/fmt"]\n\tpath = third_party/fmt\n\turl = https://github.com/fmtlib/fmt.git\n'
    )
    (src / "third_party" / "sleef").mkdir(parents=True)
    (src / "third_party" / "sleef" / "CMakeLists.txt").write_text(
        "project(SLEEF VERSION 3.8.0 LANGUAGES C)\n"
    )
    (src / "third_party" / "fmt").mkdir()
    proc = run_script(
        "upstream-versions", str(src), "--feedstock", str(fake_feedstock(tmp_path)), "--json", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    rows = {r["package"]: r for r in json.loads(proc.stdout)}
    assert rows["sleef"]["upstream"] == "3.8.0"
    assert rows["fmt"]["upstream"] == "(vendored)"


def test_upstream_versions_rejects_a_non_source_dir(tmp_path: Path, repo_root: Path) -> None:
    proc = run_script("upstream-versions", str(tmp_path), "--feedstock", str(repo_root), cwd=tmp_path)
    assert proc.returncode == 2
    assert "not a PyTorch source tree?" in proc.stderr


def test_upstream_versions_rejects_a_non_feedstock(tmp_path: Path) -> None:
    # Without recipe/meta.yaml the "ours" columns would silently stay empty.
    proc = run_script("upstream-versions", str(tmp_path), "--feedstock", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("feedstock upstream-versions: error: ")
    assert "no recipe/meta.yaml" in proc.stderr
