"""The opener of memory backends: picks SQLite or Redis beside a session store.

Sits above ``backend.py`` (the interface) and its implementations (``_sqlite.py``, ``_redis.py``), so
the interface never imports them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from codeact.engine.memory.backend import MemoryBackend

if TYPE_CHECKING:
    from codeact.engine.store import Store

__all__ = ["memory_backend"]


def memory_backend(store: Store) -> MemoryBackend:
    """The memory backend beside ``store`` (SQLite file or Redis server).

    Raises:
        AgentMemoryError: The store is neither SQLite nor Redis.
    """
    from codeact.engine.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from codeact.engine.memory._sqlite import SQLiteMemory

        return SQLiteMemory(store.path)
    if type(store).__name__ == "RedisStore" and hasattr(store, "_client"):
        from codeact.engine.memory._redis import RedisMemory

        client = getattr(store, "_client")  # noqa: B009 - the store's connection, shared (never closed here)
        return RedisMemory(client, prefix=str(getattr(store, "prefix", "codeact")), url=str(getattr(store, "url", "")))
    from codeact.engine.memory.records import AgentMemoryError

    raise AgentMemoryError(
        f"memory needs a SQLite or Redis store, got {type(store).__name__}: use sqlite:///PATH or redis://HOST:PORT/DB",
        code="memory.store",
    )
