"""Where things are in the checkout the tools are installed from: one definition for the tools and
the tests. Commands that act on another feedstock (build-locally, build-all on a copy) take its root."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipe"
SCRIPTS = REPO / "scripts"
TESTS = REPO / "tests"

# Relative to a feedstock root: build-locally.py and build_all.py run on copies of the
# feedstock in the tests, so they pass their own root.
ARTIFACTS_DIR = "build_artifacts"
DONE_MARKER_DIR = Path(ARTIFACTS_DIR, "build-locally-done")


def done_marker(root: Path | str, config: str) -> Path:
    """The file build-locally.py writes as the very last step of a successful build of ``config``."""
    return Path(root) / DONE_MARKER_DIR / f"{config}.json"
