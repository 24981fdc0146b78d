"""Store fixtures: one ``store`` fixture parametrized over both backends (SQLite file, real Redis)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codeact.engine.store import SQLiteStore, Store


async def _drop_prefix(url: str, prefix: str) -> None:
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


@pytest.fixture
def redis_prefix() -> str:
    """A key prefix no other test uses."""
    return f"codeact-test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def redis_store(redis_url: str, redis_prefix: str) -> AsyncIterator[Store]:
    from codeact.engine.store.redis_store import RedisStore

    store = RedisStore(redis_url, prefix=redis_prefix)
    yield store
    await store.close()
    await _drop_prefix(redis_url, redis_prefix)


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = SQLiteStore(tmp_path / "sessions.db")
    yield store
    await store.close()


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store(request: pytest.FixtureRequest) -> Store:
    """The store under test: every contract test runs on both backends."""
    fixture: Store = request.getfixturevalue(f"{request.param}_store")
    return fixture
