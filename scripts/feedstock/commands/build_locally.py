"""Build one or more .ci_support configs locally in docker, like CI does.

    python build-locally.py [CONFIG] [options]              # the feedstock's own entry
    python -m feedstock build-locally [CONFIG] [options]    # the same, in the feedstock's root

conda-smithy's build-locally.py interface (positional config, --filter, --debug, --output-id,
interactive choice), plus: short config aliases (:mod:`feedstock.configs`), several configs in
turn with resume markers (``build_artifacts/build-locally-done/<config>.json``), --dry-run,
one-line preflight errors (docker missing, daemon down, not enough disk), a compiler cache shared
by all configs and machines (:mod:`feedstock.compiler_cache`) and a build report per config
(:mod:`feedstock.commands.build_report`).

The feedstock it acts on is a parameter, never this package's location: build-locally.py passes
its own directory (the tests run copies of the feedstock), ``python -m feedstock build-locally``
the current directory.

Environment hooks (documented in docs/local-builds.md): ``BUILD_LOCALLY_FREE_BYTES`` pretends
this many bytes are free (tests), ``BUILD_LOCALLY_MIN_FREE_GB`` overrides the per-config
estimate, ``DOCKER_EXECUTABLE`` names a docker-compatible client (as in run_docker_build.sh).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
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

from feedstock import compiler_cache as cc
from feedstock import configs as fc
from feedstock.commands import build_report
from feedstock.errors import FeedstockError, UsageError, capped
from feedstock.paths import ARTIFACTS_DIR, done_marker

PROG = "feedstock build-locally"
DESCRIPTION = (__doc__ or "").splitlines()[0]
FALLBACK_IMAGE = "quay.io/condaforge/linux-anvil-x86_64:alma9"

# Free disk a config needs under build_artifacts/ (conda-bld root, package cache, host/build/test
# envs; the ~5 GB docker image lives in docker's own storage). Estimates, see docs/local-builds.md
# ("Why local builds"): a CPU megabuild is one build tree (~15 GB) plus 6 Python builds, per-output
# envs and packages; a CUDA tree holds device code for every arch, each host env a CUDA toolkit.
DISK_NEEDED_GB = {"cpu": 60, "cuda": 150}
GIB = 1024**3

# Where the docker build sees the feedstock, a cache dir that lies outside it, and (mounted
# read-only) the sccache config and the AWS credentials.
CONTAINER_FEEDSTOCK = "/home/conda/feedstock_root"
CONTAINER_CACHE = "/home/conda/compiler-cache"
CONTAINER_CACHE_CONF = "/home/conda/compiler-cache-config/sccache.toml"
CONTAINER_AWS_CREDENTIALS = "/home/conda/compiler-cache-config/aws-credentials"
CACHE_VARS = ("FEEDSTOCK_COMPILER_CACHE", "FEEDSTOCK_COMPILER_CACHE_CONF", "FEEDSTOCK_AWS_CREDENTIALS")

Values = dict[str, list[str]]


def feedstock_root(root: Path | str | None) -> Path:
    """The feedstock a run acts on: ``root`` (build-locally.py's own dir), else the current dir."""
    if root is not None:
        return Path(os.path.abspath(root))
    cwd = Path.cwd()
    if (cwd / ".ci_support").is_dir() and (cwd / "conda-forge.yml").is_file():
        return cwd
    raise UsageError(
        f"{cwd} is not a feedstock's root (no .ci_support/ or conda-forge.yml): "
        "run this in the feedstock, or run its build-locally.py"
    )


@dataclass(frozen=True)
class Options:
    """Everything a run depends on, resolved once from the command line and the environment."""

    root: Path  # the feedstock the run acts on
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
    prog: str = PROG  # how the program names itself in warnings

    # -- where things are in the feedstock

    @property
    def generated_cache_conf(self) -> Path:
        """The sccache config build-locally writes for a remote cache (no credential in it)."""
        return self.root / ARTIFACTS_DIR / "compiler-cache-config" / "sccache.toml"

    def telemetry(self, name: str) -> Path:
        """Per-config build telemetry (recipe/build.sh) and its report."""
        return self.root / ARTIFACTS_DIR / "telemetry" / name

    def is_done(self, name: str) -> bool:
        return done_marker(self.root, name).is_file()

    def rel(self, path: Path) -> Path:
        """``path`` as messages name it: relative to the feedstock."""
        return path.relative_to(self.root)


# --------------------------------------------------------------------------- configs


def all_config_names(root: Path, choices_filter: str | None = None) -> list[str]:
    return sorted(path.stem for path in (root / ".ci_support").glob(f"{choices_filter or '*'}.yaml"))


def load_configs(root: Path, names: list[str]) -> list[fc.Config]:
    return [fc.load_config(root / ".ci_support" / f"{name}.yaml") for name in names]


def read_config(root: Path, name: str) -> Values:
    """Variant values of one .ci_support config (all values are strings)."""
    try:
        return dict(load_configs(root, [name])[0].values)
    except fc.ConfigError as exc:
        raise UsageError(str(exc)) from None


def resolve(root: Path, name: str, choices_filter: str | None) -> list[str]:
    """Config names a positional argument stands for (exact name or alias); [] if none."""
    valid = all_config_names(root, choices_filter)
    if name in valid:
        return [name]
    try:
        return sorted(c.name for c in fc.resolve_configs(name, load_configs(root, valid)))
    except fc.ConfigError:
        return []


def is_cuda(values: Values) -> bool:
    return any(v not in ("None", "", None) for v in values.get("cuda_compiler_version", ["None"]))


def docker_image(values: Values) -> str:
    return (values.get("docker_image") or [FALLBACK_IMAGE])[-1]


def uses_docker(name: str) -> bool:
    return name.startswith("linux") or (name.startswith("osx") and platform.system() == "Linux")


def needed_gb(opts: Options, values: Values) -> int:
    if opts.min_free_gb is not None:
        return opts.min_free_gb
    return DISK_NEEDED_GB["cuda" if is_cuda(values) else "cpu"]


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


def check_disk(opts: Options, name: str, values: Values) -> None:
    need = needed_gb(opts, values)
    free = opts.free_bytes
    if free is None:
        path = opts.root / ARTIFACTS_DIR
        while not path.exists():
            path = path.parent
        free = shutil.disk_usage(path).free
    if free < need * GIB:
        raise UsageError(
            f"not enough disk space for {name}: {free / GIB:.1f} GiB free under build_artifacts/, a "
            f"{'CUDA' if is_cuda(values) else 'CPU'} config needs about {need} GiB "
            "(override: BUILD_LOCALLY_MIN_FREE_GB, or --skip-disk-check)"
        )


def prepare_compiler_cache(opts: Options, cache: cc.CompilerCache, native: bool) -> None:
    """The local dir is usable and the remote cache's config is written, or a one-line error.

    An error rather than an uncached build: the user asked for the cache, and a CUDA config
    that silently builds uncached costs many hours. (Inside the build, build.sh only warns.)
    """
    path = cache.local_dir
    if path is not None:
        if any(c.isspace() for c in str(path)):
            raise UsageError(
                f"compiler cache dir {str(path)!r} contains whitespace: docker's -v cannot mount it"
            )
        other = "pass another --compiler-cache DIR or --no-compiler-cache"
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot create compiler cache dir {path}: {exc.strerror}; {other}") from None
        if not os.access(path, os.W_OK | os.X_OK):
            raise UsageError(f"compiler cache dir {path} is not writable; {other}")
    if cache.needs_config and cache.config_file is None:
        local = None if path is None else str(path) if native else container_path(opts.root, path)
        cc.write_config(cc.sccache_config(cache, local), opts.generated_cache_conf)


def preflight(opts: Options, name: str, values: Values) -> None:
    """Everything that can refuse a config, before its build starts."""
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
        prepare_compiler_cache(opts, opts.compiler_cache, native=not uses_docker(name))


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


# --------------------------------------------------------------------------- conda-smithy parts


def container_path(root: Path, host_path: Path | str) -> str:
    """Where the docker build sees ``host_path``: under the mounted feedstock, or its own mount."""
    rel = os.path.relpath(host_path, root)
    if rel == os.curdir or not rel.startswith(os.pardir):
        return CONTAINER_FEEDSTOCK + "/" + rel.replace(os.sep, "/")
    return CONTAINER_CACHE


def cache_mounts(opts: Options) -> list[tuple[str, Path, str, str]]:
    """(variable, host path, path in the container, mount mode) of each compiler cache dir or file
    the build uses; the variables carry paths only, never a credential."""
    cache = opts.compiler_cache
    if cache is None:
        return []
    mounts = []
    if cache.local_dir is not None:
        mounts.append((CACHE_VARS[0], cache.local_dir, container_path(opts.root, cache.local_dir), "rw"))
    if cache.needs_config:
        conf = cache.config_file or opts.generated_cache_conf
        mounts.append((CACHE_VARS[1], conf, CONTAINER_CACHE_CONF, "ro"))
    if cache.aws_credentials is not None:
        mounts.append((CACHE_VARS[2], cache.aws_credentials, CONTAINER_AWS_CREDENTIALS, "ro"))
    return mounts


def docker_run_args(opts: Options, name: str, existing: str) -> str:
    """CONDA_FORGE_DOCKER_RUN_ARGS: run_docker_build.sh forwards a fixed list of variables and
    mounts only the feedstock; the cache and telemetry dirs come in through this hook (a dir
    outside the feedstock, and the cache's config and credentials files, as their own mounts)."""
    args = [existing] if existing else []
    args.append(f"-e FEEDSTOCK_BUILD_TELEMETRY={container_path(opts.root, opts.telemetry(name))}")
    for var, host, inside, mode in cache_mounts(opts):
        if not inside.startswith(CONTAINER_FEEDSTOCK):
            args.append(f"-v {host}:{inside}:{mode}")
        args.append(f"-e {var}={inside}")
    return " ".join(args)


def setup_environment(opts: Options, name: str, values: Values) -> None:
    os.environ.update(CONFIG=name, UPLOAD_PACKAGES="False", IS_PR_BUILD="True", CPU_COUNT=opts.cpu_count)
    # build_steps.sh validates every output against conda-forge's feedstock-outputs under this
    # name; without it run_docker_build.sh uses the checkout's directory name, and a clone not
    # named pytorch-cpu-feedstock fails validation (libtorch, pytorch, ... belong to pytorch-cpu).
    os.environ.setdefault("FEEDSTOCK_NAME", "pytorch-cpu-feedstock")
    if uses_docker(name):
        os.environ["DOCKER_IMAGE"] = docker_image(values)
        os.environ["CONDA_FORGE_DOCKER_RUN_ARGS"] = docker_run_args(opts, name, opts.user_docker_run_args)
    else:
        # native builds: conda-build takes script_env from this environment (host paths)
        os.environ["FEEDSTOCK_BUILD_TELEMETRY"] = str(opts.telemetry(name))
        for key in CACHE_VARS:
            os.environ.pop(key, None)
        os.environ.update({var: str(host) for var, host, _, _ in cache_mounts(opts)})
    if opts.debug:
        os.environ["BUILD_WITH_CONDA_DEBUG"] = "1"
        if opts.output_id:
            os.environ["BUILD_OUTPUT_ID"] = opts.output_id
    os.environ.setdefault("MINIFORGE_HOME", str(opts.root / "miniforge3"))


def run_build_script(root: Path, name: str) -> None:
    """conda-smithy's platform script for ``name`` (docker on linux, native on osx and win)."""
    if uses_docker(name):
        subprocess.check_call([".scripts/run_docker_build.sh"], cwd=root)
    elif name.startswith("osx"):
        subprocess.check_call([".scripts/run_osx_build.sh"], cwd=root)
    elif name.startswith("win"):
        subprocess.check_call(["cmd", "/D", "/Q", "/C", "CALL .scripts/run_win_build.bat"], cwd=root)


def choose_interactively(valid: list[str]) -> str:
    print("config not selected, please choose from the following:\n")
    print(*(f"{i}. {c}" for i, c in enumerate(valid, 1)), sep="\n")
    try:
        s = input("\n> ")
    except (KeyboardInterrupt, EOFError):
        print()
        raise FeedstockError("no option selected, bye!") from None
    try:
        idx = int(s) - 1
        if not 0 <= idx < len(valid):
            raise ValueError
    except ValueError:
        raise UsageError(f"invalid choice {s!r}: enter a number between 1 and {len(valid)}") from None
    print(f"selected {valid[idx]}")
    return valid[idx]


def select_configs(opts: Options) -> list[str]:
    valid = all_config_names(opts.root, opts.filter)
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
            print("valid configs are:", *(f"  {n}" for n in valid), sep="\n", file=sys.stderr)
            raise UsageError("no config given and stdin is not a terminal: name one of the configs above")
        return [choose_interactively(valid)]
    return select_named(opts, opts.config, valid)


def select_named(opts: Options, config: str, valid: list[str]) -> list[str]:
    """The configs ``config`` names (exactly, or as an alias), announced; one line if none."""
    names = resolve(opts.root, config, opts.filter)
    if not names:
        # One line, however many configs there are: running without a name lists them all.
        try:
            aliases = fc.example_aliases(load_configs(opts.root, valid))
        except fc.ConfigError:
            aliases = []
        hint = f"; aliases: {capped(aliases)}" if aliases else ""
        raise UsageError(
            f"'{config}' matches none of the {len(valid)} configs{hint}"
            " (run without a config name to list them)"
        )
    if names == [config]:
        print(f"Using {config} configuration")
    elif len(names) == 1:
        print(f"'{config}' selects {names[0]}")
    else:
        print(f"'{config}' matches {len(names)} configs:")
        for n in names:
            print(f"  {n}{'  (done)' if opts.is_done(n) else ''}")
    return names


# --------------------------------------------------------------------------- dry run


def print_dry_run(opts: Options, names: list[str]) -> None:
    skipping = opts.config is not None and len(names) > 1 and not opts.force
    for i, name in enumerate(names, 1):
        values = read_config(opts.root, name)
        print(f"\n[{i}/{len(names)}] {name}")
        if skipping and opts.is_done(name):
            print(f"  already built ({opts.rel(done_marker(opts.root, name))}): would skip")
        print(f"  docker image: {docker_image(values) if uses_docker(name) else '(none: native build)'}")
        print("  variant:")
        skip = {"docker_image", "zip_keys", "pin_run_as_build", "channel_sources", "cdt_name"}
        for key in sorted(values.keys() - skip):
            print(f"    {key}: {', '.join(values[key])}")
        print("  outputs:")
        print_outputs(opts.root, name)
        print(f"  disk: needs about {needed_gb(opts, values)} GiB free under build_artifacts/")
        cache = opts.compiler_cache
        print(f"  compiler cache: {cache.describe() if cache else 'off (--no-compiler-cache)'}")
        print("  steps:")
        for n, step in enumerate(build_steps(opts, name, values), 1):
            print(f"    {n}. {step}")
    print("\ndry run: nothing was run")


def print_outputs(root: Path, name: str) -> None:
    """Outputs of one config from :mod:`feedstock.render`, or a one-line note why not."""
    try:
        from feedstock import render
    except ImportError as exc:
        if getattr(exc, "name", None) in ("jinja2", "yaml", "markupsafe"):
            print(
                f"    (outputs not shown: the render library needs jinja2 and pyyaml ({exc}); "
                "get them with: python3 -m pip install jinja2 pyyaml)"
            )
        else:
            print(f"    (outputs not shown: feedstock.render is not importable: {exc})")
        return
    try:
        outs = render.render_config(root / ".ci_support" / f"{name}.yaml", root / "recipe")
    except Exception as exc:  # the render library's own errors: report, don't crash the dry run
        print(f"    (outputs not shown: rendering failed: {type(exc).__name__}: {exc})")
        return
    for o in outs:
        print(f"    {o.subdir}/{o.dist}.conda  (build number {o.build_number})")


def build_steps(opts: Options, name: str, values: Values) -> list[str]:
    env = f"CONFIG={name} UPLOAD_PACKAGES=False IS_PR_BUILD=True CPU_COUNT={opts.cpu_count}"
    marker = f"write {opts.rel(done_marker(opts.root, name))}"
    report = (
        f"python -m feedstock build-report {opts.rel(opts.telemetry(name))} --title {name} "
        "(report.md, timeline.png)"
    )
    if not uses_docker(name):
        script = ".scripts/run_win_build.bat" if name.startswith("win") else ".scripts/run_osx_build.sh"
        return [f"{env} {script}", marker, report]
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
        steps.append(marker)
        if opts.report:
            steps.append(report)
    return steps


# --------------------------------------------------------------------------- the build


def write_report(opts: Options, name: str) -> None:
    """build-report on this config's telemetry; a failure here is only a warning."""
    tdir = opts.telemetry(name)
    if not (tdir / "passes.jsonl").is_file():
        print(f"build report: no telemetry recorded in {opts.rel(tdir)}/")
        return
    argv = [str(tdir), "--title", name]
    if importlib.util.find_spec("matplotlib") is None:
        print("build report: no timeline PNG (python -m pip install matplotlib)")
        argv.append("--no-png")
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # it prints report.md: the file is enough
            build_report.main(argv)
    except (FeedstockError, OSError) as exc:
        print(f"{opts.prog}: warning: build report failed: {exc}", file=sys.stderr)
    else:
        print(f"build report: {opts.rel(tdir / 'report.md')}")


def build_one(opts: Options, name: str) -> None:
    root = opts.root
    values = read_config(root, name)
    preflight(opts, name, values)
    setup_environment(opts, name, values)
    done_marker(root, name).unlink(missing_ok=True)
    # build.sh appends to passes.jsonl: an earlier attempt's passes must not count
    shutil.rmtree(opts.telemetry(name), ignore_errors=True)
    opts.telemetry(name).mkdir(parents=True, exist_ok=True)
    started = time.time()
    try:
        run_build_script(root, name)
    finally:
        (root / "recipe" / "recipe-scripts-license.txt").unlink(missing_ok=True)
    if not opts.debug:
        # the marker is written whole (a temporary file, then a rename): a crash leaves none
        info = {"config": name, "started": started, "finished": time.time()}
        cc.write_config(json.dumps(info), done_marker(root, name))
        if opts.report:
            write_report(opts, name)


# --------------------------------------------------------------------------- main


def _int_from_env(environ: Mapping[str, str], key: str) -> int | None:
    value = environ.get(key)
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise UsageError(f"{key}={value!r} is not a whole number") from None


def make_parser(prog: str) -> ArgumentParser:
    # a short usage: a usage error prints it, and the option list is long (see --help)
    p = ArgumentParser(
        prog, usage="%(prog)s [CONFIG] [options]  (--help lists them)", description=DESCRIPTION
    )
    p.add_argument(
        "config",
        nargs="?",
        help="a .ci_support config name or an alias <platform>[_cudaX.Y|_cpu][_mkl|_generic][_pyX.Y][_k=v]",
    )
    valued = ("--filter", "--output-id", "--cpu-count")  # the others are switches
    for flag, text in (  # in --help's order
        ("--filter", "Glob string to filter which build choices are presented in interactive mode."),
        ("--debug", "Setup debug environment using `conda debug` (or `rattler-build debug` for "
         "rattler-build recipes)"),
        ("--output-id", "If running debug, specify the output to setup."),
        ("--dry-run", "print configs, image, variant, outputs and steps; run nothing"),
        ("--force", "rebuild configs that have a done marker"),
        ("--cpu-count", "CPU_COUNT for the build (default: $CPU_COUNT or cores/RAM)"),
        ("--skip-disk-check", "do not check free disk space"),
        ("--no-report", "skip the build report (build_artifacts/telemetry/<config>/)"),
    ):  # fmt: skip
        p.add_argument(flag, action="store" if flag in valued else "store_true", help=text)
    cc.add_arguments(p, "build_artifacts/compiler-cache")
    return p


def resolve_options(
    argv: Sequence[str] | None, environ: Mapping[str, str], root: Path | str | None, prog: str = PROG
) -> Options:
    """The run's options; ``root`` None: the current dir, if it is a feedstock's root."""
    ns = make_parser(prog).parse_args(args=argv)  # first: --help works anywhere
    feedstock = feedstock_root(root)
    as_parsed = ("config", "filter", "debug", "output_id", "dry_run", "force", "skip_disk_check")
    # the compiler cache every config shares (docs/local-builds.md, "The compiler cache")
    cache = cc.resolve(cc.args_from(ns), feedstock / ARTIFACTS_DIR / "compiler-cache", feedstock)
    return Options(
        root=feedstock,
        **{key: getattr(ns, key) for key in as_parsed},
        cpu_count=ns.cpu_count or default_cpu_count(environ),
        free_bytes=_int_from_env(environ, "BUILD_LOCALLY_FREE_BYTES"),
        min_free_gb=_int_from_env(environ, "BUILD_LOCALLY_MIN_FREE_GB"),
        docker=environ.get("DOCKER_EXECUTABLE", "docker"),
        user_docker_run_args=environ.get("CONDA_FORGE_DOCKER_RUN_ARGS", ""),
        compiler_cache=cache,
        report=not ns.no_report,
        prog=prog,
    )


def main(argv: Sequence[str] | None = None, root: Path | str | None = None, *, prog: str = PROG) -> int:
    """Build the selected configs of the feedstock at ``root`` (None: the current dir)."""
    opts = resolve_options(argv, os.environ, root, prog)
    names = select_configs(opts)
    if opts.debug and len(names) > 1:
        raise UsageError("--debug needs exactly one config; pick one of the names above")
    if opts.dry_run:
        print_dry_run(opts, names)
        return 0
    several = len(names) > 1
    for i, name in enumerate(names, 1):
        if several and opts.is_done(name) and not opts.force:
            print(f"[{i}/{len(names)}] {name}: already built, skipping (--force rebuilds)")
            continue
        if several:
            print(f"[{i}/{len(names)}] building {name}", flush=True)
        try:
            build_one(opts, name)
        except subprocess.CalledProcessError as exc:
            raise FeedstockError(f"{exc.cmd[0]} failed with exit status {exc.returncode}") from None
    return 0
