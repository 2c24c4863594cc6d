"""``python -m megabuild check-torch-config``: ``torch.__config__.show()`` against the variant
(the pytorch package's test)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from megabuild.binaries import torch_config
from megabuild.binaries.installed import installed
from megabuild.errors import MegabuildError
from megabuild.model import BLAS_IMPLS, LINALG, LinalgVariant


def register(groups: Any) -> None:
    parser = groups.add_parser(
        "check-torch-config",
        help="torch.__config__.show() against the variant",
        description=torch_config.__doc__,
    )
    parser.add_argument("--blas", required=True, choices=BLAS_IMPLS, help="blas_impl")
    parser.add_argument("--cuda-version", required=True, help="cuda_compiler_version (None: a CPU build)")
    magma_help = f"installed: as the installed {LINALG} variant (needs --prefix)"
    magma_choices = ("yes", "no", "installed", "any")
    parser.add_argument("--magma", default="installed", choices=magma_choices, help=magma_help)
    parser.add_argument("--mkldnn", default="any", choices=("yes", "no", "any"))
    parser.add_argument("--prefix", type=Path, help="the environment, for --magma installed")
    parser.add_argument(
        "--show-file", type=Path, help="the text of torch.__config__.show() (default: import torch)"
    )
    parser.set_defaults(handler=_check_torch_config)


def _installed_magma(prefix: Path | None) -> bool | None:
    if prefix is None:
        raise MegabuildError("--magma installed needs --prefix")
    linalg = installed(prefix, LINALG)
    if linalg is None:
        return None  # CPU builds, Windows: no linalg package to ask
    return f"_{LinalgVariant.MAGMA.value}_" in linalg.build


def under_ci(env: Mapping[str, str]) -> bool:
    """``CI`` set to anything but empty, ``0`` or ``false`` (conda-forge's CI: ``github_actions``)."""
    return env.get("CI", "").strip().lower() not in ("", "0", "false")


def _show_text(args: argparse.Namespace) -> tuple[str, torch_config.MagmaAnswer]:
    """The text of torch.__config__.show() and torch's answer about MAGMA (from the text alone
    with ``--show-file``: no torch is imported then)."""
    if args.show_file is not None:
        try:
            text = str(args.show_file.read_text(encoding="utf-8"))
        except OSError as exc:
            raise MegabuildError(f"cannot read {args.show_file}: {exc.strerror or exc}") from None
        return text, torch_config.magma_from_text(text)
    try:
        torch = importlib.import_module("torch")
    except ImportError as exc:
        raise MegabuildError(f"cannot import torch: {exc}") from None
    text = str(torch.__config__.show())
    answer = torch_config.magma_from_c(torch._C)
    if answer is None:
        why = f"torch._C has neither {torch_config.FUNCTION} nor {torch_config.ATTRIBUTE}"
        answer = torch_config.magma_from_text(text, why)
    return text, answer


def _variant(args: argparse.Namespace) -> torch_config.Variant:
    choice = {"yes": True, "no": False, "any": None}
    magma = _installed_magma(args.prefix) if args.magma == "installed" else choice[args.magma]
    cuda = None if args.cuda_version in ("None", "") else args.cuda_version
    return torch_config.Variant(args.blas, cuda, magma if cuda else None, choice[args.mkldnn])


def _check_torch_config(args: argparse.Namespace) -> int:
    variant = _variant(args)
    text, magma = _show_text(args)
    ci = under_ci(os.environ)
    print(magma.line(), file=sys.stderr)
    unanswered = torch_config.unanswered_magma(variant, magma)
    if unanswered is not None and not ci:
        print(f"check-torch-config: warning: {unanswered} (a finding under CI)", file=sys.stderr)
    findings = torch_config.compare(text, variant, magma, ci=ci)
    for finding in findings:
        print(finding.line())
    print(f"check-torch-config: {len(findings)} finding(s) for {variant}", file=sys.stderr)
    return 1 if findings else 0
