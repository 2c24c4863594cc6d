"""The recipe's patches on the files an upstream wheel holds, as the build would have packed them.

A patch changes packaged files (Python sources, installed headers, CMake files and configured
``*Config.cmake`` templates: :mod:`feedstock.patch_check` knows where each source file lands in a
wheel) and compiled code. The rehearsal applies a patch to the wheel's copies of its files unless it
also changes compiled sources the wheel cannot carry: then its packaged half would call code the
upstream binaries lack (patch 0001's ``torch.cuda.has_magma`` calls a ``torch._C`` function of its
C++ half), so none of it applies and the run reports it. Build-only files (``CMakeLists.txt``,
``cmake/*.cmake`` that are not installed) need no counterpart in a wheel.
"""

from __future__ import annotations

import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .. import patch_check
from ..errors import FeedstockError

COMPILED = (".c", ".cc", ".cpp", ".cu", ".mm", ".h", ".hpp", ".cuh")
# @VAR@ values a patch may add to a configured template that the generated file does not show
# (upstream's install layout: aten/src/ATen/CMakeLists.txt sets AT_INSTALL_INCLUDE_DIR "include").
CONFIGURE_VALUES = {"AT_INSTALL_INCLUDE_DIR": "include"}


@dataclass(frozen=True)
class PatchFate:
    patch: str
    applied: tuple[str, ...]  # wheel members it changed
    reason: str  # why not (or what was left out), empty when it applied in full

    def line(self) -> str:
        if not self.applied:
            return f"{self.patch}: not applied: {self.reason}"
        note = f" ({self.reason})" if self.reason else ""
        return f"{self.patch}: applied to {len(self.applied)} file(s) of the wheel{note}"


def _template_values(generated: str, untemplated: str) -> dict[str, str]:
    """@VAR@ -> value, read off the lines ``untemplate`` put back."""
    values: dict[str, str] = {}
    for gen, tpl in zip(generated.split("\n"), untemplated.split("\n")):
        if gen == tpl:
            continue
        parts = re.split(f"({patch_check.TEMPLATE_VAR.pattern})", tpl)
        names = [p[1:-1] for p in parts if patch_check.TEMPLATE_VAR.fullmatch(p)]
        regex = "".join("(.*)" if patch_check.TEMPLATE_VAR.fullmatch(p) else re.escape(p) for p in parts)
        found = re.fullmatch(regex, gen)
        if found:
            values.update(zip(names, found.groups()))
    return values


def _configure(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(0)[1:-1]
        if name not in values:
            raise ValueError(f"no configured value for @{name}@")
        return values[name]

    return patch_check.TEMPLATE_VAR.sub(value, text)


@dataclass(frozen=True)
class _Loaded:
    member: str
    form: str  # copy | header | template (feedstock.patch_check.candidates)
    original: str  # the wheel's text
    source: str  # as the source tree has it (header unwrapped, template's @VAR@ lines back)


class _Series:
    """The patched texts so far, as source paths in a scratch tree (patches apply in order)."""

    def __init__(self, zf: zipfile.ZipFile, tree: Path) -> None:
        self.zf = zf
        self.names = set(zf.namelist())
        self.tree = tree
        self.loaded: dict[str, _Loaded] = {}  # source path -> its wheel member

    def load(self, diff: patch_check.FileDiff) -> bool:
        if diff.path in self.loaded:
            return True
        for member, form in patch_check.candidates(diff.path):
            if member in self.names:
                original = self.zf.read(member).decode("utf-8")
                source = original
                if form == "header":
                    source = patch_check.unwrap_header(original)
                elif form == "template":
                    source = patch_check.untemplate(original, diff)
                self.loaded[diff.path] = _Loaded(member, form, original, source)
                target = self.tree / diff.path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(source, encoding="utf-8")
                return True
        return False

    def packed(self, path: str) -> bytes:
        """The patched file as the wheel would hold it (re-wrapped header, configured template)."""
        got = self.loaded[path]
        text = (self.tree / path).read_text(encoding="utf-8")
        if got.form == "header":
            head = got.original.split("\n", 1)[0] + "\n"
            text = head + text + got.original[len(head) + len(got.source) :]
        elif got.form == "template":
            text = _configure(text, {**CONFIGURE_VALUES, **_template_values(got.original, got.source)})
        return text.encode("utf-8")


def patched_members(wheel: Path, patches: list[Path]) -> tuple[dict[str, bytes], list[PatchFate]]:
    """Wheel member -> patched bytes, and what happened to each patch (series order)."""
    fates: list[PatchFate] = []
    changed: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="rehearsal-patches-") as tmp, zipfile.ZipFile(wheel) as zf:
        series = _Series(zf, Path(tmp))
        for patch in patches:
            diffs = patch_check.split_patch(patch.read_text(encoding="utf-8"))
            held = [d for d in diffs if series.load(d)]
            missing = [d.path for d in diffs if d not in held]
            compiled = [p for p in missing if p.endswith(COMPILED)]
            if compiled:
                fates.append(PatchFate(patch.name, (), f"it also changes compiled code ({compiled[0]})"))
                continue
            if not held:
                fates.append(PatchFate(patch.name, (), "no file of it is in the wheel (build files only)"))
                continue
            failed = _apply(series, held)
            if failed:
                fates.append(PatchFate(patch.name, (), failed))
                continue
            changed.update(d.path for d in held)
            note = f"build files not in a wheel: {', '.join(missing)}" if missing else ""
            fates.append(PatchFate(patch.name, tuple(series.loaded[d.path].member for d in held), note))
        out = {}
        for path in sorted(changed):
            try:
                out[series.loaded[path].member] = series.packed(path)
            except ValueError as exc:
                raise FeedstockError(f"patched {path}: {exc}") from None
    return out, fates


def _apply(series: _Series, diffs: list[patch_check.FileDiff]) -> str:
    for diff in diffs:
        rc, out = patch_check.run_patch(series.tree, diff.text, dry_run=True)
        if rc != 0:
            return f"{diff.path} does not apply: {out.strip().splitlines()[-1] if out.strip() else rc}"
    for diff in diffs:
        patch_check.run_patch(series.tree, diff.text, dry_run=False)
    return ""
