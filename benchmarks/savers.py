"""Checkpointers for the benchmarks and how much they stored.

* ``memory``: ``InMemorySaver``; bytes = every serialized byte in ``storage``, ``writes``
  and ``blobs``.
* ``sqlite``: ``SqliteSaver`` on a file in a temp dir; after a ``wal_checkpoint(TRUNCATE)``
  we report the file size and, separately, the summed blob lengths of its tables.
* ``postgres``: ``PostgresSaver`` on one database of the test suite's throwaway server
  (``tests/support/postgres.py``: ``$LANGGRAPH_LOOP_TEST_PG_URI`` when set, else a local
  server started on a free port and removed at the end). The tables are emptied before every
  run; bytes = ``checkpoint`` and ``metadata`` as JSON text plus the ``blob`` lengths of
  ``checkpoint_blobs`` and ``checkpoint_writes``; file bytes = ``pg_total_relation_size`` of
  the three tables (heap, TOAST and indexes).

:meth:`Savers.aopen` yields the async counterparts for ``ainvoke`` (inside a running event
loop): ``InMemorySaver``, ``AsyncSqliteSaver`` (aiosqlite) on the same file, ``AsyncPostgresSaver``
on the same database. :func:`saver_stats` measures the sync savers and ``InMemorySaver`` only.

Example:
    >>> with Savers() as savers, savers.open("memory") as saver:
    ...     saver_stats(saver)
    SaverStats(bytes=0, checkpoints=0, file_bytes=None)
    >>> import asyncio
    >>> async def kind() -> str:
    ...     async with savers.aopen("sqlite") as saver:
    ...         return type(saver).__name__
    >>> with Savers() as savers:
    ...     asyncio.run(kind())
    'AsyncSqliteSaver'
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

try:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    from tests.support.postgres import fresh_database, pg_uri
except ImportError as exc:  # the `postgres` extra is not installed: the postgres cases are skipped
    PG_IMPORT_ERROR: str | None = f"{type(exc).__name__}: {exc}"
else:
    PG_IMPORT_ERROR = None

__all__ = ["SaverKind", "SaverStats", "Savers", "saver_stats"]

SaverKind = Literal["none", "memory", "sqlite", "postgres"]
PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@dataclass
class SaverStats:
    """What a checkpointer holds after one run."""

    bytes: int
    checkpoints: int
    file_bytes: int | None = None


class Savers:
    """Opens a fresh checkpointer per run; owns a temp dir and, lazily, one PostgreSQL database.

    Use as a context manager: leaving it stops the throwaway PostgreSQL server (if one was
    started) and deletes the temp dir. ``pg_server``: a running server's URI to create the
    database on instead (e.g. the test session's).
    """

    def __init__(self, pg_server: str | None = None) -> None:
        self._stack = ExitStack()
        self.directory = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="lgl-bench-")))
        self._pg: str | None = None
        self._pg_error: str | None = None
        self._pg_server = pg_server

    def __enter__(self) -> Savers:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stack.close()

    def unavailable(self, kind: SaverKind) -> str | None:
        """Why ``kind`` cannot be used here (None when it can); starts PostgreSQL on first ask."""
        if kind != "postgres":
            return None
        if self._pg is None and self._pg_error is None:
            self._pg_error = PG_IMPORT_ERROR
        if self._pg is None and self._pg_error is None:
            try:
                self._pg = self._start_postgres()
            except Exception as exc:  # noqa: BLE001 - any setup failure means "skip postgres"
                self._pg_error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return self._pg_error

    def _start_postgres(self) -> str:
        """Start (or reuse) the server, create one database with the saver's tables (dropped at exit)."""
        server = self._pg_server or self._stack.enter_context(pg_uri())
        uri = fresh_database(server, prefix="bench")
        self._stack.callback(_drop_database, server, uri.rsplit("/", 1)[1])
        with PostgresSaver.from_conn_string(uri) as saver:
            saver.setup()
        return uri

    @contextmanager
    def open(self, kind: SaverKind) -> Iterator[BaseCheckpointSaver[Any] | None]:
        """Yield a fresh, empty checkpointer of ``kind`` (None for ``none``)."""
        if kind == "none":
            yield None
        elif kind == "memory":
            yield InMemorySaver()
        elif kind == "sqlite":
            with self._sqlite() as saver:
                yield saver
        else:
            with self._postgres() as pg:
                yield pg

    @asynccontextmanager
    async def aopen(self, kind: SaverKind) -> AsyncIterator[BaseCheckpointSaver[Any] | None]:
        """Yield a fresh, empty async-capable checkpointer of ``kind``; call it in the event loop."""
        if kind == "none":
            yield None
        elif kind == "memory":
            yield InMemorySaver()
        elif kind == "sqlite":
            async with self._asqlite() as saver:
                yield saver
        else:
            async with self._apostgres() as pg:
                yield pg

    def _sqlite_files(self) -> tuple[Path, list[Path]]:
        """The database path and its files (database, WAL, shared memory), deleted."""
        path = self.directory / "ckpt.sqlite"
        files = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]
        for file in files:
            file.unlink(missing_ok=True)
        return path, files

    @contextmanager
    def _sqlite(self) -> Iterator[SqliteSaver]:
        path, files = self._sqlite_files()
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn)
            saver.setup()  # tables up front, as for PostgreSQL: not part of the timed run
            yield saver
        finally:
            conn.close()
            for file in files:
                file.unlink(missing_ok=True)

    @asynccontextmanager
    async def _asqlite(self) -> AsyncIterator[AsyncSqliteSaver]:
        path, files = self._sqlite_files()
        try:
            async with AsyncSqliteSaver.from_conn_string(str(path)) as saver:
                await saver.setup()
                yield saver
        finally:
            for file in files:
                file.unlink(missing_ok=True)

    @contextmanager
    def _postgres(self) -> Iterator[BaseCheckpointSaver[Any]]:
        reason = self.unavailable("postgres")
        if reason is not None or self._pg is None:
            raise RuntimeError(f"PostgreSQL is not available: {reason}")
        with PostgresSaver.from_conn_string(self._pg) as saver:
            _pg_conn(saver).execute(f"TRUNCATE {', '.join(PG_TABLES)}")
            yield saver

    @asynccontextmanager
    async def _apostgres(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        reason = self.unavailable("postgres")
        if reason is not None or self._pg is None:
            raise RuntimeError(f"PostgreSQL is not available: {reason}")
        async with AsyncPostgresSaver.from_conn_string(self._pg) as saver:
            conn = saver.conn  # from_conn_string gives it one connection, not a pool
            assert isinstance(conn, psycopg.AsyncConnection)
            await conn.execute(f"TRUNCATE {', '.join(PG_TABLES)}")
            yield saver


def _drop_database(server: str, name: str) -> None:
    """Drop the benchmark's database (matters when the server is not a throwaway one)."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name)))


def _typed_len(value: Any) -> int:
    """Byte length of a serde ``(type, bytes)`` pair."""
    return len(value[1]) if isinstance(value, tuple) and len(value) == 2 else 0


def _memory_stats(saver: InMemorySaver) -> SaverStats:
    total = checkpoints = 0
    for namespaces in saver.storage.values():
        for entries in namespaces.values():
            checkpoints += len(entries)
            for checkpoint, metadata, _parent in entries.values():
                total += _typed_len(checkpoint) + _typed_len(metadata)
    for inner in saver.writes.values():
        for _task, _channel, value, _path in inner.values():
            total += _typed_len(value)
    total += sum(_typed_len(blob) for blob in saver.blobs.values())
    return SaverStats(bytes=total, checkpoints=checkpoints)


def _sqlite_stats(saver: SqliteSaver) -> SaverStats:
    conn = saver.conn
    with saver.lock:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        row = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint)), 0)"
            " + COALESCE(SUM(LENGTH(metadata)), 0) FROM checkpoints"
        ).fetchone()
        writes = conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
        path = conn.execute("PRAGMA database_list").fetchone()[2]
    file_bytes = sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p))
    return SaverStats(bytes=int(row[1]) + int(writes[0]), checkpoints=int(row[0]), file_bytes=file_bytes)


PG_STATS = """
SELECT
  (SELECT COUNT(*) FROM checkpoints) AS checkpoints,
  (SELECT COALESCE(SUM(octet_length(checkpoint::text) + octet_length(metadata::text)), 0)
     FROM checkpoints)
  + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_blobs)
  + (SELECT COALESCE(SUM(octet_length(blob)), 0) FROM checkpoint_writes) AS bytes,
  pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs')
  + pg_total_relation_size('checkpoint_writes') AS file_bytes
"""


def _pg_conn(saver: PostgresSaver) -> psycopg.Connection[dict[str, Any]]:
    """The saver's connection (``from_conn_string`` gives it one connection, not a pool)."""
    conn = saver.conn
    assert isinstance(conn, psycopg.Connection)
    return conn


def _postgres_stats(saver: PostgresSaver) -> SaverStats:
    with saver.lock:
        row = _pg_conn(saver).execute(PG_STATS).fetchone()
    assert row is not None
    return SaverStats(bytes=int(row["bytes"]), checkpoints=int(row["checkpoints"]),
                      file_bytes=int(row["file_bytes"]))


def saver_stats(saver: BaseCheckpointSaver[Any] | None) -> SaverStats | None:
    """Bytes and checkpoint count held by ``saver`` (None when there is no saver)."""
    if isinstance(saver, InMemorySaver):
        return _memory_stats(saver)
    if isinstance(saver, SqliteSaver):
        return _sqlite_stats(saver)
    if PG_IMPORT_ERROR is None and isinstance(saver, PostgresSaver):
        return _postgres_stats(saver)
    return None
