"""Key-values (``KeyValues``): every contract test runs on SQLite and on the real Redis (the ``store`` fixture).

What ``codeact serve`` keeps its run-scoped state and storage in: bytes by namespace and key, isolated per
namespace, listed in order by prefix with ``has_more``, bounded in size, kept across a reopen.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from codeact.engine.errors import StoreError
from codeact.engine.store import KeyPage, SQLiteStore, Store
from codeact.engine.store._kv import MAX_VALUE_BYTES
from codeact.engine.store._sqlite_rows import _SCHEMA

from ._helpers import append, make_meta

CONV_A = "state.conversation.aaaa"
CONV_B = "state.conversation.bbbb"


async def test_a_value_is_kept_as_bytes_and_replaced_whole(store: Store) -> None:
    assert await store.kv_get(CONV_A, "topic") is None
    await store.kv_set(CONV_A, "topic", b'"refunds"')
    await store.kv_set(CONV_A, "blob", b"\x00\xff\xfe binary")
    assert await store.kv_get(CONV_A, "topic") == b'"refunds"'
    assert await store.kv_get(CONV_A, "blob") == b"\x00\xff\xfe binary"
    await store.kv_set(CONV_A, "topic", b"")
    assert await store.kv_get(CONV_A, "topic") == b""  # an empty value is a value, not "unset"


async def test_one_namespace_cannot_read_or_change_another(store: Store) -> None:
    await store.kv_set(CONV_A, "step", b"1")
    await store.kv_set(CONV_B, "step", b"2")
    await store.kv_set(CONV_B, "only-b", b"x")
    assert await store.kv_get(CONV_A, "step") == b"1"
    assert await store.kv_get(CONV_A, "only-b") is None
    assert (await store.kv_list(CONV_A)).keys == ("step",)
    assert await store.kv_delete(CONV_A, "only-b") is False
    assert await store.kv_delete(CONV_A, "step") is True
    assert await store.kv_get(CONV_A, "step") is None
    assert await store.kv_get(CONV_B, "step") == b"2"
    assert (await store.kv_list(CONV_B)).keys == ("only-b", "step")


async def test_delete_says_whether_the_key_was_set_and_drops_it_from_the_listing(store: Store) -> None:
    await store.kv_set(CONV_A, "a", b"1")
    await store.kv_set(CONV_A, "b", b"2")
    assert await store.kv_delete(CONV_A, "a") is True
    assert await store.kv_delete(CONV_A, "a") is False
    assert await store.kv_delete(CONV_A, "never") is False
    assert await store.kv_list(CONV_A) == KeyPage(keys=("b",), has_more=False)


async def test_listing_is_ordered_by_prefix_with_has_more(store: Store) -> None:
    for key in ("notes/b", "notes/a", "notes/c", "notes", "notez", "other", "n", "é", "z"):
        await store.kv_set(CONV_A, key, b"v")
    everything = ("n", "notes", "notes/a", "notes/b", "notes/c", "notez", "other", "z", "é")
    assert await store.kv_list(CONV_A) == KeyPage(keys=everything, has_more=False)  # code point order
    assert await store.kv_list(CONV_A, prefix="notes/") == KeyPage(keys=("notes/a", "notes/b", "notes/c"))
    assert await store.kv_list(CONV_A, prefix="notes/", limit=2) == KeyPage(keys=("notes/a", "notes/b"), has_more=True)
    # exactly ``limit`` keys match: no more, although keys without the prefix follow
    assert await store.kv_list(CONV_A, prefix="notes/", limit=3) == KeyPage(keys=("notes/a", "notes/b", "notes/c"))
    assert await store.kv_list(CONV_A, prefix="note", limit=4) == KeyPage(
        keys=("notes", "notes/a", "notes/b", "notes/c"), has_more=True
    )
    assert await store.kv_list(CONV_A, limit=1) == KeyPage(keys=("n",), has_more=True)
    assert await store.kv_list(CONV_A, prefix="nothing") == KeyPage(keys=())
    assert await store.kv_list("state.conversation.empty") == KeyPage(keys=())


async def test_a_value_over_the_size_limit_is_refused_and_nothing_is_written(store: Store) -> None:
    await store.kv_set(CONV_A, "big", b"old")
    with pytest.raises(StoreError) as info:
        await store.kv_set(CONV_A, "big", b"x" * (MAX_VALUE_BYTES + 1))
    assert info.value.code == "store.too_large"
    assert info.value.message == (
        f"the value of 'big' in {CONV_A!r} is {MAX_VALUE_BYTES + 1} bytes; a store keeps at most {MAX_VALUE_BYTES}"
    )
    assert await store.kv_get(CONV_A, "big") == b"old"
    await store.kv_set(CONV_A, "big", b"y" * (64 * 1024))
    assert await store.kv_get(CONV_A, "big") == b"y" * (64 * 1024)


@pytest.mark.parametrize(
    ("namespace", "key", "message"),
    [
        pytest.param(
            CONV_A, "", "a key must be a non-empty string of at most 256 characters, got 0 characters", id="empty"
        ),
        pytest.param(
            CONV_A,
            "k" * 257,
            "a key must be a non-empty string of at most 256 characters, got 257 characters",
            id="long",
        ),
        pytest.param(
            CONV_A,
            "bad\ud800",
            "key 'bad\\ud800' holds a lone surrogate, which UTF-8 cannot carry; send the key as valid Unicode",
            id="surrogate",
        ),
        pytest.param(
            "state conversation",
            "k",
            "invalid key-value namespace 'state conversation': use 1-200 letters, digits, '.', '_', ':', '/' or '-', "
            "starting with a letter or digit",
            id="namespace",
        ),
    ],
)
async def test_bad_keys_and_namespaces_are_refused(store: Store, namespace: str, key: str, message: str) -> None:
    for attempt in (store.kv_set(namespace, key, b"v"), store.kv_get(namespace, key), store.kv_delete(namespace, key)):
        with pytest.raises(StoreError) as info:
            await attempt
        assert (info.value.code, info.value.message) == ("store.invalid_key", message)
    with pytest.raises(StoreError) as listing:
        await store.kv_list(CONV_A, limit=0)
    assert listing.value.message == "a key listing's limit must be None or at least 1, got 0"


async def test_key_values_belong_to_no_session_and_survive_a_reopen(
    store: Store, request: pytest.FixtureRequest
) -> None:
    await store.create_session(make_meta())
    await append(store, 1)
    await store.kv_set(CONV_A, "topic", b'"refunds"')
    await store.delete_session("s1")  # a session's deletion leaves the key-values
    assert await store.kv_get(CONV_A, "topic") == b'"refunds"'
    reopened = _reopen(store, request)
    try:
        assert await reopened.kv_get(CONV_A, "topic") == b'"refunds"'
        assert (await reopened.kv_list(CONV_A)).keys == ("topic",)
    finally:
        await reopened.close()


def _reopen(store: Store, request: pytest.FixtureRequest) -> Store:
    """A second store object on the same data (a restarted process)."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    from codeact.engine.store.redis_store import RedisStore

    assert isinstance(store, RedisStore)
    return RedisStore(request.getfixturevalue("redis_url"), prefix=store.prefix)


async def test_an_sqlite_file_of_schema_1_gains_the_key_values_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old_schema = _SCHEMA.split("CREATE TABLE IF NOT EXISTS kv")[0] + "PRAGMA user_version = 1;"
    with sqlite3.connect(path) as conn:
        conn.executescript(old_schema)
    store = SQLiteStore(path)
    try:
        await store.kv_set(CONV_A, "topic", b"1")
        assert await store.kv_get(CONV_A, "topic") == b"1"
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)


async def test_redis_keeps_a_namespace_in_a_hash_and_a_sorted_set_under_the_stores_ttl(
    redis_url: str, redis_prefix: str
) -> None:
    import redis.asyncio

    from codeact.engine.store.redis_store import RedisStore

    store = RedisStore(f"{redis_url}?prefix={redis_prefix}&ttl=30")
    raw = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        await store.kv_set(CONV_A, "blob", b"\x00\xff")
        values, keys = f"{redis_prefix}:kv:values:{CONV_A}", f"{redis_prefix}:kv:keys:{CONV_A}"
        assert (await raw.type(values), await raw.type(keys)) == ("hash", "zset")
        assert await raw.hget(values, "blob") == "AP8="  # base64: the store's client decodes replies as text
        assert await raw.zrange(keys, 0, -1) == ["blob"]
        assert 0 < await raw.pttl(values) <= 30_000 and 0 < await raw.pttl(keys) <= 30_000
        await raw.hset(values, "broken", "not base64!")
        with pytest.raises(StoreError) as info:
            await store.kv_get(CONV_A, "broken")
        assert info.value.code == "store.corrupt"
    finally:
        await raw.delete(values, keys)
        await raw.aclose()
        await store.close()
