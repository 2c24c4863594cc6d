"""A throw-away copy of the feedstock plus a fake ``docker`` for build-locally / build_all tests.

``FakeFeedstock.create(tmp_path, repo_root, configs=...)`` copies what a build of the feedstock
reads (``build-locally.py``, ``.scripts/``, ``scripts/``, ``recipe/``, ``conda-forge.yml``) and
either the real ``.ci_support/*.yaml`` set (``configs=None``) or synthetic config files
(``configs={"name": {"key": ["v", ...]}}``), and writes a fake ``docker`` executable into
``<tmp>/fakebin``. The copy's ``build-locally.py`` runs the installed tools (``feedstock``) on
the copy, its own directory; ``tools_pythonpath`` makes the copy's own tools importable instead,
for an interpreter without the install.

The fake docker appends one JSON line per call to ``docker.log``: ``{"argv": [...], "env":
{...}}`` with the variables ``docker run -e`` would forward. ``docker info`` fails when
``FAKE_DOCKER_DAEMON=down``. ``docker run`` succeeds by touching the
``conda-forge-build-done-$CONFIG`` canary that ``run_docker_build.sh`` checks, and fails
(exit 1, no canary) when ``$CONFIG`` equals ``FAKE_DOCKER_FAIL_CONFIG``. With
``FAKE_DOCKER_TELEMETRY=1`` it also writes what recipe/build.sh records for one pass (a
``passes.jsonl`` line and a two-edge ``.ninja_log``) into the ``FEEDSTOCK_BUILD_TELEMETRY`` dir
that ``docker run -e`` hands the build.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from feedstock.paths import done_marker

RECORDED_ENV = (
    "CONFIG",
    "UPLOAD_PACKAGES",
    "IS_PR_BUILD",
    "CPU_COUNT",
    "DOCKER_IMAGE",
    "BUILD_WITH_CONDA_DEBUG",
    "BUILD_OUTPUT_ID",
    "HOST_USER_ID",
    "FEEDSTOCK_NAME",
    "CI",
)

# one pass of recipe/build.sh's telemetry: a compile (1.5 s) and a link (0.5 s) in a 3 s pass
NINJA_LOG = "# ninja log v5\n0\t1500\t1\tCMakeFiles/c10.dir/a.cpp.o\th1\n1500\t2000\t2\tlib/libc10.so\th2\n"
PASS_RECORD = json.dumps(
    {"pass": "libtorch", "start": 100.0, "end": 103.0, "ninja_log": "libtorch.ninja_log", "cache": None}
)

FAKE_DOCKER = f"""#!{sys.executable}
import json, os, sys
NINJA_LOG = {NINJA_LOG!r}
PASS_RECORD = {PASS_RECORD!r}
argv = sys.argv[1:]
with open(os.environ["FAKE_DOCKER_LOG"], "a") as fh:
    env = {{k: os.environ.get(k) for k in {RECORDED_ENV!r}}}
    fh.write(json.dumps({{"argv": argv, "env": env}}) + "\\n")
cmd = argv[0] if argv else ""
if cmd == "info" and os.environ.get("FAKE_DOCKER_DAEMON") == "down":
    sys.stderr.write("Client: Docker Engine\\n")
    sys.stderr.write("Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
                     "Is the docker daemon running?\\n")
    sys.exit(1)
if cmd == "run":
    if os.environ.get("CONFIG") == os.environ.get("FAKE_DOCKER_FAIL_CONFIG"):
        sys.stderr.write("fake build failure\\n")
        sys.exit(1)
    root = telemetry = None
    for i, arg in enumerate(argv):
        if arg == "-v" and ":/home/conda/feedstock_root:" in argv[i + 1]:
            root = argv[i + 1].split(":/home/conda/feedstock_root:")[0]
            canary = os.path.join(root, "build_artifacts", "conda-forge-build-done-" + os.environ["CONFIG"])
            open(canary, "w").close()
        if arg == "-e" and argv[i + 1].startswith("FEEDSTOCK_BUILD_TELEMETRY="):
            telemetry = argv[i + 1].split("=", 1)[1]
    if os.environ.get("FAKE_DOCKER_TELEMETRY") == "1" and root and telemetry:
        tdir = telemetry.replace("/home/conda/feedstock_root", root, 1)
        os.makedirs(tdir, exist_ok=True)
        with open(os.path.join(tdir, "libtorch.ninja_log"), "w") as fh:
            fh.write(NINJA_LOG)
        with open(os.path.join(tdir, "passes.jsonl"), "w") as fh:
            fh.write(PASS_RECORD + "\\n")
"""

_SYNTHETIC = [
    # blas, c_stdlib_version, cuda_compiler_version, image tag
    ("generic", "2.17", "None", "alma9"),
    ("mkl", "2.17", "None", "alma9"),
    ("generic", "2.17", "12.6", "alma9"),
    ("mkl", "2.17", "12.6", "alma9"),
    ("mkl", "2.28", "13.0", "alma10"),
]
SYNTHETIC_CONFIGS: dict[str, dict[str, list[str]]] = {
    f"linux_64_blas_impl{blas}c_stdlib_version{stdlib}cuda_compiler_version{cuda}": {
        "blas_impl": [blas],
        "c_stdlib_version": [stdlib],
        "channel_targets": ["conda-forge main"],
        "cuda_compiler_version": [cuda],
        "docker_image": [f"quay.io/condaforge/linux-anvil-x86_64:{image}"],
        "megabuild": ["true"],
        "python": ["3.10.* *_cpython", "3.11.* *_cpython", "3.12.* *_cpython"],
        "target_platform": ["linux-64"],
        "with_magma": ["true", "false"] if cuda != "None" else ["false"],
    }
    for blas, stdlib, cuda, image in _SYNTHETIC
}
"""Small linux-64 configs in conda-smithy's format (enough for build-locally, not for rendering)."""


def config_text(values: dict[str, list[str]]) -> str:
    lines = []
    for key in sorted(values):
        lines.append(f"{key}:")
        lines.extend(f"- {v}" for v in values[key])
    return "\n".join(lines) + "\n"


@dataclass
class FakeFeedstock:
    root: Path
    fakebin: Path
    log: Path

    @classmethod
    def create(
        cls, tmp_path: Path, repo_root: Path, configs: dict[str, dict[str, list[str]]] | None = None
    ) -> FakeFeedstock:
        root = tmp_path / "feedstock"
        root.mkdir()
        shutil.copy2(repo_root / "build-locally.py", root / "build-locally.py")
        for sub in (".scripts", "scripts", "recipe"):
            if (repo_root / sub).is_dir():
                shutil.copytree(repo_root / sub, root / sub, ignore=shutil.ignore_patterns("__pycache__"))
        if (repo_root / "conda-forge.yml").is_file():
            shutil.copy2(repo_root / "conda-forge.yml", root / "conda-forge.yml")
        ci = root / ".ci_support"
        ci.mkdir()
        if configs is None:
            for path in sorted((repo_root / ".ci_support").glob("*.yaml")):
                shutil.copy2(path, ci / path.name)
        else:
            for name, values in configs.items():
                (ci / f"{name}.yaml").write_text(config_text(values))
        fakebin = tmp_path / "fakebin"
        fakebin.mkdir()
        docker = fakebin / "docker"
        docker.write_text(FAKE_DOCKER)
        docker.chmod(0o755)
        return cls(root, fakebin, tmp_path / "docker.log")

    @property
    def tools_pythonpath(self) -> str:
        """A PYTHONPATH with the copy's tools (``feedstock``) and build helpers (``megabuild``)."""
        return os.pathsep.join([str(self.root / "scripts"), str(self.root / "recipe")])

    @property
    def config_names(self) -> list[str]:
        return sorted(p.stem for p in (self.root / ".ci_support").glob("*.yaml"))

    def env(self, with_docker: bool = True, **extra: str) -> dict[str, str]:
        """A small, explicit environment: fake docker first on PATH (or no docker at all)."""
        system_path = "/usr/bin:/bin"
        env = {
            "PATH": f"{self.fakebin}:{system_path}" if with_docker else str(self.fakebin.parent / "empty"),
            "HOME": str(self.root.parent),
            "LANG": "C.UTF-8",
            "FAKE_DOCKER_LOG": str(self.log),
            "sha": "0123456789abcdef",
            "BUILD_LOCALLY_FREE_BYTES": str(1000 * 1024**3),
        }
        env.update(extra)
        return env

    def run(
        self, *args: str, with_docker: bool = True, timeout: float = 300, **extra: str
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, str(self.root / "build-locally.py"), *args],
            cwd=self.root,
            env=self.env(with_docker, **extra),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def docker_calls(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def built(self) -> list[str]:
        """CONFIG of every ``docker run`` call, in order."""
        return [c["env"]["CONFIG"] for c in self.docker_calls() if c["argv"][:1] == ["run"]]

    def marker(self, name: str) -> Path:
        return done_marker(self.root, name)
