"""Where memories are kept: one :class:`MemoryBackend` interface (``_sqlite.py``, ``_redis.py`` implement it).

The memory of a store lives beside its sessions: in the same SQLite file (its own tables,
``memory_items`` and ``memory_versions``, on its own connection) or under the same Redis prefix
(``{prefix}:memory:...``). Every write of a ``(kind, scope)`` bumps its version, so a process can
keep a retrieval index in memory and rebuild it only when the store changed. The opener that picks
the backend for a store is :func:`codeact.engine.memory.memory_backend` (``_factory.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from codeact.engine.memory.records import MemoryItem, MemoryKind

__all__ = ["MemoryBackend"]


class MemoryBackend(ABC):
    """Memory records of one store (the same behaviour on every backend)."""

    key: str
    """Identifies the backing store (its URL and prefix) for caches."""

    @abstractmethod
    async def put(self, items: Sequence[MemoryItem]) -> None:
        """Insert or replace ``items`` (by kind and id)."""

    @abstractmethod
    async def get(self, kind: MemoryKind, item_id: str) -> MemoryItem | None:
        """One record, or None."""

    @abstractmethod
    async def items(self, kind: MemoryKind, scope: str | None = None) -> list[MemoryItem]:
        """Every record of ``kind`` (in ``scope`` when given), newest first."""

    @abstractmethod
    async def delete(self, kind: MemoryKind, ids: Sequence[str]) -> int:
        """Delete records by id; returns how many existed."""

    @abstractmethod
    async def touch(self, kind: MemoryKind, ids: Sequence[str], at: float) -> None:
        """Set ``used_at`` of records (retrieval marks what it used, for the ``lru`` policy)."""

    @abstractmethod
    async def version(self, kind: MemoryKind, scope: str) -> int:
        """A counter bumped by every write or delete in ``(kind, scope)``."""

    @abstractmethod
    async def scopes(self, kind: MemoryKind) -> list[str]:
        """The scopes holding records of ``kind``, sorted."""

    async def close(self) -> None:  # noqa: B027 - optional for backends that own nothing
        """Release what the backend opened itself (never the session store's connection)."""
