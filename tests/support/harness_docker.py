"""A fake ``docker`` whose ``run`` builds the config for real with the harness, as the container would.

``install(fakebin)`` puts it on a FakeFeedstock's PATH in place of the plain fake. Each call is
recorded in ``$FAKE_DOCKER_LOG`` with its argv and its whole environment. ``docker run`` maps
the ``-v HOST:CONTAINER`` mounts back to host paths, hands the build the ``-e`` variables that
recipe/meta.yaml's ``script_env`` names (as conda-build would) and runs ``run_config`` of the
copied feedstock's harness (real recipe/build.sh, CMake, Ninja, sccache, .conda packages) with
its work dir under ``build_artifacts/``. Like conda-build it prints the script_env values and
writes ``build_env_setup.sh`` exporting them; the packages land in ``build_artifacts/<subdir>/``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

# recipe/meta.yaml's script_env (conda-build hands the build scripts only these)
SCRIPT_ENV = ("CI", "FEEDSTOCK_COMPILER_CACHE", "FEEDSTOCK_BUILD_TELEMETRY",
              "FEEDSTOCK_COMPILER_CACHE_CONF", "FEEDSTOCK_AWS_CREDENTIALS")  # fmt: skip
FEEDSTOCK = "/home/conda/feedstock_root"


def install(fakebin: Path) -> None:
    docker = fakebin / "docker"
    docker.write_text(f'#!/bin/sh\nexec {sys.executable} {Path(__file__).resolve()} "$@"\n')
    docker.chmod(0o755)


def _mounts_and_env(argv: list[str]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    mounts: list[tuple[str, str]] = []
    env: dict[str, str] = {}
    for flag, value in zip(argv, argv[1:]):
        if flag == "-v":
            host, inside = value.split(":")[:2]
            mounts.append((inside, host))
        elif flag == "-e":
            key, _, val = value.partition("=")
            env[key] = val if "=" in value else os.environ.get(key, "")
    return sorted(mounts, key=lambda m: -len(m[0])), env


def _on_host(path: str, mounts: list[tuple[str, str]]) -> str:
    for inside, host in mounts:
        if path == inside or path.startswith(inside + "/"):
            return host + path[len(inside) :]
    return path


def run(argv: list[str]) -> int:
    mounts, env = _mounts_and_env(argv)
    root = Path(_on_host(FEEDSTOCK, mounts))
    artifacts = root / "build_artifacts"
    passed = {k: _on_host(env[k], mounts) for k in SCRIPT_ENV if env.get(k)}
    for key, value in passed.items():  # conda-build prints script_env values
        print(f"script_env: {key}={value}", flush=True)
    sys.path[:0] = [str(root / "scripts"), str(root / "recipe")]
    from feedstock.conda_build_standin.conda_build import run_config
    from feedstock.conda_build_standin.cpythons import find_cpythons

    work = artifacts / "harness-work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "build_env_setup.sh").write_text("".join(f'export {k}="{v}"\n' for k, v in passed.items()))
    pythons = [c for c in find_cpythons() if c.short == "3.12"]
    config = root / ".ci_support" / f"{os.environ['CONFIG']}.yaml"
    result = run_config(config, work, pythons=pythons, cpu_count=2, passed_env=passed)
    for package in sorted(result.channel.glob("*/*.conda")):
        (artifacts / package.parent.name).mkdir(exist_ok=True)
        shutil.copy2(package, artifacts / package.parent.name / package.name)
    (artifacts / f"conda-forge-build-done-{os.environ['CONFIG']}").touch()
    return 0


def main(argv: list[str]) -> int:
    with open(os.environ["FAKE_DOCKER_LOG"], "a") as fh:
        fh.write(json.dumps({"argv": argv, "env": dict(os.environ)}) + "\n")
    if argv[:1] == ["run"]:
        return run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
