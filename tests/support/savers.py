"""Open a real checkpointer by backend name, for the child-process workers.

``backend`` is ``"sqlite"`` (``target`` a file path) or ``"postgres"`` (``target`` a URI).
Both savers are set up (tables created) before they are yielded.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

__all__ = ["async_saver", "sync_saver"]


@contextmanager
def sync_saver(backend: str, target: str) -> Iterator[Any]:
    """A SqliteSaver or PostgresSaver, closed on exit."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(target, check_same_thread=False, timeout=30)
        try:
            saver = SqliteSaver(conn)
            saver.setup()
            yield saver
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(target) as pg:
            pg.setup()
            yield pg


@asynccontextmanager
async def async_saver(backend: str, target: str) -> AsyncIterator[Any]:
    """An AsyncSqliteSaver or AsyncPostgresSaver, closed on exit."""
    if backend == "sqlite":
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(target) as saver:
            await saver.setup()
            yield saver
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(target) as pg:
            await pg.setup()
            yield pg
