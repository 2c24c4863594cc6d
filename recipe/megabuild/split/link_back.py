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
* With ``link_installed`` (package names): files of those installed packages (their conda-meta
  record) in ``lib``, ``bin`` and ``share`` that the spec gives to them and that pip did not
  install at all (the pytorch wheel excludes them) get the same relative symlink.

Everything is validated before the first change, and a failure half-way is rolled back.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.split.conda_meta import installed_files
from megabuild.split.fsmove import Entry, walk_entries
from megabuild.split.plan import Link, Plan, Planned, PlanReport
from megabuild.split.spec import DROPPED, Classification, Spec, format_paths

LINK_AREAS = ("lib", "bin", "share")
PYC_PACKAGES = ("torch", "functorch", "torchgen")
_NO_CHANGE = Plan("link-back", "nothing was changed")
_TAG = re.compile(r"[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)?")


@dataclass
class LinkBackReport(PlanReport):
    linked: list[str] = field(default_factory=list)  # pip's copies replaced by symlinks
    linked_not_installed: list[str] = field(default_factory=list)  # --link-installed: pip never had them
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
        made = len(self.linked_not_installed)
        out = [
            f"split link-back ({self.target_platform}): {len(self.linked)} files replaced by symlinks "
            "into the prefix "
            f"({len(self.already_linked)} already linked), "
            f"{made} symlink{'s' if made != 1 else ''} made for {'files' if made != 1 else 'a file'} "
            "pip did not install (--link-installed), "
            f"{len(self.dropped)} dropped files removed, "
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


@dataclass
class _Scan:
    """What walking site-packages found (filled by the ``_scan_*`` helpers)."""

    report: LinkBackReport
    links: list[Link] = field(default_factory=list)
    removals: list[Path] = field(default_factory=list)
    headers: list[str] = field(default_factory=list)  # libtorch's headers to remove (opt-in)
    problems: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_real: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Places:
    """The directories link-back works on, resolved once."""

    prefix: Path
    sp_dir: Path
    torch_dir: Path
    real_prefix: str
    real_sp: str


LinkBackPlan = Planned[LinkBackReport]


def plan_link_back(
    spec: Spec,
    prefix: Path,
    sp_dir: Path,
    *,
    python_tag: str,
    keep_missing: bool = False,
    drop_libtorch_headers: bool = False,
    link_installed: tuple[str, ...] = (),
) -> LinkBackPlan:
    """What link-back would change in *sp_dir* and *prefix*, and every problem that forbids it."""
    if not _TAG.fullmatch(python_tag):
        raise MegabuildError(f"--python-tag {python_tag!r} is not a cache tag like cpython-312")
    if not prefix.is_dir():
        raise MegabuildError(f"prefix {prefix} is not a directory")
    torch_dir = sp_dir / "torch"
    if not torch_dir.is_dir():
        raise MegabuildError(f"{torch_dir} is not a directory (is pytorch pip-installed?)")
    places = _Places(prefix, sp_dir, torch_dir, os.path.realpath(prefix), os.path.realpath(sp_dir))
    scan = _Scan(LinkBackReport(plan=_NO_CHANGE, python_tag=python_tag, target_platform=spec.target_platform))
    _scan_link_areas(spec, places, scan, keep_missing)
    for name in link_installed:
        _scan_installed(spec, places, scan, name)
    _scan_include(spec, places, scan, drop_libtorch_headers)
    pyc = _foreign_pyc(sp_dir, python_tag)
    report = scan.report
    into_torch = [link for link in scan.links if link.root == torch_dir]
    report.linked = [link.rel for link in into_torch if link.replaces]
    report.linked_not_installed = [link.rel for link in into_torch if not link.replaces]
    report.pyc_removed = len(pyc)
    report.headers_removed = len(scan.headers)
    include = torch_dir / "include"
    pycache_dirs = sorted({path.parent for path in pyc})
    report.plan = replace(
        _NO_CHANGE,
        links=tuple(scan.links),
        removals=(*scan.removals, *(include / rel for rel in scan.headers), *pyc),
        problems=tuple(scan.problems + _listed_problems(spec, scan)),
        prune=(
            (include, tuple(scan.headers)),
            *((d.parent, tuple(f"{d.name}/{p.name}" for p in pyc if p.parent == d)) for d in pycache_dirs),
        ),
    )
    return Planned(report)


def _scan_link_areas(spec: Spec, places: _Places, scan: _Scan, keep_missing: bool) -> None:
    """Classify torch/{lib,bin,share}: links to plan, files to drop, problems."""
    link_hits: dict[int, int] = {r.index: 0 for r in spec.rules if r.prefix_link}
    for area in LINK_AREAS:
        area_dir = places.torch_dir / area
        if area_dir.is_symlink():
            scan.problems.append(f"{area_dir} is a symlink; expected a directory")
            continue
        if not area_dir.is_dir():
            continue
        for entry in walk_entries(area_dir):
            rel = f"{area}/{entry.relpath}"
            cls = spec.classify(rel)
            if cls.unmatched:
                scan.unmatched.append(rel)
            elif cls.conflict:
                scan.conflicts.append(rel)
            elif cls.output == DROPPED:
                scan.removals.append(places.torch_dir / rel)
                scan.report.dropped.append(rel)
            elif cls.output == spec.default_output:
                _plan_prefix_links(cls, rel, entry, places, scan, link_hits)
            else:
                _plan_link_to_prefix(rel, entry, places, scan, keep_missing)
    for rule in spec.rules:
        if rule.prefix_link and rule.required == "always" and link_hits[rule.index] == 0:
            scan.problems.append(f"{rule.shown} is missing in {places.torch_dir} (pytorch must ship it)")


def _scan_installed(spec: Spec, places: _Places, scan: _Scan, name: str) -> None:
    """Links for the installed package ``name``'s files that are absent from site-packages."""
    output = name  # the conda package is named after its output
    if output not in spec.staged_outputs:
        raise MegabuildError(f"--link-installed {name}: not an output the spec moves out of pytorch")
    for rel in installed_files(places.prefix, name):
        if rel.split("/", 1)[0] not in LINK_AREAS or spec.classify(rel).output != output:
            continue
        if os.path.lexists(places.torch_dir / rel):
            continue  # pip installed it: the scan of the link areas replaces it
        wanted = os.path.relpath(
            os.path.join(places.real_prefix, rel), os.path.join(places.real_sp, "torch", os.path.dirname(rel))
        )
        scan.links.append(Link(places.torch_dir, rel, wanted))


def _plan_prefix_links(
    cls: Classification, rel: str, entry: Entry, places: _Places, scan: _Scan, link_hits: dict[int, int]
) -> None:
    """pytorch's own file that ``$PREFIX`` needs too: a link from the prefix to it."""
    for rule in cls.rules:
        if not rule.prefix_link:
            continue
        link_hits[rule.index] += 1
        if entry.is_link:
            scan.not_real.append(rel)
            continue
        wanted = os.path.relpath(
            os.path.join(places.real_sp, "torch", rel),
            os.path.join(places.real_prefix, os.path.dirname(rel)),
        )
        dst = places.prefix / rel
        if not os.path.lexists(dst):
            scan.links.append(Link(places.prefix, rel, wanted))
        elif not (dst.is_symlink() and os.readlink(dst) == wanted):
            scan.problems.append(f"{dst} exists and is not a link to site-packages; refusing to replace it")
            continue
        scan.report.prefix_links.append(rel)


def _plan_link_to_prefix(rel: str, entry: Entry, places: _Places, scan: _Scan, keep_missing: bool) -> None:
    """libtorch's file copied by pip: replaced by a link into the prefix."""
    path = places.torch_dir / rel
    target = places.prefix / rel
    wanted = os.path.relpath(
        os.path.join(places.real_prefix, rel), os.path.join(places.real_sp, "torch", os.path.dirname(rel))
    )
    if entry.is_link and os.readlink(path) == wanted:
        scan.report.already_linked.append(rel)
    elif os.path.lexists(target):
        if not entry.is_link and target.exists() and target.stat().st_size != entry.size:
            scan.report.size_differs.append(rel)
        scan.links.append(Link(places.torch_dir, rel, wanted, replaces=True))
    elif keep_missing:
        scan.report.kept_missing.append(rel)
    else:
        scan.missing.append(rel)


def _scan_include(spec: Spec, places: _Places, scan: _Scan, drop_libtorch_headers: bool) -> None:
    """torch/include stays a real directory; dropped headers go, libtorch's go on request."""
    include = places.torch_dir / "include"
    if include.is_symlink():
        scan.problems.append(f"{include} is a symlink; it must stay a real directory")
        return
    if not include.is_dir():
        return
    into_prefix = []
    for entry in walk_entries(include):
        rel = f"include/{entry.relpath}"
        if entry.is_link:
            resolved = os.path.realpath(include / entry.relpath)
            if _inside(resolved, places.real_prefix) and not _inside(resolved, places.real_sp):
                into_prefix.append(rel)
            continue
        output = spec.classify(rel).output
        if output == DROPPED:  # e.g. the bundled omp.h of the macOS wheel
            scan.removals.append(include / entry.relpath)
            scan.report.dropped.append(rel)
        elif (
            drop_libtorch_headers
            and output not in (None, spec.default_output)
            and os.path.lexists(places.prefix / rel)
        ):
            scan.headers.append(entry.relpath)
    if into_prefix:
        scan.problems.append(f"headers in site-packages link into the prefix: {format_paths(into_prefix)}")


def _listed_problems(spec: Spec, scan: _Scan) -> list[str]:
    problems = []
    if scan.unmatched:
        problems.append(
            f"files in strict areas match no rule for {spec.target_platform}: {format_paths(scan.unmatched)}"
        )
    if scan.conflicts:
        problems.append(f"files match rules of different outputs: {format_paths(scan.conflicts)}")
    if scan.missing:
        problems.append(
            f"{len(scan.missing)} file(s) belong to libtorch but are missing in the prefix "
            f"(is the exact libtorch in the host env?): {format_paths(scan.missing)}"
        )
    if scan.not_real:
        problems.append(f"must be real files in site-packages, found symlinks: {format_paths(scan.not_real)}")
    return problems


def _foreign_pyc(sp_dir: Path, python_tag: str) -> list[Path]:
    """``__pycache__`` files of torch, functorch and torchgen compiled for another Python."""
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
    return pyc
