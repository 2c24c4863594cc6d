"""Dry-run the recipe's patches against the PyTorch files upstream wheels hold (the logic of
``python -m feedstock check-patches``; the version-bump check calls it too).

See ``python -m feedstock check-patches`` for the forms a patched file takes in a wheel (copy, installed
header, configured template) and how the series is applied.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .paths import RECIPE

PATCH_DIR = RECIPE / "patches"
TORCH_VERSION = "2.14.1"
# The smallest 2.14.1 wheel; its Python files, headers and CMake files are the
# same as on Linux and Windows (there with CRLF endings) except for CUDA-only
# ones and the configured *Config.cmake files.
DEFAULT_PLATFORM = "macosx_14_0_arm64"
DEFAULT_PYTHON = "3.12"

HEADER_SUFFIXES = (".h", ".hpp", ".cuh")
# source prefix -> installed header prefix
HEADER_ROOTS = {
    "aten/src/ATen/": "torch/include/ATen/",
    "c10/": "torch/include/c10/",
    "caffe2/": "torch/include/caffe2/",
    "torch/csrc/": "torch/include/torch/csrc/",
    "torch/headeronly/": "torch/include/torch/headeronly/",
}
# source prefix -> installed copy prefix (install(FILES/DIRECTORY) of cmake/)
CMAKE_ROOTS = {
    "cmake/Modules_CUDA_fix/": "torch/share/cmake/Caffe2/Modules_CUDA_fix/",
    "cmake/Modules/": "torch/share/cmake/Caffe2/",
    "cmake/public/": "torch/share/cmake/Caffe2/public/",
}
# configured templates: source -> generated file in the wheel
TEMPLATES = {
    "cmake/TorchConfig.cmake.in": "torch/share/cmake/Torch/TorchConfig.cmake",
    "cmake/TorchConfigVersion.cmake.in": "torch/share/cmake/Torch/TorchConfigVersion.cmake",
    "cmake/Caffe2Config.cmake.in": "torch/share/cmake/Caffe2/Caffe2Config.cmake",
    "aten/src/ATen/ATenConfig.cmake.in": "torch/share/cmake/ATen/ATenConfig.cmake",
}
GUARD_OPEN = "#if !defined(TORCH_STABLE_ONLY) && !defined(TORCH_TARGET_VERSION)"
TEMPLATE_VAR = re.compile(r"@[A-Za-z_][A-Za-z0-9_]*@")
HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
PATCH_OUTPUT_RE = re.compile(
    r"^Hunk #(\d+) (succeeded|FAILED|ignored) at (\d+)"
    r"(?: \(offset (-?\d+) lines?\))?(?: with fuzz (\d+))?"
)


@dataclass
class FileDiff:
    path: str
    text: str  # the "diff --git" section of this file

    def hunks(self) -> list[list[str]]:
        out: list[list[str]] = []
        for line in self.text.splitlines():
            if HUNK_RE.match(line):
                out.append([])
            elif out and line[:1] in (" ", "-", "+", ""):
                out[-1].append(line)
        return out


@dataclass(frozen=True)
class Hunk:
    """One ``Hunk #N ...`` line of patch's dry run."""

    hunk: int
    status: str  # succeeded | FAILED | ignored
    line: int
    offset: int  # lines away from where the patch says (0: exactly there)
    fuzz: int


@dataclass
class FileResult:
    path: str
    member: str | None = None  # wheel member compared with, None: in no wheel
    form: str | None = None  # copy | header | template
    wheel: str | None = None
    crlf: bool = False  # the wheel's member has CRLF endings (Windows), compared as LF
    ok: bool = True
    hunks: list[Hunk] = field(default_factory=list)
    message: str = ""

    @property
    def reached(self) -> bool:
        """A wheel holds the file (or an earlier patch of the series changed it)."""
        return self.member is not None

    @property
    def offsets(self) -> int:
        """Hunks that apply, but at another line than the patch says."""
        return sum(1 for h in self.hunks if h.offset)


@dataclass
class PatchResult:
    patch: str
    files: list[FileResult]

    @property
    def reachable(self) -> list[FileResult]:
        return [f for f in self.files if f.reached]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def coverage(self) -> str:
        """'all', 'partly' or 'none': how many of the patched files a wheel holds."""
        n = len(self.reachable)
        return "all" if n == len(self.files) else "partly" if n else "none"


def split_patch(text: str) -> list[FileDiff]:
    """The per-file sections of a git-format patch (mail header and trailer dropped)."""
    body = text.split("\n---\n", 1)[1] if "\n---\n" in text else text
    parts = re.split(r"^(?=diff --git )", body, flags=re.M)
    out = []
    for part in parts:
        m = re.match(r"diff --git a/(\S+) b/(\S+)", part)
        if not m:
            continue
        section = re.split(r"^-- \n", part, maxsplit=1, flags=re.M)[0]
        out.append(FileDiff(m.group(1), section if section.endswith("\n") else section + "\n"))
    return out


def candidates(path: str) -> list[tuple[str, str]]:
    """(wheel member, form) pairs that may hold the released text of a source file."""
    out: list[tuple[str, str]] = []
    if path in TEMPLATES:
        out.append((TEMPLATES[path], "template"))
    if path.endswith(".h.in"):
        for src, dst in HEADER_ROOTS.items():
            if path.startswith(src):
                out.append((dst + path[len(src) : -3], "template"))
    if path.endswith(HEADER_SUFFIXES):
        for src, dst in HEADER_ROOTS.items():
            if path.startswith(src):
                out.append((dst + path[len(src) :], "header"))
    for src, dst in CMAKE_ROOTS.items():
        if path.startswith(src):
            out.append((dst + path[len(src) :], "copy"))
            break
    if path.startswith(("torch/", "torchgen/", "functorch/")) and not path.endswith(HEADER_SUFFIXES):
        out.append((path, "copy"))
    return out


def unwrap_header(text: str) -> str:
    """Remove the TORCH_STABLE_ONLY guard the install step puts around installed headers."""
    lines = text.split("\n")
    if not lines or lines[0] != GUARD_OPEN:
        return text
    tail = text.rstrip("\n").split("\n")
    if len(tail) < 4 or tail[-3] != "#else" or not tail[-1].startswith("#endif"):
        raise ValueError("unexpected header guard layout")
    return "\n".join(tail[1:-3]) + "\n"


def untemplate(generated: str, diff: FileDiff) -> str:
    """Put the patch's @VAR@ lines back into a configured file, at their matches."""
    lines = generated.split("\n")
    starts = [int(m.group(1)) for m in map(HUNK_RE.match, diff.text.splitlines()) if m]
    for start, hunk in zip(starts, diff.hunks()):
        expected = start - 2
        for line in hunk:
            if line[:1] not in (" ", "-", ""):
                continue
            expected += 1
            template = line[1:]
            if not TEMPLATE_VAR.search(template):
                continue
            pattern = re.compile(
                "".join(
                    ".*" if TEMPLATE_VAR.fullmatch(part) else re.escape(part)
                    for part in re.split(f"({TEMPLATE_VAR.pattern})", template)
                )
            )
            hits = [i for i, text in enumerate(lines) if pattern.fullmatch(text)]
            if hits:  # the match nearest to where the hunk expects the line
                lines[min(hits, key=lambda i: abs(i - expected))] = template
    return "\n".join(lines)


def load_source(wheels: list[Path], path: str) -> tuple[str, str, Path, str] | None:
    """(member, form, wheel, released text) of the first wheel holding the file, as in the wheel."""
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            for member, form in candidates(path):
                if member in names:
                    return member, form, wheel, zf.read(member).decode("utf-8")
    return None


def run_patch(tree: Path, diff_text: str, dry_run: bool) -> tuple[int, str]:
    args = ["patch", "-p1", "--fuzz=0", "--batch", "--forward", "--no-backup-if-mismatch"]
    if dry_run:
        args.append("--dry-run")
    proc = subprocess.run(args, cwd=tree, input=diff_text, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def check(wheels: list[Path], patches: list[Path] | None = None) -> list[PatchResult]:
    patches = sorted(PATCH_DIR.glob("*.patch")) if patches is None else patches
    results: list[PatchResult] = []
    with tempfile.TemporaryDirectory(prefix="check-patches-") as tmp:
        tree = Path(tmp)
        loaded: set[str] = set()
        for patch in patches:
            diffs = split_patch(patch.read_text(encoding="utf-8"))
            files: list[FileResult] = []
            for diff in diffs:
                result = FileResult(diff.path)
                files.append(result)
                if diff.path not in loaded:
                    found = load_source(wheels, diff.path)
                    if found is None:
                        result.message = "in no wheel: unverified"
                        continue
                    member, form, wheel, text = found
                    if "\r\n" in text:  # a Windows wheel: the sources have LF endings
                        text = text.replace("\r\n", "\n")
                        result.crlf = True
                    if form == "header":
                        text = unwrap_header(text)
                    elif form == "template":
                        text = untemplate(text, diff)
                    target = tree / diff.path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_text(text, encoding="utf-8")
                    loaded.add(diff.path)
                    result.member, result.form, result.wheel = member, form, wheel.name
                else:
                    result.member, result.form = "(patched by an earlier patch)", "series"
                rc, out = run_patch(tree, diff.text, dry_run=True)
                for line in out.splitlines():
                    m = PATCH_OUTPUT_RE.match(line)
                    if m:
                        n, status, at, offset, fuzz = m.groups()
                        result.hunks.append(Hunk(int(n), status, int(at), int(offset or 0), int(fuzz or 0)))
                n_hunks = len(diff.hunks())
                if rc != 0 or any(h.status != "succeeded" for h in result.hunks):
                    result.ok = False
                    result.message = out.strip()
                    continue
                offsets = [h for h in result.hunks if h.offset]
                result.message = f"{n_hunks} hunk(s) apply" + (
                    "; offsets: " + ", ".join(f"#{h.hunk} {h.offset:+d}" for h in offsets)
                    if offsets
                    else " exactly"
                )
                if result.crlf:
                    result.message += " (CRLF endings compared as LF)"
                rc, out = run_patch(tree, diff.text, dry_run=False)
                if rc != 0:  # cannot happen after a clean dry run
                    result.ok = False
                    result.message = out.strip()
            results.append(PatchResult(patch.name, files))
    return results


def cache_dir() -> Path:
    env = os.environ.get("PYTORCH_FEEDSTOCK_WHEEL_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytorch-feedstock" / "wheels"


def pip_download(
    requirement: str, platform: str, python: str, dest: Path, timeout: float, abi: str | None = None
) -> None:
    """``pip download`` one binary wheel (no dependencies) for another platform into ``dest``;
    ``abi``: e.g. ``cp314t`` for the free-threaded build (pip's default is the GIL one)."""
    subprocess.run(
        # not --quiet: it hides pip's reasons (the resolver's "caused by" lines) from the caller
        [sys.executable, "-m", "pip", "download", "--progress-bar", "off", "--no-deps", "--only-binary=:all:",
         "--platform", platform, "--python-version", python, *(["--abi", abi] if abi else []),
         requirement, "-d", str(dest)],
        check=True, capture_output=True, timeout=timeout,
    )  # fmt: skip


def download_wheel(platform: str = DEFAULT_PLATFORM, python: str = DEFAULT_PYTHON) -> Path:
    """The torch TORCH_VERSION wheel for a platform from PyPI, kept in cache_dir()/<platform>."""
    dest = cache_dir() / platform
    found = sorted(dest.glob(f"torch-{TORCH_VERSION}-*.whl"))
    if found:
        return found[0]
    dest.mkdir(parents=True, exist_ok=True)
    pip_download(f"torch=={TORCH_VERSION}", platform, python, dest, timeout=1800)
    found = sorted(dest.glob(f"torch-{TORCH_VERSION}-*.whl"))
    if not found:
        raise FileNotFoundError(f"pip download left no torch wheel in {dest}")
    return found[0]
