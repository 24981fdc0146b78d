"""Memory in the SQLite file of the session store (own tables, own connection)."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar, TypeVarTuple

from codeact.engine.memory.backend import MemoryBackend
from codeact.engine.memory.records import AgentMemoryError, MemoryItem, MemoryKind

__all__ = ["SQLiteMemory"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_items (
    kind TEXT NOT NULL,
    id TEXT NOT NULL,
    scope TEXT NOT NULL,
    created_at REAL NOT NULL,
    used_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS memory_by_scope ON memory_items (kind, scope, created_at DESC);
CREATE TABLE IF NOT EXISTS memory_versions (
    kind TEXT NOT NULL,
    scope TEXT NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (kind, scope)
);
"""
_BUMP = (
    "INSERT INTO memory_versions (kind, scope, version) VALUES (?, ?, 1) "
    "ON CONFLICT (kind, scope) DO UPDATE SET version = version + 1"
)


class SQLiteMemory(MemoryBackend):
    """Memory records in a SQLite file (``:memory:`` for a private in-memory database).

    Args:
        path: The database file (the session store's).
        busy_timeout: Seconds to wait for another process's write.
    """

    def __init__(self, path: str, *, busy_timeout: float = 5.0) -> None:
        # A private in-memory database is its own store: its cache key must not match another one's.
        self.key = f"sqlite:{path}" if path != ":memory:" else f"sqlite::memory:{id(self)}"
        self.path = path
        self._lock = threading.Lock()
        # One worker thread: operations land in the order they were made, even when a caller is cancelled.
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="codeact-memory")
        try:
            self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=busy_timeout)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise AgentMemoryError(f"memory store {path} could not be opened: {exc}", code="memory.store") from exc

    async def _run(self, action: str, fn: Callable[[*_Ts], _T], *args: *_Ts) -> _T:
        def locked() -> _T:
            with self._lock:
                try:
                    return fn(*args)
                except sqlite3.Error as exc:
                    raise AgentMemoryError(
                        f"memory store {self.path} failed to {action}: {exc}", code="memory.store"
                    ) from exc

        return await asyncio.get_running_loop().run_in_executor(self._worker, locked)

    def _write(self, statements: Sequence[tuple[str, tuple[object, ...]]], bumps: Iterable[tuple[str, str]]) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sql, args in statements:
                conn.execute(sql, args)
            for kind, scope in sorted(bumps):
                conn.execute(_BUMP, (kind, scope))
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    async def put(self, items: Sequence[MemoryItem]) -> None:
        """Insert or replace ``items``."""
        statements = [
            (
                "INSERT OR REPLACE INTO memory_items (kind, id, scope, created_at, used_at, body) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (item.kind, item.id, item.scope, item.created_at, item.used_at, item.dumps()),
            )
            for item in items
        ]
        await self._run("write", self._write, statements, {(item.kind, item.scope) for item in items})

    async def get(self, kind: MemoryKind, item_id: str) -> MemoryItem | None:
        """One record, or None."""

        def read() -> MemoryItem | None:
            row = self._conn.execute(
                "SELECT body, used_at FROM memory_items WHERE kind = ? AND id = ?", (kind, item_id)
            ).fetchone()
            return _item(row) if row is not None else None

        return await self._run("read", read)

    async def items(self, kind: MemoryKind, scope: str | None = None) -> list[MemoryItem]:
        """Records of ``kind`` (in ``scope``), newest first."""

        def read() -> list[MemoryItem]:
            if scope is None:
                rows = self._conn.execute(
                    "SELECT body, used_at FROM memory_items WHERE kind = ? ORDER BY created_at DESC, id", (kind,)
                ).fetchall()
            else:
                rows = self._conn.execute(
                    "SELECT body, used_at FROM memory_items WHERE kind = ? AND scope = ? ORDER BY created_at DESC, id",
                    (kind, scope),
                ).fetchall()
            return [_item(row) for row in rows]

        return await self._run("read", read)

    async def delete(self, kind: MemoryKind, ids: Sequence[str]) -> int:
        """Delete by id."""

        def remove() -> int:
            marks = ",".join("?" * len(ids))
            scopes: set[tuple[str, str]] = {
                (str(kind), str(row[0]))
                for row in self._conn.execute(
                    f"SELECT scope FROM memory_items WHERE kind = ? AND id IN ({marks})",  # noqa: S608 - placeholders only
                    (kind, *ids),
                )
            }
            before = self._conn.total_changes
            self._write(
                [(f"DELETE FROM memory_items WHERE kind = ? AND id IN ({marks})", (kind, *ids))],  # noqa: S608
                scopes,
            )
            return self._conn.total_changes - before - len(scopes)

        if not ids:
            return 0
        return await self._run("delete", remove)

    async def touch(self, kind: MemoryKind, ids: Sequence[str], at: float) -> None:
        """Mark records used at ``at`` (no version bump: the searchable content did not change)."""

        def mark() -> None:
            marks = ",".join("?" * len(ids))
            self._conn.execute(
                f"UPDATE memory_items SET used_at = ? WHERE kind = ? AND id IN ({marks})",  # noqa: S608
                (at, kind, *ids),
            )

        if ids:
            await self._run("write", mark)

    async def version(self, kind: MemoryKind, scope: str) -> int:
        """The write counter of ``(kind, scope)``."""

        def read() -> int:
            row = self._conn.execute(
                "SELECT version FROM memory_versions WHERE kind = ? AND scope = ?", (kind, scope)
            ).fetchone()
            return int(row[0]) if row is not None else 0

        return await self._run("read", read)

    async def scopes(self, kind: MemoryKind) -> list[str]:
        """Scopes with records of ``kind``."""

        def read() -> list[str]:
            rows = self._conn.execute(
                "SELECT DISTINCT scope FROM memory_items WHERE kind = ? ORDER BY scope", (kind,)
            ).fetchall()
            return [str(row[0]) for row in rows]

        return await self._run("read", read)

    async def close(self) -> None:
        """Close the connection."""
        self._worker.shutdown(wait=False)
        with self._lock:
            self._conn.close()


def _item(row: tuple[str, float]) -> MemoryItem:  # (item JSON, used_at)
    item = MemoryItem.loads(str(row[0]))
    used = float(row[1])
    return item if used == item.used_at else item.with_changes(used_at=used)
