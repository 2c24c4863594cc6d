"""One build step inside its compiler cache: the environment, the server, the warnings.

:func:`session` sets the variables in ``env`` (``os.environ`` for a build step, so that pip,
CMake and Ninja inherit them), starts the step's server, and stops it when the block ends.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, MutableMapping
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from megabuild.compiler_cache import ACTIVE, launcher, server, settings
from megabuild.compiler_cache.settings import CacheConfig


def warn(text: str) -> None:
    print(f"megabuild: warning: {text}", file=sys.stderr, flush=True)


def _strip_debug_prefix_maps(env: MutableMapping[str, str]) -> None:
    for name in ("CFLAGS", "CXXFLAGS"):
        if name in env:
            env[name] = settings.without_debug_prefix_maps(env[name])


def _start(config: CacheConfig, sccache: str, env: MutableMapping[str, str]) -> server.Server | None:
    """The step's server, the remote falling back to the local dir; None: this step is uncached."""
    address = settings.server_address(os.getpid(), sys.platform == "win32")
    started = server.start(sccache, {**env, **settings.sccache_environment(config, env, True), **address})
    if isinstance(started, str) and config.conf:
        # the remote is unreachable or refused the credentials: never fail the build for it
        error = started
        if config.local_dir:
            local = {**env, **settings.sccache_environment(config, env, False), **address}
            started = server.start(sccache, local)
        fallback = "building with the local dir only" if not isinstance(started, str) else "building uncached"
        warn(f"REMOTE COMPILER CACHE UNAVAILABLE ({error}); {fallback}")
    elif isinstance(started, str):
        warn(f"the sccache server did not start ({started}); building uncached")
    if isinstance(started, str):
        return None
    if started.env.get("SCCACHE_CONF") and config.read_only():
        warn("COMPILER CACHE READ-ONLY: hits are used, nothing new is stored")
    return started


def _raise_on_sigterm(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # so that the server is stopped on the way out


@contextmanager
def session(env: MutableMapping[str, str], work: Path) -> Iterator[bool]:
    """The block runs with this step's compiler cache; it yields whether the cache is on."""
    config = CacheConfig.from_environment(env)
    if not config.configured:
        print("compiler cache: off", flush=True)
        yield False
        return
    # the same in every step, usable cache or not (the module's docstring says why)
    launcher.write(work)
    env.update(launcher.environment(work))
    _strip_debug_prefix_maps(env)
    sccache = settings.find_sccache(env)
    problem = config.problem(sccache)
    if problem:
        warn(problem)
    running = _start(config, sccache, env) if sccache and not problem else None
    if running is None:
        print("compiler cache: off in this step (the launcher runs the compilers directly)", flush=True)
        yield False
        return
    previous = signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        env.update(running.env)  # what the step saw, and sccache's variables of the server that runs
        env[ACTIVE] = running.sccache
        print(f"compiler cache: {server.describe(running)}", flush=True)
        yield True
    finally:
        running.stop()
        signal.signal(signal.SIGTERM, previous)
