"""The recipe's build steps: the top level (libtorch once) and each pytorch output.

Every other megabuild command runs in this process through :func:`megabuild.cli.main`, exactly
as the build scripts used to call them, so each keeps its own checks and one-line errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from megabuild.build import forwarded_env, frontend, skbuild_state, telemetry, wheel_settings
from megabuild.build.options import BuildOptions
from megabuild.errors import MegabuildError
from megabuild.split.spec import load_spec

FORWARDED_RECORD = forwarded_env.RECORD_NAME


def megabuild(*argv: str | Path) -> None:
    """Run ``python -m megabuild ARGV`` in this process; its error is already printed."""
    from megabuild.cli import main

    args = [str(a) for a in argv]
    if main(args) != 0:
        raise MegabuildError(f"'megabuild {' '.join(args[:2])}' failed (see the line above)")


def _install(opts: BuildOptions, pass_name: str, excludes: list[str] | None) -> frontend.InstallResult:
    settings = wheel_settings.config_settings(opts.sp_dir, excludes)
    with telemetry.build_pass(opts.telemetry_dir, pass_name, opts.build_dir, opts.compiler_cache):
        result = frontend.pip_install(opts.python, opts.src_dir, settings, opts.sp_dir, opts.prefix)
    print(result.line(), flush=True)
    return result


def _magma_variant(opts: BuildOptions) -> None:
    """The linalg library again from its own objects with MAGMA, and one link (docs/architecture.md)."""
    if opts.magma_home is None:
        raise MegabuildError("MAGMA_HOME is not set: the magma variant links $MAGMA_HOME/lib/libmagma")
    out = opts.build_dir / "magma-linalg"
    with telemetry.build_pass(opts.telemetry_dir, "magma", opts.build_dir, opts.compiler_cache):
        megabuild("magma-linalg", "--build-dir", opts.build_dir, "--out", out, "--lib-dir", out / "torch/lib",
                  "--magma-home", opts.magma_home, "--define", "MAGMA_V2")  # fmt: skip
    megabuild("split", "stage", "--spec", opts.split_spec, "--tree", out / "torch", "--staging", opts.staging,
              *opts.split_args(), "--linalg-variant", "magma", "--only", "libtorch-cuda-linalg")  # fmt: skip


def top_level(opts: BuildOptions, env: Mapping[str, str]) -> None:
    """libtorch, once: build and install through scikit-build-core, stage every output's files."""
    recorded = forwarded_env.record(opts.work / FORWARDED_RECORD, env)
    forwarded_env.record(opts.telemetry_dir / "forwarded-env.libtorch.json", env)
    print(f"forwarded environment: {len(recorded)} variables recorded for every later step")
    _install(opts, "libtorch", excludes=None)
    # the installed tree of this prefix's pip install: staging moves its files (no copies)
    megabuild("split", "stage", "--spec", opts.split_spec, "--tree", opts.sp_dir / "torch",
              "--staging", opts.staging, *opts.split_args(), "--linalg-variant", "nomagma")  # fmt: skip
    if opts.cuda and not opts.is_windows:  # Windows: torch_cuda.dll links MAGMA itself
        _magma_variant(opts)
    megabuild("split", "verify", "--spec", opts.split_spec, "--staging", opts.staging, *opts.split_args())
    # the pristine cache every pytorch output starts from
    megabuild("cache", "save", opts.build_dir / "CMakeCache.txt")
    if opts.megabuild:
        # conda-build orders the pytorch outputs differently from run to run; keeping this build
        # lets the top level's Python skip its compiles wherever its output comes (docs/architecture.md).
        megabuild("build-state", "save", "--build-dir", opts.build_dir, "--state", opts.build_state,
                  "--python", opts.megabuild_python)  # fmt: skip


def _prepare_tree(opts: BuildOptions) -> None:
    """The shared tree, made consistent with this output's Python and backend."""
    cache = opts.build_dir / "CMakeCache.txt"
    if opts.megabuild and not opts.is_top_level_python:
        megabuild("cache", "restore", cache, "--swap-python-from", opts.megabuild_python, "--to", opts.py_ver)
    else:
        megabuild("cache", "restore", cache)
    if opts.megabuild:
        megabuild("build-state", "restore", "--build-dir", opts.build_dir, "--state", opts.build_state,
                  "--python", opts.py_ver)  # fmt: skip
    adoption = skbuild_state.adopt(opts.build_dir, opts.src_dir, skbuild_state.installed_backend())
    print(adoption.line(), flush=True)
    skbuild_state.mark(opts.build_dir)


def python_only_excludes(opts: BuildOptions) -> list[str]:
    spec = load_spec(opts.split_spec, opts.target_platform)
    return wheel_settings.project_excludes(opts.src_dir) + wheel_settings.libtorch_excludes(spec)


def pytorch(opts: BuildOptions, env: Mapping[str, str], *, full_wheel: bool = False) -> None:
    """One Python: only the Python-dependent targets rebuild; only they and the Python files are packed."""
    forwarded_env.record(opts.telemetry_dir / f"forwarded-env.python{opts.py_ver}.json", env)
    count = forwarded_env.check_same_as_top_level(opts.work / FORWARDED_RECORD, env)
    print(f"forwarded environment: the same {count} variables as the top level")
    _prepare_tree(opts)
    excludes = None if full_wheel else python_only_excludes(opts)
    _install(opts, f"python{opts.py_ver}", excludes)
    skbuild_state.check_kept(opts.build_dir)
    # libtorch's headers live in $PREFIX/include only (patches 0003/0004); what the wheel left
    # out (libtorch's libraries, CMake config) is linked to libtorch's files in the prefix.
    if opts.is_windows:
        # no symlinks: torch/__init__.py adds %PREFIX%\\Library\\bin (libtorch's DLLs) to the DLL
        # search path, and the wheel.exclude above left libtorch's files out (docs/architecture.md, Windows)
        print("link-back: none on Windows (libtorch's DLLs load from Library\\bin)", flush=True)
        return
    installed = ["libtorch", *(["libtorch-cuda-linalg"] if opts.cuda else [])]
    megabuild("split", "link-back", "--spec", opts.split_spec, "--prefix", opts.prefix,
              "--sp-dir", opts.sp_dir, "--target-platform", opts.target_platform,
              "--drop-libtorch-headers", "--link-installed", *installed)  # fmt: skip
