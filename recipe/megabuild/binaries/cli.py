"""``python -m megabuild check-binaries``: the binary checks of the package tests.

check-binaries reads the files of installed packages (``--package``, from ``$PREFIX/conda-meta``)
or given paths and prints one line per finding that no explanation covers; exit status 1 when
there is one. The explanations of :data:`KNOWN` (what every conda-build package has) always apply;
``--explained`` adds more.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from megabuild.binaries import cuda_arch
from megabuild.binaries.checks import Options, check_files
from megabuild.binaries.findings import Explanation, Finding, judge, load_explanations
from megabuild.binaries.installed import package_files
from megabuild.binaries.linkage import Tree
from megabuild.errors import MegabuildError
from megabuild.split.spec import host_target_platform

KNOWN = Path(__file__).with_name("known.json")
CUDA_LIBRARY = re.compile(r"(?:lib)?torch_cuda\.(?:so|dll)")


def register(groups: Any) -> None:
    parser = groups.add_parser(
        "check-binaries", help="check the binaries of installed packages", description=__doc__
    )
    parser.add_argument("--prefix", type=Path, required=True, help="the environment ($PREFIX)")
    parser.add_argument(
        "--package", action="append", default=[], help="an installed package to check (repeatable)"
    )
    parser.add_argument(
        "--path", action="append", default=[], help="a file relative to the prefix (repeatable)"
    )
    parser.add_argument(
        "--target-platform", default=None, help="conda's target_platform (default: this machine's)"
    )
    parser.add_argument(
        "--c-stdlib-version", help="the config's c_stdlib_version (Linux: newest GLIBC_x.y allowed)"
    )
    parser.add_argument(
        "--build-string", action="append", default=[], help="a build path that must not be left (SRC_DIR)"
    )
    parser.add_argument(
        "--dll-dir",
        action="append",
        default=[],
        help="Windows: an extra DLL directory (absolute, or relative to the prefix)",
    )
    parser.add_argument("--cuda-arch-list", help="TORCH_CUDA_ARCH_LIST the torch_cuda library must hold")
    parser.add_argument(
        "--cuda-version",
        help="cuda_compiler_version: the recipe's TORCH_CUDA_ARCH_LIST for it (None: no check)",
    )
    parser.add_argument(
        "--arm-variant", help="linux-aarch64: arm_variant_type (tegra has its own list; None: the default)"
    )
    parser.add_argument("--cuobjdump", help="cuobjdump to list the fatbin (default: from PATH)")
    parser.add_argument(
        "--explained", action="append", type=Path, default=[], help="explanations JSON (repeatable)"
    )
    parser.add_argument("--show-explained", action="store_true", help="also print the explained findings")
    parser.set_defaults(handler=_check_binaries)


def _arch_list(args: argparse.Namespace, target: str) -> str | None:
    if args.cuda_arch_list:
        return str(args.cuda_arch_list)
    if not args.cuda_version or args.cuda_version == "None":
        return None
    try:  # the recipe's one list (megabuild.buildenv)
        lists = importlib.import_module("megabuild.buildenv")
    except ImportError:
        raise MegabuildError("megabuild.buildenv is not available: pass --cuda-arch-list") from None
    arm_variant = None if args.arm_variant in (None, "", "None") else str(args.arm_variant)
    return str(lists.cuda_arch_list(args.cuda_version, target, arm_variant))


def _files(args: argparse.Namespace) -> list[str]:
    files = [f for name in args.package for f in package_files(args.prefix, name)]
    files += [p.replace("\\", "/") for p in args.path]
    if not files:
        raise MegabuildError("nothing to check: name --package or --path")
    return list(dict.fromkeys(files))


def cuda_findings(
    tree: Tree, files: list[str], arch_list: str, cuda_version: str | None, cuobjdump: str | None
) -> list[Finding]:
    """The architecture findings of the torch_cuda libraries among ``files``; ``cuda_version``
    gates what PyTorch adds to the list (:data:`cuda_arch.ADDED_ARCHS`)."""
    wanted = cuda_arch.parse_arch_list(arch_list)
    tool = cuobjdump or shutil.which("cuobjdump")
    if tool is None:
        raise MegabuildError(
            "cuobjdump not found: add cuda-cuobjdump to the test requirements or pass --cuobjdump"
        )
    libraries = [f for f in files if CUDA_LIBRARY.fullmatch(f.rsplit("/", 1)[-1])]
    if not libraries:
        return [Finding("cuda-arch", ".", "no torch_cuda library among the checked files")]
    out = []
    for rel in libraries:
        found = cuda_arch.parse_listings(*cuda_arch.listings(tool, tree.prefix / rel))
        out += cuda_arch.compare(rel, wanted, found, cuda_version)
    return out


def _check_binaries(args: argparse.Namespace) -> int:
    target = args.target_platform or host_target_platform()
    if not args.prefix.is_dir():
        raise MegabuildError(f"--prefix {args.prefix} is not a directory")
    prefix = args.prefix.resolve()
    dll_dirs = (
        os.path.relpath(Path(d).resolve(), prefix) if Path(d).is_absolute() else d for d in args.dll_dir
    )
    tree = Tree(prefix, tuple(d.replace("\\", "/") for d in dll_dirs))
    files = _files(args)
    options = Options(target, args.c_stdlib_version, tuple(args.build_string))
    findings = check_files(tree, files, options)
    arch_list = _arch_list(args, target)
    if arch_list is not None:
        findings += cuda_findings(tree, files, arch_list, args.cuda_version, args.cuobjdump)
    explanations: tuple[Explanation, ...] = ()
    for path in [KNOWN, *args.explained]:
        explanations += load_explanations(path, target)
    verdict = judge(findings, explanations)
    for line in verdict.lines(args.show_explained):
        print(line)
    what = ", ".join(args.package) or "the given paths"
    print(f"check-binaries: {len(files)} files of {what}: {len(verdict.unexplained)} finding(s), "
          f"{len(verdict.explained)} explained", file=sys.stderr)  # fmt: skip
    return 1 if verdict.unexplained else 0
