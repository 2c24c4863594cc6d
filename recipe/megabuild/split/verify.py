"""``split verify``: check a partition of files into outputs.

Either a staging dir (``STAGING/<output>[-<variant>]/...``, paths relative to
the torch/ tree) or file lists (``OUTPUT=FILE``, one prefix-relative path per
line, as in a conda package's ``info/files``; pytorch's paths under
``site-packages/torch/`` are mapped back to the torch/ tree). Checks:

* no path belongs to two outputs (the variants of one output are alternatives
  and may share paths);
* no output is empty;
* every file the spec marks required (for CPU or CUDA) is in its output, for
  every variant;
* staging only: every staged file is in the directory the spec assigns it to,
  CUDA-only outputs are absent from CPU builds and every variant is present in
  CUDA builds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from megabuild.errors import MegabuildError
from megabuild.model import LIBTORCH
from megabuild.split.fsmove import walk_entries
from megabuild.split.spec import DROPPED, Spec, format_paths

SITE_TORCH = "site-packages/torch/"


@dataclass
class Part:
    label: str  # staging dir name / OUTPUT as given
    output: str  # base output
    paths: list[str]  # paths as listed (for overlap checks)
    tree_paths: list[str] = field(default_factory=list)  # relative to torch/ (for rule checks)


def tree_path(output: str, path: str, default_output: str) -> str | None:
    if output != default_output:
        return path
    if SITE_TORCH in path:
        return path.split(SITE_TORCH, 1)[1]
    return None


def parts_from_staging(spec: Spec, staging: Path) -> tuple[list[Part], list[str]]:
    if not staging.is_dir():
        raise MegabuildError(f"staging dir {staging} is not a directory")
    parts: list[Part] = []
    problems: list[str] = []
    for child in sorted(staging.iterdir()):
        parsed = spec.parse_staging_name(child.name)
        if parsed is None or not child.is_dir() or child.is_symlink():
            problems.append(f"unexpected entry in the staging dir: {child.name}")
            continue
        entries = walk_entries(child)
        paths = [e.relpath for e in entries]
        dangling = [e.relpath for e in entries if e.is_link and not _resolves_inside(child, e.relpath)]
        if dangling:
            problems.append(
                f"symlinks in {child.name} that do not resolve inside it: {format_paths(dangling)}"
            )
        parts.append(Part(child.name, parsed[0], paths, list(paths)))
    return parts, problems


def _resolves_inside(root: Path, relpath: str) -> bool:
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(root, relpath))
    return target.startswith(real_root + os.sep) and os.path.exists(target)


def parts_from_lists(spec: Spec, items: list[str]) -> list[Part]:
    parts = []
    for item in items:
        label, sep, file_name = item.partition("=")
        if not sep or not label or not file_name:
            raise MegabuildError(f"--file-list expects OUTPUT=FILE, got {item!r}")
        parsed = spec.parse_staging_name(label)
        if parsed is None:
            if label in spec.outputs:
                parsed = (label, None)
            else:
                raise MegabuildError(f"--file-list: unknown output {label!r}")
        try:
            text = Path(file_name).read_text(encoding="utf-8")
        except OSError as exc:
            raise MegabuildError(f"cannot read file list {file_name}: {exc.strerror or exc}") from None
        paths = [line.strip().lstrip("/") for line in text.splitlines() if line.strip()]
        mapped = [tree_path(parsed[0], p, spec.default_output) for p in paths]
        parts.append(Part(label, parsed[0], paths, [p for p in mapped if p is not None]))
    return parts


def check(spec: Spec, parts: list[Part], *, cuda: bool, staging: bool) -> list[str]:
    problems: list[str] = []
    owner: dict[str, Part] = {}
    overlaps: list[str] = []
    for part in parts:
        for path in part.paths:
            other = owner.get(path)
            if other is None:
                owner[path] = part
            elif other.output != part.output:
                overlaps.append(f"{path} ({other.label}, {part.label})")
    if overlaps:
        problems.append(f"{len(overlaps)} path(s) in two outputs: {format_paths(overlaps)}")

    empty = [p.label for p in parts if not p.paths and p.output != DROPPED]
    if empty:
        problems.append(f"empty output(s): {', '.join(empty)}")

    if staging:
        present = {p.label for p in parts}
        expected = {LIBTORCH} if LIBTORCH in spec.outputs else set()
        for output in spec.staged_outputs:
            for variant in spec.variants(output):
                name = spec.staging_name(output, variant)
                cuda_only = any(r.output == output and r.required == "cuda" for r in spec.rules)
                if cuda:
                    expected.add(name)
                elif cuda_only and name in present:
                    problems.append(f"{name} staged in a CPU build (its rules are CUDA-only)")
        absent = sorted(expected - present)
        if absent:
            problems.append(f"missing output(s) in the staging dir: {', '.join(absent)}")
        misplaced = []
        for part in parts:
            for path in part.tree_paths:
                got = spec.classify(path).output
                if got != part.output:
                    misplaced.append(
                        f"{part.label}/{path} (spec for {spec.target_platform}: {got or 'no single rule'})"
                    )
        if misplaced:
            problems.append(f"files in the wrong output: {format_paths(misplaced)}")

    missing = []
    for part in parts:
        for rule in spec.rules:
            wanted = rule.output == part.output and rule.required_for(cuda)
            if wanted and not any(rule.matches(p) for p in part.tree_paths):
                missing.append(f"{rule.shown} ({part.label})")
    if missing:
        problems.append(
            f"required file(s) missing for {'CUDA' if cuda else 'CPU'} on {spec.target_platform}: "
            f"{format_paths(missing)}"
        )
    return problems


@dataclass
class VerifyReport:
    parts: list[Part]
    cuda: bool
    target_platform: str = ""

    def lines(self) -> list[str]:
        out = [f"split verify ({'CUDA' if self.cuda else 'CPU'}, {self.target_platform}): partition OK"]
        for part in self.parts:
            out.append(f"  {part.label:<34} {len(part.paths):>7} files")
        return out


def verify(
    spec: Spec, *, staging: Path | None = None, file_lists: list[str] | None = None, cuda: bool = False
) -> VerifyReport:
    if (staging is None) == (not file_lists):
        raise MegabuildError("verify needs either --staging or --file-list")
    if staging is not None:
        parts, problems = parts_from_staging(spec, staging)
    else:
        parts, problems = parts_from_lists(spec, file_lists or []), []
    if not parts:
        problems.append("no outputs to verify")
    problems += check(spec, parts, cuda=cuda, staging=staging is not None)
    if problems:
        raise MegabuildError("verify failed: " + "; ".join(problems))
    return VerifyReport(parts, cuda, spec.target_platform)
