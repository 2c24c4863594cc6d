"""``split link-back``: after ``pip install`` of pytorch, point the copies of
libtorch's files under ``$SP_DIR/torch/{lib,bin,share}`` at ``$PREFIX``.

* Files the spec gives to another output (libtorch, libtorch-cuda-linalg) and
  which exist at the same relative path under ``$PREFIX`` become RELATIVE
  symlinks (so the package stays relocatable).
* ``$SP_DIR/torch/include`` stays a real directory, never linked into
  ``$PREFIX`` (headers linked back into site-packages gave consumers two
  include dirs with conflicting declarations). By default pytorch keeps its
  own copy of the headers there; ``drop_libtorch_headers`` instead removes the
  ones libtorch installs in ``$PREFIX/include`` (the conda-forge layout, which
  needs TorchConfig.cmake patched to use ``$PREFIX/include``).
* Files of rules with ``prefix_link`` (``lib/libtorch_python.so``) stay real
  files in site-packages (TorchConfig.cmake found there looks for them next to
  itself) and get a relative symlink at the same path under ``$PREFIX``, where
  ``$PREFIX/share/cmake/Torch/TorchConfig.cmake`` looks: one real copy, found
  from both places, and ``$ORIGIN`` of the link resolves to ``$PREFIX/lib``.
* Files the spec drops (test libraries, bundled libgomp / libomp, omp.h) are
  removed, in ``lib``, ``bin``, ``share`` and ``include``.
* ``__pycache__/*.pyc`` compiled for another Python are removed.

Everything is validated before the first change.
"""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.split.fsmove import prune_empty_dirs, walk_entries
from megabuild.split.spec import DROPPED, Classification, Spec, format_paths

LINK_AREAS = ("lib", "bin", "share")
PYC_PACKAGES = ("torch", "functorch", "torchgen")
_TAG = re.compile(r"[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)?")


@dataclass
class LinkBackReport:
    linked: list[str] = field(default_factory=list)
    already_linked: list[str] = field(default_factory=list)
    size_differs: list[str] = field(default_factory=list)
    kept_missing: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    prefix_links: list[str] = field(default_factory=list)
    pyc_removed: int = 0
    headers_removed: int = 0
    python_tag: str = ""
    target_platform: str = ""

    def lines(self) -> list[str]:
        out = [
            f"split link-back ({self.target_platform}): {len(self.linked)} files replaced by symlinks "
            "into the prefix "
            f"({len(self.already_linked)} already linked), {len(self.dropped)} dropped files removed, "
            f"{self.pyc_removed} .pyc of other Pythons removed (kept {self.python_tag})",
        ]
        if self.headers_removed:
            out.append(f"  removed {self.headers_removed} libtorch headers from site-packages/torch/include")
        for rel in self.prefix_links:
            out.append(f"  $PREFIX/{rel} -> real file in site-packages/torch/{rel}")
        if self.size_differs:
            out.append(
                f"  note: {len(self.size_differs)} replaced file(s) differed in size from the prefix's: "
                + format_paths(self.size_differs)
            )
        if self.kept_missing:
            out.append(
                f"  warning: kept real files missing from the prefix: {format_paths(self.kept_missing)}"
            )
        return out


def pyc_tag(name: str) -> str | None:
    """``cpython-312`` for ``mod.cpython-312.opt-1.pyc``; ``None`` if not a tagged pyc."""
    # In __pycache__ the name is <module>.<tag>[.opt-N].pyc and module names have no dots.
    parts = name.split(".")
    if parts[-1] != "pyc" or len(parts) not in (3, 4):
        return None
    if len(parts) == 4 and not re.fullmatch(r"opt-\d+", parts[2]):
        return None
    return parts[1] if _TAG.fullmatch(parts[1]) else None


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def link_back(
    spec: Spec,
    prefix: Path,
    sp_dir: Path,
    *,
    python_tag: str,
    keep_missing: bool = False,
    drop_libtorch_headers: bool = False,
    dry_run: bool = False,
) -> LinkBackReport:
    if not _TAG.fullmatch(python_tag):
        raise MegabuildError(f"--python-tag {python_tag!r} is not a cache tag like cpython-312")
    if not prefix.is_dir():
        raise MegabuildError(f"prefix {prefix} is not a directory")
    torch_dir = sp_dir / "torch"
    if not torch_dir.is_dir():
        raise MegabuildError(f"{torch_dir} is not a directory (is pytorch pip-installed?)")
    real_prefix = os.path.realpath(prefix)
    real_sp = os.path.realpath(sp_dir)
    report = LinkBackReport(python_tag=python_tag, target_platform=spec.target_platform)
    problems: list[str] = []

    replace: list[tuple[Path, str]] = []  # file in site-packages, relative link target
    remove: list[Path] = []
    prefix_links: list[tuple[Path, str]] = []  # link in the prefix, relative target
    unmatched: list[str] = []
    conflicts: list[str] = []
    missing: list[str] = []
    not_real: list[str] = []
    link_hits: dict[int, int] = {r.index: 0 for r in spec.rules if r.prefix_link}

    for area in LINK_AREAS:
        area_dir = torch_dir / area
        if area_dir.is_symlink():
            problems.append(f"{area_dir} is a symlink; expected a directory")
            continue
        if not area_dir.is_dir():
            continue
        for entry in walk_entries(area_dir):
            rel = f"{area}/{entry.relpath}"
            path = torch_dir / rel
            result = spec.classify(rel)
            if result is None:
                unmatched.append(rel)
                continue
            if isinstance(result, list):
                conflicts.append(rel)
                continue
            if result.output == DROPPED:
                remove.append(path)
                report.dropped.append(rel)
            elif result.output == spec.default_output:
                for rule in result.rules:
                    if rule.prefix_link:
                        link_hits[rule.index] += 1
                        if entry.is_link:
                            not_real.append(rel)
                        else:
                            dst = prefix / rel
                            wanted = os.path.relpath(
                                os.path.join(real_sp, "torch", rel),
                                os.path.join(real_prefix, os.path.dirname(rel)),
                            )
                            prefix_links.append((dst, wanted))
            else:
                target = prefix / rel
                wanted = os.path.relpath(
                    os.path.join(real_prefix, rel), os.path.join(real_sp, "torch", os.path.dirname(rel))
                )
                if entry.is_link and os.readlink(path) == wanted:
                    report.already_linked.append(rel)
                elif os.path.lexists(target):
                    if not entry.is_link and target.exists() and target.stat().st_size != entry.size:
                        report.size_differs.append(rel)
                    replace.append((path, wanted))
                elif keep_missing:
                    report.kept_missing.append(rel)
                else:
                    missing.append(rel)

    for rule in spec.rules:
        if rule.prefix_link and rule.required == "always" and link_hits[rule.index] == 0:
            problems.append(f"{rule.shown} is missing in {torch_dir} (pytorch must ship it)")

    include = torch_dir / "include"
    headers: list[str] = []  # libtorch's headers to remove from site-packages (opt-in)
    if include.is_symlink():
        problems.append(f"{include} is a symlink; it must stay a real directory")
    elif include.is_dir():
        into_prefix = []
        for entry in walk_entries(include):
            if entry.is_link:
                resolved = os.path.realpath(include / entry.relpath)
                if _inside(resolved, real_prefix) and not _inside(resolved, real_sp):
                    into_prefix.append(f"include/{entry.relpath}")
                continue
            rel = f"include/{entry.relpath}"
            result = spec.classify(rel)
            output = result.output if isinstance(result, Classification) else None
            if output == DROPPED:  # e.g. the omp.h setup.py copies on osx
                remove.append(include / entry.relpath)
                report.dropped.append(rel)
            elif (
                drop_libtorch_headers
                and output not in (None, spec.default_output)
                and os.path.lexists(prefix / rel)
            ):
                headers.append(entry.relpath)
        if into_prefix:
            problems.append(f"headers in site-packages link into the prefix: {format_paths(into_prefix)}")

    for dst, wanted in prefix_links:
        if os.path.lexists(dst) and not (dst.is_symlink() and os.readlink(dst) == wanted):
            problems.append(f"{dst} exists and is not a link to site-packages; refusing to replace it")

    if unmatched:
        problems.append(
            f"files in strict areas match no rule for {spec.target_platform}: {format_paths(unmatched)}"
        )
    if conflicts:
        problems.append(f"files match rules of different outputs: {format_paths(conflicts)}")
    if missing:
        problems.append(
            f"{len(missing)} file(s) belong to libtorch but are missing in the prefix "
            f"(is the exact libtorch in the host env?): {format_paths(missing)}"
        )
    if not_real:
        problems.append(f"must be real files in site-packages, found symlinks: {format_paths(not_real)}")

    pyc: list[Path] = []
    for package in PYC_PACKAGES:
        base = sp_dir / package
        if not base.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(base):
            if os.path.basename(dirpath) != "__pycache__":
                continue
            for name in files:
                tag = pyc_tag(name)
                if tag is not None and tag != python_tag:
                    pyc.append(Path(dirpath) / name)

    if problems:
        raise MegabuildError("; ".join(problems) + "; nothing was changed")
    report.linked = [str(p.relative_to(torch_dir).as_posix()) for p, _ in replace]
    report.prefix_links = [str(d.relative_to(prefix).as_posix()) for d, _ in prefix_links]
    report.pyc_removed = len(pyc)
    report.headers_removed = len(headers)
    if dry_run:
        return report

    for path, wanted in replace:
        tmp = path.with_name(f".{path.name}.megabuild-link")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(wanted, tmp)
        os.replace(tmp, path)
    for path in remove:
        os.unlink(path)
    for rel in headers:
        os.unlink(include / rel)
    prune_empty_dirs(include, headers)
    for dst, wanted in prefix_links:
        if os.path.lexists(dst):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(wanted, dst)
    for path in pyc:
        os.unlink(path)
    for path in {p.parent for p in pyc}:
        with contextlib.suppress(OSError):
            path.rmdir()
    return report
