"""A throwaway Redis server for tests.

:func:`redis_url` finds ``redis-server`` (installing the Debian ``redis-server``
package with apt-get when it is absent and we are root), starts it on a free
127.0.0.1 port in a fresh temporary directory with persistence off, yields
``redis://127.0.0.1:PORT/0`` and stops it (SIGTERM, then SIGKILL, by its pid)
and deletes the directory on exit, also when the test failed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from tests.support.postgres import free_port

DIR_PREFIX = "langgraph-loop-redis-"


class RedisSetupError(RuntimeError):
    """Raised when the throwaway Redis server cannot be installed or started."""


def install_redis() -> str:
    """Install the Debian ``redis-server`` package non-interactively; return its path."""
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise RedisSetupError("no redis-server on PATH and cannot apt-get install it (not root "
                              "or no apt-get): install the redis-server package")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"],
                ["apt-get", "install", "-y", "--no-install-recommends", "redis-server"]):
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200,
                              check=False)
        if proc.returncode != 0:
            raise RedisSetupError(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    found = shutil.which("redis-server")
    if found is None:
        raise RedisSetupError("apt-get installed redis-server but it is not on PATH")
    return found


def _ping(port: int) -> bool:
    """Whether a Redis server answers PING on 127.0.0.1:port (raw RESP, no client library)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as sock:
        sock.sendall(b"PING\r\n")
        return sock.recv(64).startswith(b"+PONG")
    return False


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server this module started, by its pid."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextlib.contextmanager
def redis_url(timeout: float = 30.0) -> Iterator[str]:
    """Yield the URL of a fresh Redis server on a free loopback port; stop it afterwards."""
    binary = shutil.which("redis-server") or install_redis()
    root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
    port = free_port()
    cmd = [binary, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(root),
           "--save", "", "--appendonly", "no", "--protected-mode", "no"]
    with (root / "redis.log").open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not _ping(port):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (root / "redis.log").read_text(errors="replace")[-3000:]
                raise RedisSetupError(f"redis-server on port {port} did not start:\n{tail}")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop(proc)
        shutil.rmtree(root, ignore_errors=True)
