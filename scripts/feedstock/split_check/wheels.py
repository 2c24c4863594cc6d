"""Upstream's torch wheels of one version: found in the cache or downloaded, and what they say.

The cache is the one tests/test_patches_wheel.py and check_patches.py use
(``~/.cache/pytorch-feedstock/wheels/<pip platform tag>/``, or ``$PYTORCH_FEEDSTOCK_WHEEL_CACHE``),
so a wheel downloaded once serves all three.
"""

from __future__ import annotations

import re
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

from .. import patch_check
from ..errors import FeedstockError, UsageError
from .platforms import Platform
from .python_builds import PythonBuild

DOWNLOAD_TIMEOUT = 1800.0  # seconds; the linux CUDA wheel is over 500 MB
# pip's words for "the index could not be reached" (urllib3 / requests / the resolver).
_NETWORK_ERRORS = (
    "NewConnectionError",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ProxyError",
)
_FROM_VERSIONS = re.compile(r"\(from versions: ([^)]*)\)")
# pip's resolver refusing a version the index has: a constraint, a conflict (ResolutionImpossible)
_REFUSED = "ResolutionImpossible"
_CAUSED_BY = re.compile(r"^The conflict is caused by:\n((?:[ \t]+\S.*\n?)+)", re.M)
_PYTHON_CLASSIFIER = re.compile(r"Programming Language :: Python :: (3\.\d+)")


class WheelInputError(UsageError):
    """No wheel of the version can be had at all: bad input, not a finding."""


@dataclass(frozen=True)
class WheelFacts:
    """What a wheel's ``.dist-info`` and ``torch/version.py`` say."""

    path: Path
    version: str
    python: str  # the CPython of its tag, ``3.12``
    requires_python: str  # "" when the METADATA has none
    requires_dist: tuple[str, ...]
    classifier_pythons: tuple[str, ...]  # ``Programming Language :: Python :: 3.X``
    generator: str  # WHEEL's Generator:, e.g. ``scikit-build-core 1.1.1``
    local_version: str  # ``cu130`` of ``2.14.1+cu130`` in torch/version.py, "" for none

    @property
    def python_build(self) -> PythonBuild:
        """The Python build of its ABI tag: ``cp314t`` is 3.14 free-threaded, ``cp314`` is not."""
        parts = self.path.name.split("-")
        return PythonBuild.from_abi_tag(parts[3] if len(parts) >= 5 else "")


@dataclass(frozen=True)
class Fetched:
    platform: Platform
    wheel: WheelFacts
    how: str  # cached | downloaded


@dataclass(frozen=True)
class Missing:
    platform: Platform
    reason: str
    network: bool = False  # pip could not reach the index
    versions_seen: tuple[str, ...] = ()  # the versions pip saw for this platform
    refused: str = ""  # the index answered and pip refused: its own reason (a constraint, a conflict)


def _dist_info_file(archive: zipfile.ZipFile, name: str) -> Message:
    members = [m for m in archive.namelist() if m.count("/") == 1 and m.endswith(f".dist-info/{name}")]
    if len(members) != 1:
        raise FeedstockError(f"{archive.filename}: {len(members)} .dist-info/{name} files, expected 1")
    return HeaderParser().parsestr(archive.read(members[0]).decode("utf-8"))


def _local_version(archive: zipfile.ZipFile) -> str:
    try:
        text = archive.read("torch/version.py").decode("utf-8")
    except KeyError:
        return ""
    found = re.search(r"^__version__ = '[^'+]*\+([^']+)'", text, re.M)
    return found.group(1) if found else ""


def python_of_tag(wheel: Path) -> str:
    """``3.12`` for ``torch-2.15.0-cp312-cp312-...whl``."""
    parts = wheel.name.split("-")
    tag = parts[2] if len(parts) >= 5 else ""
    if not re.fullmatch(r"cp3\d+", tag):
        raise FeedstockError(f"{wheel.name}: not a CPython wheel name (python tag {tag!r})")
    return f"3.{tag[3:]}"


def read_wheel(path: Path) -> WheelFacts:
    """The facts of one wheel; an unreadable one is a one-line error."""
    try:
        with zipfile.ZipFile(path) as archive:
            metadata = _dist_info_file(archive, "METADATA")
            wheel = _dist_info_file(archive, "WHEEL")
            local = _local_version(archive)
    except (OSError, zipfile.BadZipFile) as exc:
        raise FeedstockError(f"cannot read wheel {path}: {exc}") from None
    classifiers = [str(c) for c in metadata.get_all("Classifier") or []]
    return WheelFacts(
        path=path,
        version=str(metadata.get("Version", "")),
        python=python_of_tag(path),
        requires_python=str(metadata.get("Requires-Python", "")).strip(),
        requires_dist=tuple(str(r) for r in metadata.get_all("Requires-Dist") or []),
        classifier_pythons=tuple(m.group(1) for m in map(_PYTHON_CLASSIFIER.fullmatch, classifiers) if m),
        generator=str(wheel.get("Generator", "")).strip(),
        local_version=local,
    )


def cached_wheel(cache: Path, platform: Platform, version: str, pythons: Sequence[str]) -> Path | None:
    """A cached wheel of ``version`` for ``platform``, the first of ``pythons`` that has one."""
    found = sorted((cache / platform.pip_tag).glob(f"torch-{version}-cp3*.whl"))
    by_python = {python_of_tag(w): w for w in found}
    for python in pythons:
        if python in by_python:
            return by_python[python]
    return found[0] if found else None


def baseline_wheel(
    cache: Path, platform: Platform, current: str, new: str, pythons: Sequence[str]
) -> Path | None:
    """A cached wheel to compare the new one with: the recipe's version, else the newest cached
    one older than ``new`` (the recipe may still name the version before the listings')."""
    older = {p.name.split("-")[1] for p in (cache / platform.pip_tag).glob("torch-*-cp3*.whl")}
    older = {v for v in older if version_key(v) < version_key(new)}
    if not older:
        return None
    version = current if current in older else max(older, key=version_key)
    return cached_wheel(cache, platform, version, pythons)


def _refusal(output: str) -> str:
    """pip's reason for refusing a version the index answered with ("" when it did not refuse)."""
    if _REFUSED not in output:
        return ""
    errors = [
        line.strip().removeprefix("ERROR: ") for line in output.splitlines() if line.startswith("ERROR:")
    ]
    caused = _CAUSED_BY.search(output)
    causes = [line.strip() for line in caused.group(1).splitlines()] if caused else []
    return f"{errors[0].rstrip('.') if errors else _REFUSED}: {'; '.join(causes) or _REFUSED}"


def _missing_from_pip(platform: Platform, output: str) -> Missing:
    """Why pip found no wheel: its last error line, whether it reached the index, what it saw."""
    errors = [line.strip() for line in output.splitlines() if line.startswith("ERROR:")]
    said = errors[-1] if errors else (output.strip().splitlines() or ["pip failed"])[-1]
    seen = _FROM_VERSIONS.search(output)
    versions = (
        tuple(v.strip() for v in seen.group(1).split(",") if v.strip() not in ("", "none")) if seen else ()
    )
    network = any(word in output for word in _NETWORK_ERRORS)
    return Missing(platform, said, network, versions, "" if network else _refusal(output))


def _pip_download(requirement: str, pip_tag: str, python: str, dest: Path) -> str | None:
    """Download one wheel into ``dest``: ``None`` when it worked, else pip's output (why not)."""
    try:
        patch_check.pip_download(requirement, pip_tag, python, dest, DOWNLOAD_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        out = b"".join(part for part in (exc.stdout, exc.stderr) if isinstance(part, bytes))
        return out.decode("utf-8", "replace") or f"pip exited with {exc.returncode}"
    except subprocess.TimeoutExpired:
        return f"pip download took longer than {DOWNLOAD_TIMEOUT:.0f} s"
    return None


def download(cache: Path, platform: Platform, version: str, pythons: Sequence[str]) -> Fetched | Missing:
    """``pip download`` the wheel for the first of ``pythons`` whose Requires-Python admits it."""
    dest = cache / platform.pip_tag
    dest.mkdir(parents=True, exist_ok=True)
    misses: list[Missing] = []
    for python in pythons:
        output = _pip_download(f"torch=={version}", platform.pip_tag, python, dest)
        if output is None:
            path = cached_wheel(cache, platform, version, [python])
            if path is not None:
                return Fetched(platform, read_wheel(path), "downloaded")
            output = f"pip download left no torch {version} wheel in {dest}"
        misses.append(_missing_from_pip(platform, output))
        if misses[-1].network or misses[-1].refused:
            return misses[-1]  # another Python will not reach the index either, nor lift a constraint
    if not misses:
        return Missing(platform, "no Python to ask for")
    # each Python sees the versions whose Requires-Python admits it: together, what the index has
    seen = tuple(sorted({v for m in misses for v in m.versions_seen}, key=version_key))
    newest = f" (the newest there: {seen[-1]})" if seen else ""
    return Missing(
        platform, f"no torch {version} wheel for {platform.pip_tag} on the index{newest}", False, seen
    )


def fetch(
    cache: Path, platform: Platform, version: str, pythons: Sequence[str], offline: bool
) -> Fetched | Missing:
    """The wheel from the cache, else (unless ``offline``) from the index."""
    path = cached_wheel(cache, platform, version, pythons)
    if path is not None:
        return Fetched(platform, read_wheel(path), "cached")
    if offline:
        return Missing(platform, f"no cached torch {version} wheel in {cache / platform.pip_tag} (--offline)")
    return download(cache, platform, version, pythons)


def no_wheel_at_all(version: str, missing: list[Missing], offline: bool) -> WheelInputError:
    """The one-line error when no platform has a wheel: no network, nothing cached, or no such version."""
    if any(m.network for m in missing):
        first = next(m for m in missing if m.network)
        return WheelInputError(f"no network: pip cannot reach the package index ({first.reason})")
    if offline:
        places = ", ".join(m.platform.pip_tag for m in missing)
        return WheelInputError(
            f"no cached torch {version} wheel for any of {places} (--offline; run without it to download)"
        )
    refused = [m for m in missing if m.refused]
    if refused:
        return WheelInputError(f"pip refused torch {version}: {refused[0].refused}")
    seen = sorted({v for m in missing for v in m.versions_seen}, key=version_key)
    if not seen:  # the index answered (no network error) and lists no torch for these tags
        tags = ", ".join(m.platform.pip_tag for m in missing)
        return WheelInputError(f"the package index lists no torch wheel for {tags} ({missing[0].reason})")
    newest = ", ".join(seen[-3:])
    return WheelInputError(
        f"unknown version: no torch {version} wheel on the index (the newest there: {newest})"
    )


def version_key(version: str) -> tuple[int, ...]:
    """``(2, 14, 1)`` for ``2.14.1``: versions in numeric order."""
    return tuple(int(n) for n in re.findall(r"\d+", version)[:4])
