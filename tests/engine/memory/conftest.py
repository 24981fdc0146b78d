"""Memory fixtures: a store URL parametrized over both backends (a SQLite file, the real Redis)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from codeact.engine.memory import MemoryBackend, memory_backend, retrieval
from codeact.engine.store import Store, open_store


def _drop_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}:*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """``sqlite:///...`` in the test's tmp dir, or the real Redis under a prefix of the test's own."""
    retrieval.clear_cache()
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'sessions.db'}"
        return
    redis_url: str = request.getfixturevalue("redis_url")
    prefix = f"codeact-memtest-{uuid.uuid4().hex[:10]}"
    yield f"{redis_url}?prefix={prefix}"
    _drop_prefix(redis_url, prefix)


@pytest.fixture
async def session_store(store_url: str) -> AsyncIterator[Store]:
    store = open_store(store_url)
    yield store
    await store.close()


@pytest.fixture
async def backend(session_store: Store) -> AsyncIterator[MemoryBackend]:
    found = memory_backend(session_store)
    yield found
    await found.close()
