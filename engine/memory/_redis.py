"""Memory under the Redis store's prefix: ``{prefix}:memory:{kind}:...`` (the same behaviour as SQLite).

Keys per kind: ``:scope:{scope}`` (hash id -> record JSON), ``:order:{scope}`` (zset id -> created_at),
``:used`` (hash id -> used_at), ``:where`` (hash id -> scope), ``:version:{scope}`` (counter) and
``:scopes`` (set). Every write is one MULTI/EXEC transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

from codeact.engine.memory.backend import MemoryBackend
from codeact.engine.memory.records import AgentMemoryError, MemoryItem, MemoryKind

__all__ = ["RedisMemory"]

_T = TypeVar("_T")


class RedisMemory(MemoryBackend):
    """Memory records on the Redis server of a ``RedisStore`` (its client, never closed here).

    Args:
        client: The store's ``redis.asyncio.Redis`` client (``decode_responses=True``).
        prefix: The store's key prefix.
        url: The store's (redacted) URL, for messages and cache keys.
    """

    def __init__(self, client: Any, *, prefix: str, url: str) -> None:
        self._client = client
        self.prefix = prefix
        self.url = url
        self.key = f"redis:{url}:{prefix}"

    def _k(self, kind: str, part: str) -> str:
        return f"{self.prefix}:memory:{kind}:{part}"

    async def _call(self, action: str, coro: Awaitable[_T]) -> _T:
        import redis

        try:
            return await coro
        except redis.exceptions.RedisError as exc:
            raise AgentMemoryError(f"memory store {self.url} failed to {action}: {exc}", code="memory.store") from exc

    async def put(self, items: Sequence[MemoryItem]) -> None:
        """Insert or replace ``items``."""
        if not items:
            return
        pipe = self._client.pipeline(transaction=True)
        for item in items:
            kind = item.kind
            pipe.hset(self._k(kind, f"scope:{item.scope}"), item.id, item.dumps())
            pipe.zadd(self._k(kind, f"order:{item.scope}"), {item.id: item.created_at})
            pipe.hset(self._k(kind, "used"), item.id, repr(item.used_at))
            pipe.hset(self._k(kind, "where"), item.id, item.scope)
            pipe.sadd(self._k(kind, "scopes"), item.scope)
        for kind, scope in sorted({(item.kind, item.scope) for item in items}):
            pipe.incr(self._k(kind, f"version:{scope}"))
        await self._call("write", pipe.execute())

    async def get(self, kind: MemoryKind, item_id: str) -> MemoryItem | None:
        """One record, or None."""
        scope = await self._call("read", self._client.hget(self._k(kind, "where"), item_id))
        if scope is None:
            return None
        pipe = self._client.pipeline(transaction=False)
        pipe.hget(self._k(kind, f"scope:{scope}"), item_id)
        pipe.hget(self._k(kind, "used"), item_id)
        body, used = await self._call("read", pipe.execute())
        return _item(body, used) if body is not None else None

    async def items(self, kind: MemoryKind, scope: str | None = None) -> list[MemoryItem]:
        """Records of ``kind`` (in ``scope``), newest first."""
        scopes = [scope] if scope is not None else await self.scopes(kind)
        found: list[MemoryItem] = []
        for name in scopes:
            pipe = self._client.pipeline(transaction=False)
            pipe.hgetall(self._k(kind, f"scope:{name}"))
            pipe.hgetall(self._k(kind, "used"))
            bodies, used = await self._call("read", pipe.execute())
            found.extend(_item(body, used.get(item_id)) for item_id, body in bodies.items())
        found.sort(key=lambda item: (-item.created_at, item.id))
        return found

    async def delete(self, kind: MemoryKind, ids: Sequence[str]) -> int:
        """Delete by id."""
        if not ids:
            return 0
        scopes = await self._call("read", self._client.hmget(self._k(kind, "where"), list(ids)))
        pipe = self._client.pipeline(transaction=True)
        count = 0
        touched: set[str] = set()
        for item_id, scope in zip(ids, scopes, strict=True):
            if scope is None:
                continue
            count += 1
            touched.add(scope)
            pipe.hdel(self._k(kind, f"scope:{scope}"), item_id)
            pipe.zrem(self._k(kind, f"order:{scope}"), item_id)
            pipe.hdel(self._k(kind, "used"), item_id)
            pipe.hdel(self._k(kind, "where"), item_id)
        for scope in sorted(touched):
            pipe.incr(self._k(kind, f"version:{scope}"))
        if count:
            await self._call("delete", pipe.execute())
            for scope in sorted(touched):
                if not await self._call("read", self._client.exists(self._k(kind, f"scope:{scope}"))):
                    await self._call("delete", self._client.srem(self._k(kind, "scopes"), scope))
        return count

    async def touch(self, kind: MemoryKind, ids: Sequence[str], at: float) -> None:
        """Mark records used at ``at``."""
        if ids:
            await self._call("write", self._client.hset(self._k(kind, "used"), mapping=dict.fromkeys(ids, repr(at))))

    async def version(self, kind: MemoryKind, scope: str) -> int:
        """The write counter of ``(kind, scope)``."""
        value = await self._call("read", self._client.get(self._k(kind, f"version:{scope}")))
        return int(value) if value is not None else 0

    async def scopes(self, kind: MemoryKind) -> list[str]:
        """Scopes with records of ``kind``."""
        return sorted(await self._call("read", self._client.smembers(self._k(kind, "scopes"))))


def _item(body: str, used: str | None) -> MemoryItem:
    item = MemoryItem.loads(body)
    if used is None:
        return item
    at = float(used)
    return item if at == item.used_at else item.with_changes(used_at=at)
