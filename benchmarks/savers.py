"""Checkpointers for the benchmarks and how much they stored.

* ``memory``: ``InMemorySaver``; bytes = every serialized byte in ``storage``, ``writes``
  and ``blobs``.
* ``sqlite``: ``SqliteSaver`` on a file in a temp dir; after a ``wal_checkpoint(TRUNCATE)``
  we report the file size and, separately, the summed blob lengths of its tables.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

__all__ = ["SaverKind", "SaverStats", "open_saver", "saver_stats"]

SaverKind = Literal["none", "memory", "sqlite"]


@dataclass
class SaverStats:
    """What a checkpointer holds after one run."""

    bytes: int
    checkpoints: int
    file_bytes: int | None = None


@contextmanager
def open_saver(kind: SaverKind, directory: Path) -> Iterator[BaseCheckpointSaver[Any] | None]:
    """Yield a fresh checkpointer of ``kind`` (None for ``none``)."""
    if kind == "none":
        yield None
    elif kind == "memory":
        yield InMemorySaver()
    else:
        path = directory / f"ckpt-{os.getpid()}-{id(directory)}.sqlite"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)


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


def saver_stats(saver: BaseCheckpointSaver[Any] | None) -> SaverStats | None:
    """Bytes and checkpoint count held by ``saver`` (None when there is no saver)."""
    if isinstance(saver, InMemorySaver):
        return _memory_stats(saver)
    if isinstance(saver, SqliteSaver):
        return _sqlite_stats(saver)
    return None
