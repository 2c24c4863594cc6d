"""Pytest fixtures shared by the test suites (registered from ``tests/conftest.py``).

* ``pip_wheel_cache`` (session): a directory for pip's wheel cache, kept in
  pytest's cache dir (``.pytest_cache``) so repeated runs do not download again.
  (Falls back to a session temp dir with ``-p no:cacheprovider``.)
  Pass it as ``cache_dir`` to :func:`feedstock.conda_build_standin.cpythons.make_conda_like_prefix`.
* ``cpythons`` (session): :func:`feedstock.conda_build_standin.cpythons.find_cpythons`.
* ``two_cpythons`` (session): the same, skipping the test when fewer than two are found.
* ``freethreaded_python`` (session): the provisioned free-threaded CPython
  (:mod:`support.freethreaded`: skips without it, fails instead in CI).
* ``harness_cache`` (session, autouse): ``$FEEDSTOCK_HARNESS_CACHE`` for the session, so that
  the harness's runs share pip's downloads and the host packages' installed trees
  (:func:`feedstock.conda_build_standin.prefix.shared_cache`).
* ``repo_root`` / ``shared_data`` (session): the checkout, and ``<repo>/../shared/data``
  (tests using the latter must skip when a file is absent).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from feedstock.conda_build_standin.cpythons import CPython, find_cpythons
from feedstock.conda_build_standin.prefix import SHARED_CACHE_ENV
from feedstock.paths import REPO as REPO_ROOT

from support.freethreaded import freethreaded_or_skip


@pytest.fixture(scope="session", autouse=True)
def harness_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("harness-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SHARED_CACHE_ENV, str(path))
        yield path


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def pip_wheel_cache(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    cache = getattr(request.config, "cache", None)  # None with -p no:cacheprovider
    if cache is None:
        return tmp_path_factory.mktemp("megabuild-pip-cache")
    return Path(cache.mkdir("megabuild-pip-cache"))


@pytest.fixture(scope="session")
def cpythons() -> list[CPython]:
    return find_cpythons()


@pytest.fixture(scope="session")
def two_cpythons(cpythons: list[CPython]) -> list[CPython]:
    if len(cpythons) < 2:
        pytest.skip(f"needs at least two CPython >= 3.10, found {len(cpythons)}")
    return cpythons


@pytest.fixture(scope="session")
def freethreaded_python() -> CPython:
    return freethreaded_or_skip()
