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
# configs in turn with resume markers, --dry-run, clear preflight errors
# (docker missing, daemon down, not enough disk), a compiler cache shared by all
# configs and machines (--compiler-cache DIR, s3://..., redis://...; see
# scripts/feedstock/compiler_cache.py) and a build report per config (scripts/build_report.py).
from __future__ import annotations

import glob
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from argparse import ArgumentParser
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DESCRIPTION = "Build one or more .ci_support configs locally in docker, like CI does."
FEEDSTOCK_ROOT = os.path.dirname(os.path.abspath(__file__))
CI_SUPPORT = os.path.join(FEEDSTOCK_ROOT, ".ci_support")
ARTIFACTS = os.path.join(FEEDSTOCK_ROOT, "build_artifacts")
FALLBACK_IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"
PROG = "build-locally"

# Free disk space a config needs under build_artifacts/ (the conda-bld root,
# package cache and host/build/test envs all live there; the docker image,
# ~5 GB, lives in docker's own storage). Estimates, see docs/local-builds.md
# ("Why local builds"): a CPU megabuild is one build tree (~15 GB) plus 6 Python builds,
# per-output envs and packages; a CUDA build tree holds device code for every
# architecture, and each output's host env carries a CUDA toolkit.
DISK_NEEDED_GB = {"cpu": 60, "cuda": 150}
GIB = 1024**3

# The compiler cache every config shares (sccache's dir; docs/local-builds.md, "The compiler
# cache").
DEFAULT_COMPILER_CACHE = os.path.join(ARTIFACTS, "compiler-cache")
# Per-config build telemetry (recipe/build.sh) and its report (scripts/build_report.py).
TELEMETRY_DIR = os.path.join(ARTIFACTS, "telemetry")
# Where the docker build sees the feedstock, and a cache dir that lies outside it.
CONTAINER_FEEDSTOCK = "/home/conda/feedstock_root"
CONTAINER_CACHE = "/home/conda/compiler-cache"
# Where the build reads the sccache config and the AWS credentials (mounted read-only).
CONTAINER_CACHE_CONF = "/home/conda/compiler-cache-config/sccache.toml"
CONTAINER_AWS_CREDENTIALS = "/home/conda/compiler-cache-config/aws-credentials"
# The sccache config build-locally writes for a remote cache (no credential in it).
GENERATED_CACHE_CONF = os.path.join(ARTIFACTS, "compiler-cache-config", "sccache.toml")

# Environment hooks (documented in docs/local-builds.md):
#   BUILD_LOCALLY_FREE_BYTES  pretend this many bytes are free (tests)
#   BUILD_LOCALLY_MIN_FREE_GB override the per-config estimate
#   DOCKER_EXECUTABLE         docker-compatible client (as in run_docker_build.sh)

sys.path.insert(0, os.path.join(FEEDSTOCK_ROOT, "scripts"))

from feedstock import compiler_cache as cc  # noqa: E402
from feedstock.errors import FeedstockError, UsageError, capped, run_main  # noqa: E402
from feedstock.paths import DONE_MARKER_DIR, done_marker  # noqa: E402


@dataclass(frozen=True)
class Options:
    """Everything a run depends on, resolved once from the command line and the environment."""

    config: str | None
    filter: str | None
    debug: bool
    output_id: str | None
    dry_run: bool
    force: bool
    cpu_count: str
    skip_disk_check: bool
    free_bytes: int | None  # BUILD_LOCALLY_FREE_BYTES
    min_free_gb: int | None  # BUILD_LOCALLY_MIN_FREE_GB
    docker: str  # DOCKER_EXECUTABLE
    user_docker_run_args: str  # the caller's CONDA_FORGE_DOCKER_RUN_ARGS, extended per config
    compiler_cache: cc.CompilerCache | None  # None: --no-compiler-cache
    report: bool


# --------------------------------------------------------------------------- configs


def _configs_module() -> Any:
    try:
        from feedstock import configs
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


def check_docker(opts: Options) -> None:
    exe = opts.docker
    if shutil.which(exe) is None:
        raise UsageError(
            f"'{exe}' not found on PATH: install Docker Engine "
            "(https://docs.docker.com/engine/install/) or set DOCKER_EXECUTABLE"
        )
    proc = subprocess.run([exe, "info"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
        detail = lines[-1] if lines else f"exit status {proc.returncode}"
        raise UsageError(f"the docker daemon is not running or not reachable ('{exe} info' failed: {detail})")


def free_bytes(opts: Options, path: str) -> int:
    if opts.free_bytes is not None:
        return opts.free_bytes
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def needed_gb(opts: Options, values: dict[str, list[str]]) -> int:
    if opts.min_free_gb is not None:
        return opts.min_free_gb
    return DISK_NEEDED_GB["cuda" if is_cuda(values) else "cpu"]


def check_disk(opts: Options, name: str, values: dict[str, list[str]]) -> None:
    need = needed_gb(opts, values)
    free = free_bytes(opts, ARTIFACTS)
    if free < need * GIB:
        kind = "CUDA" if is_cuda(values) else "CPU"
        raise UsageError(
            f"not enough disk space for {name}: {free / GIB:.1f} GiB free under build_artifacts/, "
            f"a {kind} config needs about {need} GiB (override: BUILD_LOCALLY_MIN_FREE_GB, "
            "or --skip-disk-check)"
        )


def prepare_compiler_cache(cache: cc.CompilerCache, native: bool) -> None:
    """The local dir is usable and the remote cache's config is written, or a one-line error."""
    if cache.local_dir is not None:
        prepare_cache_dir(str(cache.local_dir))
    if cache.needs_config and cache.config_file is None:
        local = None
        if cache.local_dir is not None:
            local = str(cache.local_dir) if native else container_path(str(cache.local_dir))
        cc.write_config(cc.sccache_config(cache, local), Path(GENERATED_CACHE_CONF))


def cache_config_file(cache: cc.CompilerCache) -> str:
    """The sccache config the build reads, on this machine."""
    return str(cache.config_file) if cache.config_file else GENERATED_CACHE_CONF


def prepare_cache_dir(path: str) -> None:
    """The cache dir exists and is writable, or a one-line error before anything runs.

    An error rather than an uncached build: the user asked for the cache, and a CUDA config
    that silently builds uncached costs many hours. (Inside the build, build.sh only warns.)
    """
    if any(c.isspace() for c in path):
        raise UsageError(f"compiler cache dir {path!r} contains whitespace: docker's -v cannot mount it")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UsageError(
            f"cannot create compiler cache dir {path}: {exc.strerror}; "
            "pass another --compiler-cache DIR or --no-compiler-cache"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(
            f"compiler cache dir {path} is not writable; "
            "pass another --compiler-cache DIR or --no-compiler-cache"
        )


def default_cpu_count(environ: Mapping[str, str]) -> str:
    """CPU_COUNT for the build: the caller's, else cores capped at one job per 4 GiB of RAM."""
    if environ.get("CPU_COUNT"):
        return environ["CPU_COUNT"]
    cores = os.cpu_count() or 1
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal:"))
        cores = max(1, min(cores, kib // (4 * 1024 * 1024)))
    except (OSError, StopIteration, ValueError):
        pass
    return str(cores)


# --------------------------------------------------------------------------- markers and reports


def marker_path(name: str) -> str:
    return str(done_marker(FEEDSTOCK_ROOT, name))


def is_done(name: str) -> bool:
    return os.path.isfile(marker_path(name))


def write_marker(name: str, started: float) -> None:
    os.makedirs(os.path.join(FEEDSTOCK_ROOT, DONE_MARKER_DIR), exist_ok=True)
    tmp = marker_path(name) + ".tmp"
    info = {"config": name, "started": started, "finished": time.time()}
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    os.replace(tmp, marker_path(name))


def telemetry_dir(name: str) -> str:
    return os.path.join(TELEMETRY_DIR, name)


def write_report(name: str) -> None:
    """scripts/build_report.py on this config's telemetry; a failure here is only a warning."""
    tdir = telemetry_dir(name)
    if not os.path.isfile(os.path.join(tdir, "passes.jsonl")):
        print(f"build report: no telemetry recorded in {os.path.relpath(tdir, FEEDSTOCK_ROOT)}/")
        return
    cmd = [sys.executable, os.path.join(FEEDSTOCK_ROOT, "scripts", "build_report.py"), tdir, "--title", name]
    if importlib.util.find_spec("matplotlib") is None:
        print("build report: no timeline PNG (python -m pip install matplotlib)")
        cmd.append("--no-png")
    proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        print(f"{PROG}: warning: build report failed: {proc.stderr.strip()}", file=sys.stderr)
    else:
        print(f"build report: {os.path.relpath(os.path.join(tdir, 'report.md'), FEEDSTOCK_ROOT)}")


# --------------------------------------------------------------------------- conda-smithy parts


def container_path(host_path: str) -> str:
    """Where the docker build sees ``host_path``: under the mounted feedstock, or its own mount."""
    rel = os.path.relpath(host_path, FEEDSTOCK_ROOT)
    if rel == os.curdir or not rel.startswith(os.pardir):
        return CONTAINER_FEEDSTOCK + "/" + rel.replace(os.sep, "/")
    return CONTAINER_CACHE


def docker_run_args(opts: Options, name: str, existing: str) -> str:
    """CONDA_FORGE_DOCKER_RUN_ARGS: run_docker_build.sh forwards a fixed list of variables and
    mounts only the feedstock; the cache and telemetry dirs come in through this hook. The
    cache's config and credentials files come in read-only, and only their paths are values."""
    args = [existing] if existing else []
    args.append(f"-e FEEDSTOCK_BUILD_TELEMETRY={container_path(telemetry_dir(name))}")
    cache = opts.compiler_cache
    if cache is None:
        return " ".join(args)
    if cache.local_dir is not None:
        inside = container_path(str(cache.local_dir))
        if inside == CONTAINER_CACHE:
            args.append(f"-v {cache.local_dir}:{CONTAINER_CACHE}:rw")
        args.append(f"-e FEEDSTOCK_COMPILER_CACHE={inside}")
    if cache.needs_config:
        args.append(f"-v {cache_config_file(cache)}:{CONTAINER_CACHE_CONF}:ro")
        args.append(f"-e FEEDSTOCK_COMPILER_CACHE_CONF={CONTAINER_CACHE_CONF}")
    if cache.aws_credentials is not None:
        args.append(f"-v {cache.aws_credentials}:{CONTAINER_AWS_CREDENTIALS}:ro")
        args.append(f"-e FEEDSTOCK_AWS_CREDENTIALS={CONTAINER_AWS_CREDENTIALS}")
    return " ".join(args)


def native_cache_env(cache: cc.CompilerCache | None) -> dict[str, str]:
    """The build's cache variables for a build without docker (host paths)."""
    env = {}
    if cache is not None and cache.local_dir is not None:
        env["FEEDSTOCK_COMPILER_CACHE"] = str(cache.local_dir)
    if cache is not None and cache.needs_config:
        env["FEEDSTOCK_COMPILER_CACHE_CONF"] = cache_config_file(cache)
    if cache is not None and cache.aws_credentials is not None:
        env["FEEDSTOCK_AWS_CREDENTIALS"] = str(cache.aws_credentials)
    return env


def setup_environment(opts: Options, name: str, values: dict[str, list[str]]) -> None:
    os.environ["CONFIG"] = name
    os.environ["UPLOAD_PACKAGES"] = "False"
    os.environ["IS_PR_BUILD"] = "True"
    os.environ["CPU_COUNT"] = opts.cpu_count
    # build_steps.sh validates every output against conda-forge's feedstock-outputs under this
    # name; without it run_docker_build.sh uses the checkout's directory name, and a clone not
    # named pytorch-cpu-feedstock fails validation (libtorch, pytorch, ... belong to pytorch-cpu).
    os.environ.setdefault("FEEDSTOCK_NAME", "pytorch-cpu-feedstock")
    if uses_docker(name):
        os.environ["DOCKER_IMAGE"] = docker_image(values)
        os.environ["CONDA_FORGE_DOCKER_RUN_ARGS"] = docker_run_args(opts, name, opts.user_docker_run_args)
    else:
        # native builds: conda-build takes script_env from this environment
        os.environ["FEEDSTOCK_BUILD_TELEMETRY"] = telemetry_dir(name)
        for key in ("FEEDSTOCK_COMPILER_CACHE", "FEEDSTOCK_COMPILER_CACHE_CONF", "FEEDSTOCK_AWS_CREDENTIALS"):
            os.environ.pop(key, None)
        os.environ.update(native_cache_env(opts.compiler_cache))
    if opts.debug:
        os.environ["BUILD_WITH_CONDA_DEBUG"] = "1"
        if opts.output_id:
            os.environ["BUILD_OUTPUT_ID"] = opts.output_id
    if "MINIFORGE_HOME" not in os.environ:
        os.environ["MINIFORGE_HOME"] = os.path.join(FEEDSTOCK_ROOT, "miniforge3")


def run_docker_build() -> None:
    subprocess.check_call([".scripts/run_docker_build.sh"], cwd=FEEDSTOCK_ROOT)


def run_osx_build() -> None:
    subprocess.check_call([".scripts/run_osx_build.sh"], cwd=FEEDSTOCK_ROOT)


def run_win_build() -> None:
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
        raise UsageError(f"invalid choice {s!r}: enter a number between 1 and {len(selections)}") from None
    print(f"selected {selections[idx][1]}")
    return selections[idx][1]


def select_configs(opts: Options) -> list[str]:
    valid = all_config_names(opts.filter)
    if opts.filter:
        print(f"filtering for '{opts.filter}.yaml' configs")
    if not valid:
        raise UsageError(
            f"no .ci_support/{opts.filter or '*'}.yaml config files found (run a rerender first)"
        )
    if opts.config is None:
        if len(valid) == 1:
            print(f"Found {valid[0]} configuration")
            return valid
        if not sys.stdin.isatty():
            print("valid configs are:", file=sys.stderr)
            for n in valid:
                print(f"  {n}", file=sys.stderr)
            raise UsageError("no config given and stdin is not a terminal: name one of the configs above")
        return [choose_interactively(valid)]
    names = resolve(opts.config, opts.filter)
    if not names:
        # One line, however many configs there are: running without a name lists them all.
        aliases = alias_examples(opts.filter)
        hint = f"; aliases: {capped(aliases)}" if aliases else ""
        raise UsageError(
            f"'{opts.config}' matches none of the {len(valid)} configs{hint}"
            " (run build-locally.py without a name to list them)"
        )
    if names == [opts.config]:
        print(f"Using {opts.config} configuration")
    elif len(names) == 1:
        print(f"'{opts.config}' selects {names[0]}")
    else:
        print(f"'{opts.config}' matches {len(names)} configs:")
        for n in names:
            print(f"  {n}{'  (done)' if is_done(n) else ''}")
    return names


# --------------------------------------------------------------------------- dry run


def render_outputs(name: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """Outputs of one config from scripts/feedstock/render.py, or (None, a one-line note)."""
    try:
        from feedstock import render
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


def print_dry_run(opts: Options, names: list[str]) -> None:
    skipping = opts.config is not None and len(names) > 1 and not opts.force
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
        need = needed_gb(opts, values)
        print(f"  disk: needs about {need} GiB free under build_artifacts/")
        cache = opts.compiler_cache
        print(f"  compiler cache: {cache.describe() if cache else 'off (--no-compiler-cache)'}")
        print("  steps:")
        for n, step in enumerate(build_steps(opts, name, values), 1):
            print(f"    {n}. {step}")
    print("\ndry run: nothing was run")


def build_steps(opts: Options, name: str, values: dict[str, list[str]]) -> list[str]:
    env = f"CONFIG={name} UPLOAD_PACKAGES=False IS_PR_BUILD=True CPU_COUNT={opts.cpu_count}"
    report = (
        f"python scripts/build_report.py {os.path.relpath(telemetry_dir(name), FEEDSTOCK_ROOT)} "
        "(report.md, timeline.png)"
    )
    if not uses_docker(name):
        script = ".scripts/run_win_build.bat" if name.startswith("win") else ".scripts/run_osx_build.sh"
        return [f"{env} {script}", f"write {os.path.relpath(marker_path(name), FEEDSTOCK_ROOT)}", report]
    image = docker_image(values)
    steps = [
        f"{opts.docker} info; check free disk space (>= {needed_gb(opts, values)} GiB)",
        f"{env} DOCKER_IMAGE={image} CONDA_FORGE_DOCKER_RUN_ARGS='{docker_run_args(opts, name, '')}' "
        ".scripts/run_docker_build.sh",
        f"  {opts.docker} pull {image}",
        f"  {opts.docker} run -v recipe:/home/conda/recipe_root "
        f"-v .:/home/conda/feedstock_root ... {image} bash .scripts/build_steps.sh",
        f"  in the container: conda-build recipe -m .ci_support/{name}.yaml "
        "(packages land in build_artifacts/<subdir>/)",
    ]
    if opts.debug:
        steps[-1] = "  in the container: conda debug (BUILD_WITH_CONDA_DEBUG=1), then an interactive shell"
    else:
        steps.append(f"write {os.path.relpath(marker_path(name), FEEDSTOCK_ROOT)}")
        if opts.report:
            steps.append(report)
    return steps


# --------------------------------------------------------------------------- main


def build_one(opts: Options, name: str) -> None:
    values = read_config(name)
    if uses_docker(name):
        check_docker(opts)
    if not opts.skip_disk_check:
        check_disk(opts, name, values)
    if name.startswith("osx") and platform.system() == "Darwin" and not os.environ.get("OSX_SDK_DIR"):
        raise UsageError(
            "Need OSX_SDK_DIR env variable set. Run 'export OSX_SDK_DIR=$PWD/SDKs' "
            "to download the SDK automatically to '$PWD/SDKs/MacOSX<ver>.sdk'. "
            "Note: OSX_SDK_DIR must be set to an absolute path. "
            "Setting this variable implies agreement to the licensing terms of the SDK by Apple."
        )
    if opts.compiler_cache is not None:
        if opts.compiler_cache.remote is not None and name.startswith("win"):
            raise UsageError(f"{name}: bld.bat takes only a local compiler cache dir, not a remote one")
        prepare_compiler_cache(opts.compiler_cache, native=not uses_docker(name))
    setup_environment(opts, name, values)
    if os.path.exists(marker_path(name)):
        os.remove(marker_path(name))
    # build.sh appends to passes.jsonl: an earlier attempt's passes must not count
    shutil.rmtree(telemetry_dir(name), ignore_errors=True)
    os.makedirs(telemetry_dir(name), exist_ok=True)
    started = time.time()
    try:
        if uses_docker(name):
            run_docker_build()
        elif name.startswith("osx"):
            run_osx_build()
        elif name.startswith("win"):
            run_win_build()
    finally:
        recipe_license_file = os.path.join(FEEDSTOCK_ROOT, "recipe", "recipe-scripts-license.txt")
        if os.path.exists(recipe_license_file):
            os.remove(recipe_license_file)
    if not opts.debug:
        write_marker(name, started)
        if opts.report:
            write_report(name)


def _int_from_env(environ: Mapping[str, str], key: str) -> int | None:
    value = environ.get(key)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{key}={value!r} is not a whole number") from None


def resolve_options(argv: Sequence[str] | None, environ: Mapping[str, str]) -> Options:
    # a short usage: a usage error prints it, and the option list is long (see --help)
    p = ArgumentParser(
        PROG, usage="%(prog)s [CONFIG] [options]  (--help lists them)", description=DESCRIPTION
    )
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
    cc.add_arguments(p, "build_artifacts/compiler-cache")
    p.add_argument(
        "--no-report", action="store_true", help="skip the build report (build_artifacts/telemetry/<config>/)"
    )
    ns = p.parse_args(args=argv)
    return Options(
        config=ns.config,
        filter=ns.filter,
        debug=ns.debug,
        output_id=ns.output_id,
        dry_run=ns.dry_run,
        force=ns.force,
        cpu_count=ns.cpu_count or default_cpu_count(environ),
        skip_disk_check=ns.skip_disk_check,
        free_bytes=_int_from_env(environ, "BUILD_LOCALLY_FREE_BYTES"),
        min_free_gb=_int_from_env(environ, "BUILD_LOCALLY_MIN_FREE_GB"),
        docker=environ.get("DOCKER_EXECUTABLE", "docker"),
        user_docker_run_args=environ.get("CONDA_FORGE_DOCKER_RUN_ARGS", ""),
        compiler_cache=cc.resolve(cc.args_from(ns), Path(DEFAULT_COMPILER_CACHE), Path(FEEDSTOCK_ROOT)),
        report=not ns.no_report,
    )


def main(argv: Sequence[str] | None = None) -> int:
    opts = resolve_options(argv, os.environ)
    names = select_configs(opts)
    if opts.debug and len(names) > 1:
        raise UsageError("--debug needs exactly one config; pick one of the names above")
    if opts.dry_run:
        print_dry_run(opts, names)
        return 0
    several = len(names) > 1
    for i, name in enumerate(names, 1):
        if several and is_done(name) and not opts.force:
            print(f"[{i}/{len(names)}] {name}: already built, skipping (--force rebuilds)")
            continue
        if several:
            print(f"[{i}/{len(names)}] building {name}", flush=True)
        try:
            build_one(opts, name)
        except subprocess.CalledProcessError as exc:
            raise FeedstockError(f"{exc.cmd[0]} failed with exit status {exc.returncode}") from None
    return 0


if __name__ == "__main__":
    sys.exit(run_main(PROG, main, sys.argv[1:]))
