"""This step's sccache server: started with a bounded wait, stopped when the step ends.

sccache's own ``--start-server`` gives up after 10 s and leaves a server behind that hangs on a
remote refusing it (Redis with a wrong password). So the server runs in the foreground of a
child process (``SCCACHE_NO_DAEMON=1``), the step waits a bounded time for its socket (its port
on Windows), and ends it by its PID if it does not come up.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

START_SECONDS = 30.0
_POLL = 0.25


@dataclass
class Server:
    sccache: str
    env: dict[str, str]  # the environment it was started with (its address among it)
    process: subprocess.Popen[bytes]
    log: Path

    def ready(self) -> bool:
        uds = self.env.get("SCCACHE_SERVER_UDS")
        if uds:
            return Path(uds).is_socket()
        try:
            with socket.create_connection(("127.0.0.1", int(self.env["SCCACHE_SERVER_PORT"])), 1):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it (its statistics, which name the store, are not printed), and clean up."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.sccache, "--stop-server"], env=self.env, capture_output=True, timeout=60)
        _end(self.process)
        uds = self.env.get("SCCACHE_SERVER_UDS")
        for leftover in (Path(uds) if uds else None, self.log):
            if leftover is not None:
                leftover.unlink(missing_ok=True)


def _end(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _first_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    found = next((ln.strip() for ln in lines if "error" in ln.lower()), "")
    return found[:160]


def start(sccache: str, env: Mapping[str, str], timeout: float = START_SECONDS) -> Server | str:
    """The running server, or why it did not come up (one line)."""
    server_env = dict(env)
    uds = server_env.get("SCCACHE_SERVER_UDS")
    if uds:
        Path(uds).unlink(missing_ok=True)
    log = Path(tempfile.gettempdir()) / f"megabuild-sccache-{os.getpid()}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sccache, "--start-server"], env={**server_env, "SCCACHE_NO_DAEMON": "1"},
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    server = Server(sccache, server_env, process, log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.ready():
            return server
        if process.poll() is not None:
            break
        time.sleep(_POLL)
    _end(process)
    why = _first_error(log) or f"no answer within {timeout:.0f} s"
    log.unlink(missing_ok=True)
    return why


def describe(server: Server) -> str:
    """``sccache in <its cache location> (<its version>)``, for the step's log."""
    stats = subprocess.run([server.sccache, "--show-stats"], env=server.env, capture_output=True, text=True)
    version = subprocess.run([server.sccache, "--version"], env=server.env, capture_output=True, text=True)
    location = next(
        (ln.split(None, 2)[2].strip() for ln in stats.stdout.splitlines() if ln.startswith("Cache location")),
        "?",
    )
    return f"sccache in {location} ({version.stdout.strip()})"
