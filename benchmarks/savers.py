"""Checkpointers, fresh per run, and what they stored (bytes, checkpoints, file size): ``memory``,
``sqlite`` (a temp file), ``postgres`` (a database on the tests' throwaway server or
``$LANGGRAPH_LOOP_TEST_PG_URI``, emptied before every run); :meth:`Savers.aopen` gives the async ones.

Example:
    >>> import asyncio
    >>> async def kind(savers: Savers) -> str:
    ...     async with savers.aopen("sqlite") as saver:
    ...         return type(saver).__name__
    >>> with Savers() as savers:
    ...     with savers.open("memory") as saver:
    ...         print(saver_stats(saver))
    ...     asyncio.run(kind(savers))
    SaverStats(bytes=0, checkpoints=0, file_bytes=None)
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

SaverKind = Literal["none", "memory", "sqlite", "postgres"]
PG_TABLES = "checkpoints, checkpoint_blobs, checkpoint_writes"


@dataclass
class SaverStats:
    """What a checkpointer holds after one run."""

    bytes: int
    checkpoints: int
    file_bytes: int | None = None


class Savers:
    """Opens a fresh checkpointer per run; owns a temp dir and, lazily, one PostgreSQL database."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.directory = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="lgl-bench-")))
        self._pg: str | None = None
        self._pg_error: str | None = PG_IMPORT_ERROR

    def __enter__(self) -> Savers:
        return self

    def __exit__(self, *_: object) -> None:
        self._stack.close()

    def unavailable(self, kind: SaverKind) -> str | None:
        """Why ``kind`` cannot be used here (None when it can); starts PostgreSQL on first ask."""
        if kind == "postgres" and self._pg is None and self._pg_error is None:
            try:
                server = self._stack.enter_context(pg_uri())
                uri = fresh_database(server, prefix="bench")
                self._stack.callback(_drop_database, server, uri.rsplit("/", 1)[1])
                with PostgresSaver.from_conn_string(uri) as saver:
                    saver.setup()
                self._pg = uri
            except Exception as exc:  # noqa: BLE001 - any setup failure means "skip postgres"
                self._pg_error = f"{type(exc).__name__}: {str(exc)[:300]}"
        return self._pg_error if kind == "postgres" else None

    def _sqlite_path(self) -> Path:
        """The database path, its files (database, WAL, shared memory) deleted."""
        path = self.directory / "ckpt.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return path

    def _pg_uri(self) -> str:
        if self.unavailable("postgres") is not None or self._pg is None:
            raise RuntimeError(f"PostgreSQL is not available: {self._pg_error}")
        return self._pg

    @contextmanager
    def open(self, kind: SaverKind) -> Iterator[BaseCheckpointSaver[Any] | None]:
        """Yield a fresh, empty checkpointer of ``kind`` (None for ``none``)."""
        if kind in ("none", "memory"):
            yield None if kind == "none" else InMemorySaver()
        elif kind == "sqlite":
            path = self._sqlite_path()
            conn = sqlite3.connect(path, check_same_thread=False)
            try:
                saver = SqliteSaver(conn)
                saver.setup()  # tables up front, as for PostgreSQL: not part of the timed run
                yield saver
            finally:
                conn.close()
                self._sqlite_path()
        else:
            with PostgresSaver.from_conn_string(self._pg_uri()) as pg:
                _pg_conn(pg).execute(f"TRUNCATE {PG_TABLES}")
                yield pg

    @asynccontextmanager
    async def aopen(self, kind: SaverKind) -> AsyncIterator[BaseCheckpointSaver[Any] | None]:
        """Yield a fresh, empty async-capable checkpointer of ``kind``; call it in the event loop."""
        if kind in ("none", "memory"):
            yield None if kind == "none" else InMemorySaver()
        elif kind == "sqlite":
            try:
                async with AsyncSqliteSaver.from_conn_string(str(self._sqlite_path())) as saver:
                    await saver.setup()
                    yield saver
            finally:
                self._sqlite_path()
        else:
            async with AsyncPostgresSaver.from_conn_string(self._pg_uri()) as apg:
                assert isinstance(apg.conn, psycopg.AsyncConnection)  # one connection, not a pool
                await apg.conn.execute(f"TRUNCATE {PG_TABLES}")
                yield apg


def _drop_database(server: str, name: str) -> None:
    """Drop the benchmark's database (matters when the server is not a throwaway one)."""
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {}").format(psycopg.sql.Identifier(name)))


def _typed_len(value: Any) -> int:
    """Byte length of a serde ``(type, bytes)`` pair."""
    return len(value[1]) if isinstance(value, tuple) and len(value) == 2 else 0


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
    assert isinstance(saver.conn, psycopg.Connection)
    return saver.conn


def saver_stats(saver: BaseCheckpointSaver[Any] | None) -> SaverStats | None:
    """Bytes and checkpoint count held by ``saver`` (None when there is no saver)."""
    if isinstance(saver, InMemorySaver):
        entries = [e for ns in saver.storage.values() for inner in ns.values() for e in inner.values()]
        total = sum(_typed_len(checkpoint) + _typed_len(metadata) for checkpoint, metadata, _ in entries)
        total += sum(_typed_len(v) for inner in saver.writes.values() for _, _, v, _ in inner.values())
        return SaverStats(total + sum(_typed_len(blob) for blob in saver.blobs.values()), len(entries))
    if isinstance(saver, SqliteSaver):
        with saver.lock:
            saver.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            count, stored = saver.conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(LENGTH(checkpoint)), 0) + COALESCE(SUM(LENGTH(metadata)), 0)"
                " FROM checkpoints").fetchone()
            (writes,) = saver.conn.execute("SELECT COALESCE(SUM(LENGTH(value)), 0) FROM writes").fetchone()
            path = saver.conn.execute("PRAGMA database_list").fetchone()[2]
        return SaverStats(int(stored) + int(writes), int(count),
                          sum(os.path.getsize(p) for p in (path, f"{path}-wal") if os.path.exists(p)))
    if PG_IMPORT_ERROR is None and isinstance(saver, PostgresSaver):
        with saver.lock:
            row = _pg_conn(saver).execute(PG_STATS).fetchone()
        assert row is not None
        return SaverStats(int(row["bytes"]), int(row["checkpoints"]), int(row["file_bytes"]))
    return None
