"""The platforms the recipe builds, as the version-bump check picks them (``--platforms``).

The facts of each (upstream's wheel tags, listing names, shared-library suffix, wheel repair) are
``megabuild.model``'s :class:`~megabuild.model.PlatformFacts`: one place for the build and the check.
"""

from __future__ import annotations

from megabuild.model import PLATFORMS, PlatformFacts

from ..errors import UsageError

Platform = PlatformFacts
BY_NAME = {p.subdir: p for p in PLATFORMS}
BY_LISTING_TAG = {p.listing_tag: p for p in PLATFORMS}

__all__ = ["BY_LISTING_TAG", "BY_NAME", "PLATFORMS", "Platform", "parse_platforms"]


def parse_platforms(text: str | None) -> tuple[Platform, ...]:
    """``linux-64,osx-arm64`` -> those platforms (all when ``None``); unknown names are bad input."""
    if text is None:
        return PLATFORMS
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in BY_NAME]
    if unknown or not names:
        raise UsageError(
            f"--platforms: unknown platform(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(BY_NAME)}"
        )
    return tuple(BY_NAME[name] for name in dict.fromkeys(names))
