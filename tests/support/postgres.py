"""A throwaway PostgreSQL server for tests.

:func:`pg_uri` yields ``$LANGGRAPH_LOOP_TEST_PG_URI`` when it is set. Otherwise it finds
the newest ``/usr/lib/postgresql/*/bin`` (installing the Debian ``postgresql``
package with apt-get when none exists), runs ``initdb`` in a fresh temporary
directory (as the ``postgres`` user when running as root; trust auth, no fsync),
starts the server on a free 127.0.0.1 port, creates a database, yields
``postgresql://postgres@127.0.0.1:PORT/DB`` and stops and deletes everything on exit.
:func:`fresh_database` creates another uniquely named database on the same server.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ENV_VAR = "LANGGRAPH_LOOP_TEST_PG_URI"
DIR_PREFIX = "langgraph-loop-pg-"
PG_GLOB = "/usr/lib/postgresql/*/bin"
STALE_AFTER_S = 3600.0
MIN_AGE_S = 600.0
INITDB_ARGS = ("-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
SERVER_OPTS = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"


class PostgresSetupError(RuntimeError):
    """Raised when the throwaway PostgreSQL server cannot be installed or started."""


def _run(cmd: Sequence[str], *, what: str, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """Run a command; raise :class:`PostgresSetupError` with its output tail on failure."""
    try:
        proc = subprocess.run(
            list(cmd), capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PostgresSetupError(f"{what} failed: {' '.join(cmd)}: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise PostgresSetupError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc.stdout


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for ``/usr/lib/postgresql/<version>/bin``."""
    return tuple(int(x) for x in re.findall(r"\d+", path.parent.name)) or (0,)


def find_pg_bin() -> Path | None:
    """The newest PostgreSQL ``bin`` directory that has ``initdb`` and ``pg_ctl``, if any."""
    candidates = [
        p for p in Path("/").glob(PG_GLOB.lstrip("/")) if (p / "initdb").exists() and (p / "pg_ctl").exists()
    ]
    return max(candidates, key=_version_key) if candidates else None


def install_postgres() -> Path:
    """Install the Debian ``postgresql`` package non-interactively; return its bin dir."""
    if shutil.which("apt-get") is None:
        raise PostgresSetupError(
            f"no PostgreSQL under {PG_GLOB} and no apt-get; install PostgreSQL or set {ENV_VAR}"
        )
    if os.geteuid() != 0:
        raise PostgresSetupError(
            f"no PostgreSQL under {PG_GLOB} and not root (cannot apt-get install); set {ENV_VAR}"
        )
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    _run(["apt-get", "update"], what="apt-get update", timeout=600, env=env)
    _run(
        ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"],
        what="apt-get install postgresql",
        timeout=1200,
        env=env,
    )
    found = find_pg_bin()
    if found is None:
        raise PostgresSetupError(f"apt-get installed postgresql but {PG_GLOB} has no initdb")
    return found


def ensure_pg_bin() -> Path:
    """Find the PostgreSQL binaries, installing them when absent."""
    return find_pg_bin() or install_postgres()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _lock_pid(pidfile: Path) -> int:
    """The process id in a ``postmaster.pid`` lock file.

    A standalone backend (``initdb``'s bootstrap and post-bootstrap steps) writes its pid
    negated; the process is the absolute value either way.
    """
    return abs(int(pidfile.read_text().split()[0]))


def reap_stale_dirs(root: str | None = None) -> list[Path]:
    """Delete leftover throwaway dirs whose server is gone; returns the removed paths.

    Another test run (CI runs two side by side) may be creating its cluster right now, so
    a dir younger than ten minutes is never touched. An older one is stale when its
    ``postmaster.pid`` names a dead process, or when it has no ``postmaster.pid`` and is
    older than an hour. Running servers are left alone.
    """
    removed = []
    now = time.time()
    for path in Path(root or tempfile.gettempdir()).glob(DIR_PREFIX + "*"):
        pidfile = path / "data" / "postmaster.pid"
        try:
            age = now - path.stat().st_mtime
            if age < MIN_AGE_S:
                continue
            stale = not _pid_alive(_lock_pid(pidfile)) if pidfile.exists() else age > STALE_AFTER_S
        except (OSError, ValueError, IndexError):
            continue
        if stale:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


class ThrowawayPostgres:
    """One PostgreSQL cluster in a fresh temporary directory."""

    def __init__(self, bin_dir: Path, dbname: str = "langgraph_loop_test") -> None:
        self.bin_dir = bin_dir
        self.dbname = dbname
        self.root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self._as_postgres = os.geteuid() == 0

    @property
    def uri(self) -> str:
        """The connection URI of the test database."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{self.dbname}"

    def _cmd(self, tool: str, *args: str) -> list[str]:
        """A PostgreSQL tool invocation, wrapped in ``runuser -u postgres`` when root."""
        cmd = [str(self.bin_dir / tool), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if self._as_postgres else cmd

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the server log (for error messages)."""
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no server log)"

    def _tcp_args(self) -> list[str]:
        """Client connection options for the throwaway server."""
        return ["-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres"]

    def start(self, attempts: int = 3) -> None:
        """initdb, start on a free port (retrying on port races), wait, createdb."""
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        _run(self._cmd("initdb", "-D", str(self.data), *INITDB_ARGS), what="initdb")
        last: PostgresSetupError | None = None
        for _ in range(attempts):
            self.port = free_port()
            opts = f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} {SERVER_OPTS}"
            args = ["-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "-o", opts, "start"]
            try:
                _run(self._cmd("pg_ctl", *args), what="pg_ctl start")
                break
            except PostgresSetupError as exc:
                last = exc
        else:
            raise PostgresSetupError(f"{last}\n--- server log tail ---\n{self.log_tail()}")
        self._wait_ready()
        _run([str(self.bin_dir / "createdb"), *self._tcp_args(), self.dbname], what="createdb")

    def _wait_ready(self, timeout: float = 30.0) -> None:
        """Poll ``pg_isready`` until the server accepts TCP connections."""
        deadline = time.monotonic() + timeout
        cmd = [str(self.bin_dir / "pg_isready"), *self._tcp_args(), "-q"]
        while time.monotonic() < deadline:
            if subprocess.run(cmd, check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise PostgresSetupError(
            f"PostgreSQL on port {self.port} not ready after {timeout}s\n"
            f"--- server log tail ---\n{self.log_tail()}"
        )

    def stop(self) -> None:
        """Stop the server (fast mode) and delete its directory."""
        try:
            if (self.data / "postmaster.pid").exists():
                _run(
                    self._cmd("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop"), what="pg_ctl stop"
                )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def pg_uri() -> Iterator[str]:
    """Yield a PostgreSQL URI: ``$LANGGRAPH_LOOP_TEST_PG_URI`` or a throwaway local server."""
    env_uri = os.environ.get(ENV_VAR)
    if env_uri:
        yield env_uri
        return
    bin_dir = ensure_pg_bin()
    reap_stale_dirs()
    cluster = ThrowawayPostgres(bin_dir)
    try:
        cluster.start()
        yield cluster.uri
    finally:
        cluster.stop()


def fresh_database(uri: str, prefix: str = "lg") -> str:
    """Create a new uniquely named database on the server of ``uri``; return its URI."""
    import psycopg  # local import: only tests that use PostgreSQL need psycopg
    from psycopg import sql

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise PostgresSetupError(f"CREATE DATABASE {name} on {uri} failed: {exc}") from exc
    parts = urlsplit(uri)
    return urlunsplit(parts._replace(path="/" + name))
