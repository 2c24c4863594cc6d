#!/bin/sh
"""exec" "python3" "$0" "$@" #"""  # fmt: off # fmt: on

#
# The line above this comment is a bash / sh / zsh guard
# to stop people from running it with the wrong interpreter
#
# Build the recipe locally in the conda-forge docker image, like CI does.
#
# This file started as conda-smithy's generated build-locally.py and keeps its
# interface (positional config, --filter, --debug, --output-id, interactive
# choice). It is kept out of `conda smithy rerender` by `skip_render:
# [build-locally.py]` in conda-forge.yml. Additions for this feedstock:
# short config aliases (via scripts/feedstock/configs.py), building several
# configs in turn with resume markers, --dry-run, and clear preflight errors
# (docker missing, daemon down, not enough disk).
from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from argparse import ArgumentParser, Namespace
from typing import Any

DESCRIPTION = "Build one or more .ci_support configs locally in docker, like CI does."
FEEDSTOCK_ROOT = os.path.dirname(os.path.abspath(__file__))
CI_SUPPORT = os.path.join(FEEDSTOCK_ROOT, ".ci_support")
ARTIFACTS = os.path.join(FEEDSTOCK_ROOT, "build_artifacts")
DONE_DIR = os.path.join(ARTIFACTS, "build-locally-done")
FALLBACK_IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"

# Free disk space a config needs under build_artifacts/ (the conda-bld root,
# package cache and host/build/test envs all live there; the docker image,
# ~5 GB, lives in docker's own storage). Estimates, see README "Building
# locally": a CPU megabuild is one build tree (~15 GB) plus 5 Python builds,
# per-output envs and packages; a CUDA build tree holds device code for every
# architecture, and each output's host env carries a CUDA toolkit.
DISK_NEEDED_GB = {"cpu": 60, "cuda": 150}
GIB = 1024**3

# Environment hooks (documented in the README):
#   BUILD_LOCALLY_FREE_BYTES  pretend this many bytes are free (tests)
#   BUILD_LOCALLY_MIN_FREE_GB override the per-config estimate
#   DOCKER_EXECUTABLE         docker-compatible client (as in run_docker_build.sh)

sys.path.insert(0, os.path.join(FEEDSTOCK_ROOT, "scripts"))


class UsageError(Exception):
    """An error reported as one line on stderr with exit status 2."""


# --------------------------------------------------------------------------- configs


def _configs_module() -> Any:
    try:
        from feedstock import configs  # type: ignore[import-not-found]
    except ImportError as exc:
        raise UsageError(
            f"cannot import scripts/feedstock/configs.py ({exc}): is the checkout complete?"
        ) from None
    return configs


def all_config_names(choices_filter: str | None = None) -> list[str]:
    pattern = os.path.join(CI_SUPPORT, f"{choices_filter or '*'}.yaml")
    return sorted(os.path.basename(f)[:-5] for f in glob.glob(pattern))


def read_config(name: str) -> dict[str, list[str]]:
    """Variant values of one .ci_support config (all values are strings)."""
    fc = _configs_module()
    try:
        return dict(fc.load_config(os.path.join(CI_SUPPORT, name + ".yaml")).values)
    except fc.ConfigError as exc:
        raise UsageError(str(exc)) from None


def resolve(name: str, choices_filter: str | None) -> list[str]:
    """Config names a positional argument stands for (exact name or alias); [] if none."""
    valid = all_config_names(choices_filter)
    if name in valid:
        return [name]
    fc = _configs_module()
    try:
        configs = [fc.load_config(os.path.join(CI_SUPPORT, n + ".yaml")) for n in valid]
        return sorted(c.name for c in fc.resolve_configs(name, configs))
    except fc.ConfigError:
        return []


def alias_examples(choices_filter: str | None) -> list[str]:
    fc = _configs_module()
    try:
        configs = [
            fc.load_config(os.path.join(CI_SUPPORT, n + ".yaml")) for n in all_config_names(choices_filter)
        ]
        return list(fc.example_aliases(configs))
    except (fc.ConfigError, AttributeError):
        return []


def is_cuda(values: dict[str, list[str]]) -> bool:
    return any(v not in ("None", "", None) for v in values.get("cuda_compiler_version", ["None"]))


def docker_image(values: dict[str, list[str]]) -> str:
    images = values.get("docker_image") or [FALLBACK_IMAGE]
    return images[-1]


# --------------------------------------------------------------------------- preflight


def fail(msg: str) -> None:
    raise UsageError(msg)


def docker_executable() -> str:
    return os.environ.get("DOCKER_EXECUTABLE", "docker")


def check_docker() -> None:
    exe = docker_executable()
    if shutil.which(exe) is None:
        fail(
            f"'{exe}' not found on PATH: install Docker Engine "
            "(https://docs.docker.com/engine/install/) or set DOCKER_EXECUTABLE"
        )
    proc = subprocess.run([exe, "info"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        detail = lines[-1] if lines else f"exit status {proc.returncode}"
        fail(f"the docker daemon is not running or not reachable ('{exe} info' failed: {detail})")


def free_bytes(path: str) -> int:
    override = os.environ.get("BUILD_LOCALLY_FREE_BYTES")
    if override:
        return int(override)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def needed_gb(values: dict[str, list[str]]) -> int:
    override = os.environ.get("BUILD_LOCALLY_MIN_FREE_GB")
    if override:
        return int(override)
    return DISK_NEEDED_GB["cuda" if is_cuda(values) else "cpu"]


def check_disk(name: str, values: dict[str, list[str]]) -> None:
    need = needed_gb(values)
    free = free_bytes(ARTIFACTS)
    if free < need * GIB:
        kind = "CUDA" if is_cuda(values) else "CPU"
        fail(
            f"not enough disk space for {name}: {free / GIB:.1f} GiB free under build_artifacts/, "
            f"a {kind} config needs about {need} GiB (override: BUILD_LOCALLY_MIN_FREE_GB, "
            "or --skip-disk-check)"
        )


def default_cpu_count() -> str:
    """CPU_COUNT for the build: the caller's, else cores capped at one job per 4 GiB of RAM."""
    if os.environ.get("CPU_COUNT"):
        return os.environ["CPU_COUNT"]
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal:"))
        cores = max(1, min(cores, kib // (4 * 1024 * 1024)))
    except (OSError, StopIteration, ValueError):
        pass
    return str(cores)


# --------------------------------------------------------------------------- markers


def marker_path(name: str) -> str:
    return os.path.join(DONE_DIR, name + ".json")


def is_done(name: str) -> bool:
    return os.path.isfile(marker_path(name))


def write_marker(name: str, started: float) -> None:
    os.makedirs(DONE_DIR, exist_ok=True)
    tmp = marker_path(name) + ".tmp"
    info = {"config": name, "started": started, "finished": time.time()}
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, marker_path(name))


# --------------------------------------------------------------------------- conda-smithy parts


def setup_environment(ns: Namespace, name: str, values: dict[str, list[str]]) -> None:
    os.environ["CONFIG"] = name
    os.environ["UPLOAD_PACKAGES"] = "False"
    os.environ["IS_PR_BUILD"] = "True"
    os.environ["CPU_COUNT"] = ns.cpu_count or default_cpu_count()
    # build_steps.sh validates every output against conda-forge's feedstock-outputs under this
    # name; without it run_docker_build.sh uses the checkout's directory name, and a clone not
    # named pytorch-cpu-feedstock fails validation (libtorch, pytorch, ... belong to pytorch-cpu).
    os.environ.setdefault("FEEDSTOCK_NAME", "pytorch-cpu-feedstock")
    if uses_docker(name):
        os.environ["DOCKER_IMAGE"] = docker_image(values)
    if ns.debug:
        os.environ["BUILD_WITH_CONDA_DEBUG"] = "1"
        if ns.output_id:
            os.environ["BUILD_OUTPUT_ID"] = ns.output_id
    if "MINIFORGE_HOME" not in os.environ:
        os.environ["MINIFORGE_HOME"] = os.path.join(FEEDSTOCK_ROOT, "miniforge3")


def run_docker_build(ns: Namespace) -> None:
    subprocess.check_call([".scripts/run_docker_build.sh"], cwd=FEEDSTOCK_ROOT)


def run_osx_build(ns: Namespace) -> None:
    subprocess.check_call([".scripts/run_osx_build.sh"], cwd=FEEDSTOCK_ROOT)


def run_win_build(ns: Namespace) -> None:
    script = ".scripts/run_win_build.bat"
    subprocess.check_call(["cmd", "/D", "/Q", "/C", f"CALL {script}"], cwd=FEEDSTOCK_ROOT)


def uses_docker(name: str) -> bool:
    return name.startswith("linux") or (name.startswith("osx") and platform.system() == "Linux")


def choose_interactively(valid: list[str]) -> str:
    print("config not selected, please choose from the following:\n")
    selections = list(enumerate(valid, 1))
    for i, c in selections:
        print(f"{i}. {c}")
    try:
        s = input("\n> ")
    except (KeyboardInterrupt, EOFError):
        print("\nno option selected, bye!", file=sys.stderr)
        sys.exit(1)
    try:
        idx = int(s) - 1
        if not 0 <= idx < len(selections):
            raise ValueError
    except ValueError:
        fail(f"invalid choice {s!r}: enter a number between 1 and {len(selections)}")
    print(f"selected {selections[idx][1]}")
    return selections[idx][1]


def select_configs(ns: Namespace) -> list[str]:
    valid = all_config_names(ns.filter)
    if ns.filter:
        print(f"filtering for '{ns.filter}.yaml' configs")
    if not valid:
        fail(f"no .ci_support/{ns.filter or '*'}.yaml config files found (run a rerender first)")
    if ns.config is None:
        if len(valid) == 1:
            print(f"Found {valid[0]} configuration")
            return valid
        if not sys.stdin.isatty():
            print("valid configs are:", file=sys.stderr)
            for n in valid:
                print(f"  {n}", file=sys.stderr)
            fail("no config given and stdin is not a terminal: name one of the configs above")
        return [choose_interactively(valid)]
    names = resolve(ns.config, ns.filter)
    if not names:
        print("valid configs are:", file=sys.stderr)
        for n in valid:
            print(f"  {n}", file=sys.stderr)
        aliases = alias_examples(ns.filter)
        if aliases:
            print(f"aliases: {' '.join(aliases)}", file=sys.stderr)
        fail(f"'{ns.config}' matches no config: use a name or an alias listed above")
    if names == [ns.config]:
        print(f"Using {ns.config} configuration")
    elif len(names) == 1:
        print(f"'{ns.config}' selects {names[0]}")
    else:
        print(f"'{ns.config}' matches {len(names)} configs:")
        for n in names:
            print(f"  {n}{'  (done)' if is_done(n) else ''}")
    return names


# --------------------------------------------------------------------------- dry run


def render_outputs(name: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Outputs of one config from scripts/feedstock/render.py, or (None, a one-line note)."""
    try:
        from feedstock import render  # type: ignore[import-not-found]
    except ImportError as exc:
        if getattr(exc, "name", None) in ("jinja2", "yaml", "markupsafe"):
            return None, (
                f"(outputs not shown: the render library needs jinja2 and pyyaml ({exc}); "
                "get them with: python3 -m pip install jinja2 pyyaml)"
            )
        return None, f"(outputs not shown: scripts/feedstock/render.py is not importable: {exc})"
    try:
        outs = render.render_config(
            os.path.join(CI_SUPPORT, name + ".yaml"), os.path.join(FEEDSTOCK_ROOT, "recipe")
        )
    except Exception as exc:  # the render library's own errors: report, don't crash the dry run
        return None, f"(outputs not shown: rendering failed: {type(exc).__name__}: {exc})"
    return [o if isinstance(o, dict) else o.to_json() for o in outs], None


def print_dry_run(ns: Namespace, names: list[str]) -> None:
    skipping = ns.config is not None and len(names) > 1 and not ns.force
    for i, name in enumerate(names, 1):
        values = read_config(name)
        print(f"\n[{i}/{len(names)}] {name}")
        if skipping and is_done(name):
            print(f"  already built ({os.path.relpath(marker_path(name), FEEDSTOCK_ROOT)}): would skip")
        print(f"  docker image: {docker_image(values) if uses_docker(name) else '(none: native build)'}")
        print("  variant:")
        skip = {"docker_image", "zip_keys", "pin_run_as_build", "channel_sources", "cdt_name"}
        for key in sorted(values):
            if key not in skip:
                print(f"    {key}: {', '.join(values[key])}")
        outs, note = render_outputs(name)
        print("  outputs:")
        if outs is None:
            print(f"    {note}")
        else:
            for o in outs:
                if o.get("skip"):
                    continue
                fn = f"{o['subdir']}/{o['name']}-{o['version']}-{o['build_string']}.conda"
                print(f"    {fn}  (build number {o['build_number']})")
        need = needed_gb(values)
        print(f"  disk: needs about {need} GiB free under build_artifacts/")
        print("  steps:")
        steps = build_steps(ns, name, values)
        for n, step in enumerate(steps, 1):
            print(f"    {n}. {step}")
    print("\ndry run: nothing was run")


def build_steps(ns: Namespace, name: str, values: dict[str, list[str]]) -> list[str]:
    env = (
        f"CONFIG={name} UPLOAD_PACKAGES=False IS_PR_BUILD=True "
        f"CPU_COUNT={ns.cpu_count or default_cpu_count()}"
    )
    if not uses_docker(name):
        script = ".scripts/run_win_build.bat" if name.startswith("win") else ".scripts/run_osx_build.sh"
        return [f"{env} {script}", f"write {os.path.relpath(marker_path(name), FEEDSTOCK_ROOT)}"]
    image = docker_image(values)
    steps = [
        f"{docker_executable()} info; check free disk space (>= {needed_gb(values)} GiB)",
        f"{env} DOCKER_IMAGE={image} .scripts/run_docker_build.sh",
        f"  {docker_executable()} pull {image}",
        f"  {docker_executable()} run -v recipe:/home/conda/recipe_root "
        f"-v .:/home/conda/feedstock_root ... {image} bash .scripts/build_steps.sh",
        f"  in the container: conda-build recipe -m .ci_support/{name}.yaml "
        "(packages land in build_artifacts/<subdir>/)",
    ]
    if ns.debug:
        steps[-1] = "  in the container: conda debug (BUILD_WITH_CONDA_DEBUG=1), then an interactive shell"
    else:
        steps.append(f"write {os.path.relpath(marker_path(name), FEEDSTOCK_ROOT)}")
    return steps


# --------------------------------------------------------------------------- main


def build_one(ns: Namespace, name: str) -> None:
    values = read_config(name)
    if uses_docker(name):
        check_docker()
    if not ns.skip_disk_check:
        check_disk(name, values)
    if name.startswith("osx") and platform.system() == "Darwin" and not os.environ.get("OSX_SDK_DIR"):
        fail(
            "Need OSX_SDK_DIR env variable set. Run 'export OSX_SDK_DIR=$PWD/SDKs' "
            "to download the SDK automatically to '$PWD/SDKs/MacOSX<ver>.sdk'. "
            "Note: OSX_SDK_DIR must be set to an absolute path. "
            "Setting this variable implies agreement to the licensing terms of the SDK by Apple."
        )
    setup_environment(ns, name, values)
    if os.path.exists(marker_path(name)):
        os.remove(marker_path(name))
    started = time.time()
    try:
        if uses_docker(name):
            run_docker_build(ns)
        elif name.startswith("osx"):
            run_osx_build(ns)
        elif name.startswith("win"):
            run_win_build(ns)
    finally:
        recipe_license_file = os.path.join(FEEDSTOCK_ROOT, "recipe", "recipe-scripts-license.txt")
        if os.path.exists(recipe_license_file):
            os.remove(recipe_license_file)
    if not ns.debug:
        write_marker(name, started)


def parse_args(args: list[str] | None) -> Namespace:
    p = ArgumentParser("build-locally", description=DESCRIPTION)
    p.add_argument(
        "config",
        default=None,
        nargs="?",
        help="a .ci_support config name or an alias <platform>[_cudaX.Y|_cpu][_mkl|_generic][_pyX.Y][_k=v]",
    )
    p.add_argument(
        "--filter",
        default=None,
        help="Glob string to filter which build choices are presented in interactive mode.",
    )
    p.add_argument(
        "--debug",
        action="store_true",
        help=(
            "Setup debug environment using `conda debug` (or `rattler-build debug` for rattler-build recipes)"
        ),
    )
    p.add_argument("--output-id", help="If running debug, specify the output to setup.")
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print configs, image, variant, outputs and steps; run nothing",
    )
    p.add_argument("--force", action="store_true", help="rebuild configs that have a done marker")
    p.add_argument("--cpu-count", help="CPU_COUNT for the build (default: $CPU_COUNT or cores/RAM)")
    p.add_argument("--skip-disk-check", action="store_true", help="do not check free disk space")
    return p.parse_args(args=args)


def main(args: list[str] | None = None) -> int:
    ns = parse_args(args)
    try:
        names = select_configs(ns)
        if ns.debug and len(names) > 1:
            fail("--debug needs exactly one config; pick one of the names above")
        if ns.dry_run:
            print_dry_run(ns, names)
            return 0
        several = len(names) > 1
        for i, name in enumerate(names, 1):
            if several and is_done(name) and not ns.force:
                print(f"[{i}/{len(names)}] {name}: already built, skipping (--force rebuilds)")
                continue
            if several:
                print(f"[{i}/{len(names)}] building {name}", flush=True)
            build_one(ns, name)
    except UsageError as exc:
        print(f"build-locally: error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"build-locally: error: {exc.cmd[0]} failed with exit status {exc.returncode}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
