"""``megabuild split ...``: stage, install, link-back, verify."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from megabuild.model import LIBTORCH, LINALG, LinalgVariant
from megabuild.split.plan import Plan
from megabuild.split.spec import DEFAULT_SPEC, Spec, host_target_platform, load_spec


def _spec_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spec", type=Path, default=None, help="split spec JSON (default: the recipe's split_spec.json)"
    )
    # Library names differ per platform (.so / .dylib, bundled OpenMP); the build
    # scripts pass conda-build's $target_platform, so the default only serves
    # calls by hand on the build machine.
    parser.add_argument(
        "--target-platform",
        metavar="PLATFORM",
        default=None,
        help="conda target platform whose file names to expect: linux-64, linux-aarch64, osx-64, win-64, "
        f"osx-arm64 (default: this machine's, {host_target_platform()})",
    )


def _load(args: argparse.Namespace) -> Spec:
    return load_spec(args.spec, args.target_platform)


def _print(lines: list[str], plan: Plan | None = None) -> int:
    """Print a report, and with *plan* (``--dry-run``) every change it would make."""
    for line in lines + (plan.lines() if plan is not None else []):
        print(line)
    sys.stdout.flush()
    return 0


def cmd_stage(args: argparse.Namespace) -> int:
    from megabuild.split.stage import plan_stage

    planned = plan_stage(
        _load(args),
        args.tree,
        args.staging,
        cuda=args.cuda,
        linalg_variant=args.linalg_variant,
        only=args.only,
    )
    return _print(planned.run(args.dry_run).lines(), planned.plan if args.dry_run else None)


def cmd_install(args: argparse.Namespace) -> int:
    from megabuild.split.install import plan_install

    planned = plan_install(
        _load(args),
        args.output,
        args.staging,
        args.prefix,
        linalg_variant=args.linalg_variant,
        overwrite=args.overwrite,
    )
    return _print(planned.run(args.dry_run).lines(), planned.plan if args.dry_run else None)


def cmd_link_back(args: argparse.Namespace) -> int:
    from megabuild.split.link_back import plan_link_back

    planned = plan_link_back(
        _load(args),
        args.prefix,
        args.sp_dir,
        python_tag=args.python_tag,
        keep_missing=args.keep_missing,
        drop_libtorch_headers=args.drop_libtorch_headers,
        link_installed=tuple(args.link_installed or ()),
    )
    return _print(planned.run(args.dry_run).lines(), planned.plan if args.dry_run else None)


def cmd_verify(args: argparse.Namespace) -> int:
    from megabuild.split.verify import verify

    report = verify(_load(args), staging=args.staging, file_lists=args.file_list, cuda=args.cuda)
    return _print(report.lines())


_VARIANTS = "/".join(v.value for v in LinalgVariant)
_INSTALL_OUTPUT = f"{LIBTORCH}, {LINALG} (with --linalg-variant) or {LinalgVariant.MAGMA.staged_name}"


def register(groups: Any) -> None:
    split = groups.add_parser(
        "split",
        help="split the built torch/ tree into libtorch, libtorch-cuda-linalg and pytorch",
        description=f"Split PyTorch's build into packages as {DEFAULT_SPEC.name} says.",
    )
    sub = split.add_subparsers(dest="split_command", metavar="<subcommand>", required=True)

    p = sub.add_parser("stage", help="move built files into per-output staging dirs")
    _spec_arg(p)
    p.add_argument("--tree", type=Path, required=True, help="the built torch/ tree (build/lib.*/torch)")
    p.add_argument("--staging", type=Path, required=True, help="staging root (STAGING/<output>/...)")
    p.add_argument("--cuda", action="store_true", help="CUDA build: CUDA-only required files must exist")
    p.add_argument("--linalg-variant", metavar="NAME", help=f"variant name for {LINALG} ({_VARIANTS})")
    p.add_argument("--only", nargs="+", metavar="OUTPUT", help="stage only these outputs")
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan, move nothing")
    p.set_defaults(handler=cmd_stage)

    p = sub.add_parser("install", help="move a staged output into the prefix")
    p.add_argument("output", metavar="OUTPUT", help=_INSTALL_OUTPUT)
    _spec_arg(p)
    p.add_argument("--staging", type=Path, required=True)
    p.add_argument("--prefix", type=Path, required=True)
    p.add_argument("--linalg-variant", metavar="NAME")
    p.add_argument("--overwrite", action="store_true", help="replace files that already exist in the prefix")
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan, move nothing")
    p.set_defaults(handler=cmd_install)

    p = sub.add_parser("link-back", help="symlink pytorch's copies of libtorch files to the prefix")
    _spec_arg(p)
    p.add_argument("--prefix", type=Path, required=True)
    p.add_argument("--sp-dir", type=Path, required=True, help="site-packages holding torch/")
    p.add_argument(
        "--python-tag",
        default=sys.implementation.cache_tag,
        help="keep only .pyc of this tag (default: %(default)s, the running interpreter's)",
    )
    p.add_argument(
        "--keep-missing", action="store_true", help="keep real files that libtorch lacks instead of failing"
    )
    p.add_argument(
        "--drop-libtorch-headers",
        action="store_true",
        help="remove from site-packages/torch/include the headers libtorch installs in $PREFIX/include "
        "(default: keep pytorch's own copy)",
    )
    p.add_argument("--link-installed", nargs="+", metavar="PACKAGE",
                   help="also link installed packages' files (conda-meta) pip did not install")  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="validate and print the plan, change nothing")
    p.set_defaults(handler=cmd_link_back)

    p = sub.add_parser("verify", help="check a partition: no overlaps, no empty output, required files")
    _spec_arg(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--staging", type=Path)
    src.add_argument("--file-list", nargs="+", metavar="OUTPUT=FILE")
    p.add_argument("--cuda", action="store_true")
    p.set_defaults(handler=cmd_verify)
