#!/usr/bin/env python3
"""Cross-check the feedstock against the real conda-build and conda-smithy, in an environment of its own.

    python -m feedstock cross-check                      # sources from GitHub
    python -m feedstock cross-check --sources DIR        # no network to GitHub: local sources
    python -m feedstock cross-check --sources DIR --ref rattler-build-conda-compat=v1.4.10

Builds a virtual environment in a temporary directory (``--workdir`` keeps it), installs conda,
conda-build and conda-smithy (built from their sources with ``--no-deps``: PyPI has none of them
in these versions) and the PyPI packages of ``scripts/feedstock/cross_checks/requirements.txt`` and
``tests/requirements.txt``, then runs

1. the cross-check tests (``CROSS_CHECKS``) with ``FEEDSTOCK_REQUIRE_CROSS_CHECKS=1``, so that
   a cross-check that cannot run fails instead of skipping; the rerender cross-check runs
   ``conda-smithy rerender`` with the pinned conda-forge-pinning checkout as
   ``--exclusive-config-file`` (``CONDA_SMITHY_RERENDER``);
2. ``python -m feedstock smithy-lint``: ``conda smithy lint --conda-forge recipe``, which
   must report no lint and no hint;
3. ``python -m feedstock real-build`` (unless ``--no-build``): the recipe built by conda-build
   from a channel of stand-ins, test phase included, and the harness's packages compared with it.

Exits 1 if any fails. ``--sources DIR`` (or ``FEEDSTOCK_CROSS_CHECK_SOURCES``) is a directory
with one entry per source, named as in ``SOURCES`` (``conda``, ``conda-build``, ...): a git
repository (bare or not) holding the pinned tag or commit, or a source tree taken as that
version. Without it the sources are fetched from GitHub at the pinned refs.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from feedstock.errors import FeedstockError, UsageError, capped
from feedstock.paths import REPO, TESTS
from feedstock.requirements_compare import CONDA_FORGE_ENV

PROG = "feedstock cross-check"
SOURCES_ENV = "FEEDSTOCK_CROSS_CHECK_SOURCES"
REQUIRE_ENV = "FEEDSTOCK_REQUIRE_CROSS_CHECKS"
REQUIREMENTS = Path(__file__).with_name("requirements.txt")
MIN_PYTHON = (3, 11)  # conda-smithy's requires-python

CROSS_CHECKS = (
    "tests/test_render_recipe.py::test_matches_conda_build_render",
    "tests/test_render_recipe.py::test_conda_build_orders_the_pytorch_outputs_differently_from_run_to_run",
    "tests/test_render_engine.py::test_toy_matches_conda_build",
    "tests/test_ci_scripts.py::test_files_match_a_fresh_rerender",
    "tests/test_ci_scripts.py::test_a_release_candidate_rerenders_to_pytorch_rc_configs_only",
    # the variant keys `megabuild env` reads count as used by build.sh / bld.bat
    "tests/test_render_used_vars.py::test_build_scripts_name_the_keys_megabuild_env_reads",
    # requirements against conda-forge's pytorch-cpu feedstock, each difference with its reason
    "tests/test_requirements_compare.py::test_conda_forge_differs_only_as_recorded",
)


@dataclass(frozen=True)
class Source:
    name: str  # its entry under --sources
    repo: str  # GitHub owner/name
    ref: str  # tag or commit
    package: bool = False  # pip-installed (with the ref's version as SETUPTOOLS_SCM_PRETEND_VERSION)
    paths: tuple[str, ...] = ()  # what to take from the repository; () = all but tests/

    @property
    def version(self) -> str:
        return self.ref[1:] if re.match(r"v\d", self.ref) else self.ref

    def describe(self) -> str:
        ref = self.ref if not re.fullmatch(r"[0-9a-f]{40}", self.ref) else self.ref[:10]
        return f"{self.name} {ref}"


SOURCES = (
    Source("conda", "conda/conda", "26.7.1", package=True),
    Source("conda-build", "conda/conda-build", "26.7.1", package=True),
    Source("conda-smithy", "conda-forge/conda-smithy", "v2026.8.5", package=True),
    # conda-smithy v2026.8.5 asks for >=1.4.15
    Source("rattler-build-conda-compat", "conda-forge/rattler-build-conda-compat", "v1.4.15", package=True),
    # the pinning of the committed rerender (2026.08.20.15.37.09)
    Source(
        "conda-forge-pinning-feedstock",
        "conda-forge/conda-forge-pinning-feedstock",
        "f87504532b7060e6a2b55ae4d63b7960f32268af",
        paths=("recipe",),
    ),
    # the schema of conda-forge.yml's bot: section, which conda-smithy fetches from this repository
    Source(
        "conda-forge-bot",
        "conda-forge/conda-forge-bot",
        "65a4cf4a6cd1018a18f8f29133d75c42d45219a6",
        paths=("conda_forge_tick/cf_tick_schema.json",),
    ),
    # conda-forge's pytorch feedstock, whose requirements the requirements comparison renders
    # (tests/test_requirements_compare.py; tests/data/requirements-vs-conda-forge.json records it)
    Source(
        "pytorch-cpu-feedstock",
        "conda-forge/pytorch-cpu-feedstock",
        "74dd3d46ff0c3d05053197961386b5a2018cf3d1",
        paths=("recipe", ".ci_support"),
    ),
)

# rattler-build-conda-compat before 1.4.15 lacks this module, which conda-smithy imports at start
# (only its recipe-v1 linter uses it); the predicate is upstream's.
OUTPUTS_MODULE = '''"""Added by run_cross_checks.py: this rattler-build-conda-compat predates the module."""


def is_staging_output(output):
    return "staging" in output and "package" not in output
'''

RATTLER_BUILD = '''#!{python}
"""Added by run_cross_checks.py: conda-smithy runs `rattler-build --version` on every rerender."""
import sys

if sys.argv[1:] == ["--version"]:
    from rattler_build import rattler_build_version

    print(f"rattler-build {{rattler_build_version()}}")
    sys.exit(0)
sys.exit("rattler-build: only --version is available (py-rattler-build stand-in)")
'''


def say(message: str) -> None:
    print(f"run_cross_checks: {message}", flush=True)


def git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)


def is_git_repo(path: Path) -> bool:
    return (path / ".git").exists() or ((path / "HEAD").is_file() and (path / "objects").is_dir())


def extract(repo: Path, rev: str, source: Source, dest: Path) -> None:
    """``git archive`` of the source's paths at ``rev`` into ``dest``."""
    paths = list(source.paths)
    if not paths:
        listing = git(repo, "ls-tree", "--name-only", rev).stdout.decode().split()
        paths = [p for p in listing if p != "tests"]
    proc = git(repo, "archive", "--format=tar", rev, "--", *paths)
    if proc.returncode != 0:
        raise FeedstockError(f"git archive of {source.describe()} failed: {proc.stderr.decode().strip()}")
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python < 3.11.4; git archive writes no links out of the tree
            tar.extractall(dest)


def take_local(source: Source, root: Path, dest: Path) -> str | None:
    """The source from ``root``; None when it is there, else what is missing."""
    path = root / source.name
    if not path.exists():
        return f"{source.name}/ ({source.repo})"
    if not is_git_repo(path):
        shutil.copytree(path, dest, ignore=shutil.ignore_patterns(".git", "tests"))
        say(f"{source.describe()}: the source tree {path}, taken as that version")
        return None
    if git(path, "rev-parse", "--verify", "--quiet", f"{source.ref}^{{commit}}").returncode != 0:
        return f"{source.describe()} in {source.name}/"
    extract(path, source.ref, source, dest)
    return None


def github_resolves() -> bool:
    try:
        socket.getaddrinfo("github.com", 443)
    except OSError:
        return False
    return True


def fetch_from_github(source: Source, dest: Path) -> None:
    bare = dest.with_name(dest.name + ".git")
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    url = f"https://github.com/{source.repo}.git"
    proc = git(bare, "fetch", "-q", "--depth", "1", url, source.ref)
    if proc.returncode != 0:
        raise FeedstockError(f"cannot fetch {source.ref} of {url}: {proc.stderr.decode().strip()}")
    extract(bare, "FETCH_HEAD", source, dest)
    shutil.rmtree(bare)


def gather_sources(sources: Sequence[Source], root: Path | None, dest: Path) -> None:
    wanted = capped(s.describe() for s in sources)
    if root is None:
        if not github_resolves():
            raise FeedstockError(
                f"github.com does not resolve and no --sources (or {SOURCES_ENV}) was given: "
                f"needs {wanted}, from GitHub or as a directory of their repositories"
            )
        for source in sources:
            say(f"fetching {source.describe()} from GitHub")
            fetch_from_github(source, dest / source.name)
        return
    missing = [m for s in sources if (m := take_local(s, root, dest / s.name)) is not None]
    if missing:
        raise UsageError(f"--sources {root} lacks {capped(missing)}")


def run(command: Sequence[str], env: dict[str, str] | None = None, what: str = "") -> None:
    proc = subprocess.run(list(command), env=env, check=False)
    if proc.returncode != 0:
        raise FeedstockError(f"{what or command[0]} failed (exit {proc.returncode}); its output is above")


def venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def check_python(python: str) -> None:
    probe = "import sys; print('%d.%d' % sys.version_info[:2])"
    try:
        out = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise UsageError(f"--python {python} does not run ({exc})") from exc
    version = tuple(int(v) for v in out.strip().split("."))
    if version < MIN_PYTHON:
        raise UsageError(f"--python {python} is Python {out.strip()}; conda-smithy needs 3.11 or newer")


def install(python: str, venv: Path, src: Path, sources: Sequence[Source]) -> None:
    run([python, "-m", "venv", str(venv)], what="python -m venv")
    pip = [str(venv_python(venv)), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # the feedstock's own tools too (editable: this checkout), for the steps run with -m feedstock
    requirements = ["-r", str(REQUIREMENTS), "-r", str(TESTS / "requirements.txt"), "-e", str(REPO)]
    run([*pip, *requirements], what="pip install")
    for source in (s for s in sources if s.package):
        env = {**os.environ, "SETUPTOOLS_SCM_PRETEND_VERSION": source.version}
        run([*pip, "--no-deps", str(src / source.name)], env=env, what=f"pip install {source.describe()}")


def add_stand_ins(venv: Path) -> None:
    """What conda-smithy needs beyond what its sources and PyPI provide here."""
    python = venv_python(venv)
    find = "import rattler_build_conda_compat as m, os; print(os.path.dirname(m.__file__))"
    package = Path(
        subprocess.run([str(python), "-c", find], capture_output=True, text=True, check=True).stdout.strip()
    )
    if not (package / "outputs.py").exists():
        (package / "outputs.py").write_text(OUTPUTS_MODULE)
        say("note: this rattler-build-conda-compat has no outputs module (1.4.15+): added is_staging_output")
    executable = venv / "bin" / "rattler-build"
    if not executable.exists():
        executable.write_text(RATTLER_BUILD.format(python=python))
        executable.chmod(0o755)
        say("note: no rattler-build executable: `rattler-build --version` answered by py-rattler-build")


def pinning_root(pinning_recipe: Path, dest: Path) -> Path:
    """conda-forge-pinning's package layout, which conda-smithy reads migrations from."""
    share = dest / "share" / "conda-forge"
    share.mkdir(parents=True)
    shutil.copy2(pinning_recipe / "conda_build_config.yaml", dest / "conda_build_config.yaml")
    migrations = pinning_recipe / "migrations"
    (share / "migrations").mkdir()
    for migration in [*migrations.glob("*.yaml"), *migrations.glob("*.exyaml")]:  # as its recipe copies them
        shutil.copy2(migration, share / "migrations" / migration.name)
    shutil.copytree(pinning_recipe / "migration_support", share / "migration_support")
    return dest / "conda_build_config.yaml"


def tool_env(venv: Path, work: Path, src: Path) -> dict[str, str]:
    config = pinning_root(src / "conda-forge-pinning-feedstock" / "recipe", work / "pinning")
    rerender = [str(venv / "bin" / "conda-smithy"), "rerender", "--no-check-uptodate"]
    rerender += ["--exclusive-config-file", str(config), "--feedstock_directory"]
    schema = src / "conda-forge-bot" / "conda_forge_tick" / "cf_tick_schema.json"
    return {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")},
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(venv),
        REQUIRE_ENV: "1",
        "CONDA_SMITHY_RERENDER": shlex.join(rerender),
        "CONDA_SMITHY_BOT_SCHEMA_URI": schema.resolve().as_uri(),
        CONDA_FORGE_ENV: str(src / "pytorch-cpu-feedstock"),
    }


def step(name: str, command: Sequence[str], env: dict[str, str], results: dict[str, str]) -> None:
    start = time.monotonic()
    say(f"{name}: {shlex.join(command)}")
    code = subprocess.run(list(command), cwd=REPO, env=env, check=False).returncode
    results[name] = (
        f"{'passed' if code == 0 else f'FAILED (exit {code})'} in {time.monotonic() - start:.0f} s"
    )


def cross_check(work: Path, ns: argparse.Namespace, sources: Sequence[Source]) -> dict[str, str]:
    start = time.monotonic()
    src, venv = work / "src", work / "venv"
    gather_sources(sources, ns.sources, src)
    say(f"installing into {venv}: {capped(s.describe() for s in sources if s.package)} and PyPI packages")
    install(ns.python, venv, src, sources)
    add_stand_ins(venv)
    env = tool_env(venv, work, src)
    results = {"environment": f"built in {time.monotonic() - start:.0f} s"}
    python = str(venv_python(venv))
    step(
        "cross-checks", [python, "-m", "pytest", "-v", "-p", "no:cacheprovider", *CROSS_CHECKS], env, results
    )
    pinning = src / "conda-forge-pinning-feedstock" / "recipe"
    step(
        "lint",
        [python, "-m", "feedstock", "smithy-lint", "--pinning", str(pinning), str(REPO / "recipe")],
        env,
        results,
    )
    if not ns.no_build:
        step(
            "conda-build",
            [python, "-m", "feedstock", "real-build", "--work", str(work / "real-build")],
            env,
            results,
        )
    return results


def with_refs(overrides: Sequence[str]) -> tuple[Source, ...]:
    refs = {}
    for item in overrides:
        name, sep, ref = item.partition("=")
        if not sep or not ref or name not in {s.name for s in SOURCES}:
            raise UsageError(
                f"--ref {item}: want NAME=REF with NAME one of {capped(s.name for s in SOURCES)}"
            )
        refs[name] = ref
    sources = tuple(replace(s, ref=refs.get(s.name, s.ref)) for s in SOURCES)
    for s in sources:
        if s.package and not re.match(r"\d", s.version):
            raise UsageError(
                f"--ref {s.name}={s.ref}: a version tag is needed (it becomes the package version)"
            )
    return sources


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, tuple[Source, ...]]:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--sources", type=Path, default=os.environ.get(SOURCES_ENV) or None, help=f"default: ${SOURCES_ENV}"
    )
    p.add_argument(
        "--ref", action="append", default=[], metavar="NAME=REF", help="another tag or commit of a source"
    )
    p.add_argument("--python", default=sys.executable, help="the environment's interpreter (3.11+)")
    p.add_argument(
        "--no-build", action="store_true", help="skip building the recipe with conda-build (real_build.py)"
    )
    p.add_argument("--workdir", type=Path, help="build here and keep it (default: a temporary directory)")
    ns = p.parse_args(argv)
    sources = with_refs(ns.ref)
    if ns.sources is not None and not ns.sources.is_dir():
        raise UsageError(f"--sources {ns.sources} is not a directory")
    if ns.workdir is not None and ns.workdir.exists() and any(ns.workdir.iterdir()):
        raise UsageError(f"--workdir {ns.workdir} is not empty")
    check_python(ns.python)
    return ns, sources


def main(argv: Sequence[str] | None = None) -> int:
    ns, sources = parse(argv)
    start = time.monotonic()
    if ns.workdir is not None:
        ns.workdir.mkdir(parents=True, exist_ok=True)
        results = cross_check(ns.workdir.resolve(), ns, sources)
    else:
        with tempfile.TemporaryDirectory(prefix="cross-checks-") as tmp:
            results = cross_check(Path(tmp), ns, sources)
    for name, result in results.items():
        say(f"{name}: {result}")
    say(f"total: {time.monotonic() - start:.0f} s")
    return 0 if all(not r.startswith("FAILED") for r in results.values()) else 1
