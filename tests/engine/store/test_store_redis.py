"""Redis-only behaviour: the documented key layout, TTL, credentials never shown, Redis going away."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeact.engine.errors import StoreError
from codeact.engine.store.redis_store import RedisStore, redact_url
from tests.redis_server import PrivateRedis, free_port, running

from ._helpers import append, make_meta, make_round, make_segments


async def test_keys_follow_the_documented_layout(redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio

    store = RedisStore(redis_url, prefix=redis_prefix)
    raw = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        await store.create_session(make_meta())
        await append(store, 1)
        async with store.lock("s1"):
            types = {key: await raw.type(key) async for key in raw.scan_iter(match=f"{redis_prefix}:*")}
        base = f"{redis_prefix}:session:s1"
        assert types == {
            f"{redis_prefix}:sessions": "zset",
            base: "hash",
            f"{base}:rounds": "list",
            f"{base}:segments": "list",
            f"{base}:vars": "hash",
            f"{base}:lock": "string",
        }
        assert await raw.hget(base, "status") == "active"
        assert await raw.hget(base, "rounds") == "1"
        assert await raw.hget(f"{base}:vars", "x1") == "1"
        assert await raw.ttl(base) == -1  # no TTL unless asked for
    finally:
        await raw.aclose()
        await store.close()


async def test_ttl_expires_idle_sessions(redis_url: str, redis_prefix: str) -> None:
    import redis.asyncio

    store = RedisStore(f"{redis_url}?prefix={redis_prefix}&ttl=0.5")
    raw = redis.asyncio.Redis.from_url(redis_url, decode_responses=True)
    try:
        assert (store.prefix, store.ttl) == (redis_prefix, 0.5)
        await store.create_session(make_meta())
        await append(store, 1)
        for part in ("", ":rounds", ":segments", ":vars"):
            assert 0 < await raw.pttl(f"{redis_prefix}:session:s1{part}") <= 500
        await asyncio.sleep(0.7)
        assert await store.get_session("s1") is None
        assert await store.list_sessions() == []
        assert await raw.zcard(f"{redis_prefix}:sessions") == 0  # the stale index entry was dropped
    finally:
        await raw.aclose()
        await store.close()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        pytest.param("redis://ana:s3cret@127.0.0.1:6380/2", "redis://127.0.0.1:6380/2", id="userinfo"),
        pytest.param(
            "redis://127.0.0.1:6380/0?password=s3cret&prefix=p", "redis://127.0.0.1:6380/0?prefix=p", id="query"
        ),
        pytest.param("rediss://:s3cret@[::1]:6380/0", "rediss://[::1]:6380/0", id="ipv6"),
    ],
)
def test_urls_are_shown_without_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize("ttl", [pytest.param("0", id="zero"), pytest.param("soon", id="not-a-number")])
def test_invalid_ttl_is_refused(ttl: str) -> None:
    with pytest.raises(StoreError) as info:
        RedisStore(f"redis://127.0.0.1:1/0?ttl={ttl}")
    assert info.value.message == (
        f"invalid ttl {ttl!r} for redis://127.0.0.1:1/0?ttl={ttl}: use a positive number of seconds"
    )


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    yield from running(PrivateRedis(tmp_path, password="hunter2"))


async def test_redis_going_away_mid_run_raises_store_error_and_keeps_recorded_rounds(own_redis: PrivateRedis) -> None:
    store = RedisStore(own_redis.url, socket_timeout=2.0, retries=1)
    shown = f"redis://127.0.0.1:{own_redis.port}/0"
    try:
        assert store.url == shown
        await store.create_session(make_meta())
        first = await append(store, 1)

        own_redis.kill()
        with pytest.raises(StoreError) as info:
            await append(store, 2)
        assert info.value.code == "store.unavailable"
        assert info.value.message.startswith(f"Redis at {shown} is unreachable: ")
        assert info.value.message.endswith(
            "; check that the server is running and that CODEACT_STORE / --store points to it"
        )
        assert "hunter2" not in info.value.message

        own_redis.start()  # same port, same append-only file
        assert await store.rounds("s1") == [first]
        assert await store.variables("s1") == first.variables
        second = await append(store, 2)  # the run can go on where it stopped
        assert await store.rounds("s1") == [first, second]
    finally:
        await store.close()


async def test_a_frozen_redis_times_out_and_the_data_is_intact_afterwards(own_redis: PrivateRedis) -> None:
    store = RedisStore(own_redis.url, socket_timeout=0.3, retries=0)
    try:
        await store.create_session(make_meta())
        first = await append(store, 1)
        own_redis.signal(signal.SIGSTOP)
        try:
            with pytest.raises(StoreError) as info:
                await store.append_round(make_round(2), segments=make_segments(2), variables={"x2": 2})
            assert info.value.message.startswith(f"Redis at redis://127.0.0.1:{own_redis.port}/0 is unreachable: ")
        finally:
            own_redis.signal(signal.SIGCONT)
        # The script may or may not have run once the server woke up: either way a round is whole.
        rounds = await store.rounds("s1")
        assert rounds in ([first], [first, make_round(2)])
        meta = await store.get_session("s1")
        assert meta is not None and meta.rounds == len(rounds)
        assert await store.variables("s1") == ({"x2": 2} if len(rounds) == 2 else first.variables)
    finally:
        await store.close()


async def test_wrong_password_is_a_store_error_without_the_password(own_redis: PrivateRedis) -> None:
    store = RedisStore(f"redis://:wrong-pass@127.0.0.1:{own_redis.port}/0", retries=0)
    try:
        with pytest.raises(StoreError) as info:
            await store.get_session("s1")
        assert info.value.code == "store.auth"
        assert info.value.message.startswith(f"Redis at redis://127.0.0.1:{own_redis.port}/0 refused the credentials")
        assert "wrong-pass" not in info.value.message
    finally:
        await store.close()


async def test_nothing_listening_is_a_store_error_naming_the_url() -> None:
    port = free_port()
    store = RedisStore(f"redis://127.0.0.1:{port}/0", retries=0)
    try:
        with pytest.raises(StoreError) as info:
            await store.list_sessions()
        assert info.value.message.startswith(f"Redis at redis://127.0.0.1:{port}/0 is unreachable: ")
    finally:
        await store.close()


async def test_a_full_pool_makes_commands_wait_their_turn(redis_url: str, redis_prefix: str) -> None:
    store = RedisStore(f"{redis_url}?prefix={redis_prefix}&max_connections=2&pool_timeout=2")
    try:
        assert (store.pool_size, store.pool_timeout) == (2, 2.0)
        await store.create_session(make_meta())
        # 60 reads at once on 2 connections: each waits while the others free them, none fails.
        found = await asyncio.gather(*(store.get_session("s1") for _ in range(60)))
        assert {meta.session_id for meta in found if meta is not None} == {"s1"}
        assert len(found) == 60
    finally:
        await store.close()


async def test_a_pool_whose_connections_stay_in_use_says_busy_not_unreachable(
    redis_url: str, redis_prefix: str
) -> None:
    store = RedisStore(f"{redis_url}?prefix={redis_prefix}&max_connections=2&pool_timeout=0.5")
    shown = store.url  # redact_url's quoting of the query
    assert shown.endswith("&max_connections=2&pool_timeout=0.5")
    try:
        # Two blocking reads hold both connections for 1.5 s; a command meanwhile frees nothing for 0.5 s.
        nothing = f"{redis_prefix}:nothing"
        holders = [asyncio.ensure_future(store._client.blpop([nothing], timeout=1.5)) for _ in (1, 2)]
        await asyncio.sleep(0.1)
        with pytest.raises(StoreError) as info:
            await store.get_session("s1")
        assert info.value.code == "store.busy"
        assert info.value.message == (
            f"Redis at {shown} is busy: no connection of the pool of 2 was freed for 0.5 s (every connection "
            "was in use by other commands); raise the pool with ?max_connections=N (now 2) or the wait with "
            "?pool_timeout=SECONDS in CODEACT_STORE / --store, or run fewer runs at once"
        )
        await asyncio.gather(*holders)
        assert await store.get_session("s1") is None  # freed again: commands run
    finally:
        await store.close()


def test_the_pool_is_sized_from_the_hosts_concurrency(redis_url: str) -> None:
    from codeact.engine.store import open_store
    from codeact.engine.store.redis_store import DEFAULT_POOL_SIZE

    assert open_store(redis_url).pool_size == DEFAULT_POOL_SIZE  # type: ignore[attr-defined]
    assert open_store(redis_url, concurrency=128).pool_size == 32  # type: ignore[attr-defined]
    assert open_store(redis_url, concurrency=2).pool_size == 16
    assert open_store(redis_url, concurrency=1000).pool_size == 64  # type: ignore[attr-defined]
    assert open_store(f"{redis_url}?max_connections=5", concurrency=256).pool_size == 5  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=r"invalid max_connections '0' for .*: use a positive whole number"):
        open_store(f"{redis_url}?max_connections=0")
