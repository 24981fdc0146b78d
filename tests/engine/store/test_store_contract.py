"""The Store contract: every test runs on SQLite and on the real Redis (the ``store`` fixture)."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

import pytest

from codeact.engine.errors import StoreError
from codeact.engine.store import RoundRecord, SessionBusyError, Store

from ._helpers import append, make_meta, make_round, make_segments


async def test_create_and_get_session_round_trips_every_field(store: Store) -> None:
    meta = make_meta(title="Deployments", extra={"run_ids": ["r1"], "note": "é"})
    await store.create_session(meta)
    assert await store.get_session("s1") == meta
    assert await store.get_session("missing") is None


async def test_optional_fields_may_be_none(store: Store) -> None:
    meta = make_meta(input=None, title=None)
    await store.create_session(meta)
    assert await store.get_session("s1") == meta


async def test_creating_an_existing_session_fails(store: Store) -> None:
    await store.create_session(make_meta())
    with pytest.raises(StoreError) as info:
        await store.create_session(make_meta(model="other"))
    assert info.value.message == f"session 's1' already exists in {store.url}; resume it or choose another id"
    assert info.value.code == "store.exists"
    assert (await store.get_session("s1")) == make_meta()


async def test_list_sessions_newest_first_with_limit(store: Store) -> None:
    for n in range(3):
        await store.create_session(make_meta(f"s{n}", created_at=1_700_000_000.0 + n))
    assert [m.session_id for m in await store.list_sessions()] == ["s2", "s1", "s0"]
    assert [m.session_id for m in await store.list_sessions(limit=2)] == ["s2", "s1"]
    await append(store, 1, "s0")  # a write makes s0 the most recently updated
    assert [m.session_id for m in await store.list_sessions()] == ["s0", "s2", "s1"]


async def test_update_session_changes_fields_and_updated_at(store: Store) -> None:
    await store.create_session(make_meta(title="old"))
    before = time.time()
    new = await store.update_session("s1", status="completed", title=None, extra={"answer": 42})
    assert (new.status, new.title, new.extra) == ("completed", None, {"answer": 42})
    assert new.updated_at >= before
    assert await store.get_session("s1") == new


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        pytest.param(
            {"rounds": 3},
            "cannot update session field(s) ['rounds'] of session 's1'; updatable fields: "
            "['blueprint_hash', 'blueprint_id', 'extra', 'input', 'model', 'status', 'title']",
            id="store-maintained-field",
        ),
        pytest.param(
            {"status": "done"},
            "invalid status 'done' for session 's1'; "
            "use one of ['active', 'completed', 'failed', 'paused', 'interrupted']",
            id="bad-status",
        ),
    ],
)
async def test_update_session_rejects_bad_fields(store: Store, fields: dict[str, Any], message: str) -> None:
    await store.create_session(make_meta())
    with pytest.raises(StoreError) as info:
        await store.update_session("s1", **fields)
    assert info.value.message == message
    assert await store.get_session("s1") == make_meta()


async def test_update_unknown_session_names_the_store(store: Store) -> None:
    with pytest.raises(StoreError) as info:
        await store.update_session("ghost", status="failed")
    assert info.value.message == f"session 'ghost' not found in {store.url}"
    assert info.value.code == "store.not_found"


async def test_append_round_then_read_everything_back(store: Store) -> None:
    await store.create_session(make_meta())
    first = await append(store, 1)
    second = await append(store, 2, stderr="warn\n", error={"type": "KeyError", "message": "'x'", "line": 2})
    assert await store.rounds("s1") == [first, second]
    assert await store.round("s1", 2) == second
    assert await store.round("s1", 3) is None
    assert await store.round("s1", 0) is None
    assert await store.segments("s1") == make_segments(1) + make_segments(2)
    assert await store.variables("s1") == {"x1": 1, "x2": 2}
    meta = await store.get_session("s1")
    assert meta is not None and meta.rounds == 2 and meta.updated_at > meta.created_at


async def test_variables_are_replaced_by_each_round(store: Store) -> None:
    await store.create_session(make_meta())
    await store.append_round(make_round(1), segments=[], variables={"a": 1, "b": {"__codeact__": "set", "v": [1]}})
    await store.append_round(make_round(2), segments=[], variables={"b": [2], "c": None})
    assert await store.variables("s1") == {"b": [2], "c": None}
    await store.append_round(make_round(3), segments=[], variables={})
    assert await store.variables("s1") == {}


async def test_reading_an_unknown_session_is_empty(store: Store) -> None:
    assert await store.rounds("nope") == []
    assert await store.segments("nope") == []
    assert await store.variables("nope") == {}


@pytest.mark.parametrize("index", [pytest.param(1, id="repeat-last"), pytest.param(3, id="skip-one")])
async def test_append_round_requires_the_next_index(store: Store, index: int) -> None:
    await store.create_session(make_meta())
    first = await append(store, 1)
    with pytest.raises(StoreError) as info:
        await append(store, index, code="other")
    assert info.value.message == (
        f"cannot append round {index} to session 's1' in {store.url}: the last recorded round is 1, "
        "expected round 2; another run is writing this session (use store.lock())"
    )
    assert info.value.code == "store.conflict"
    assert await store.rounds("s1") == [first]


async def test_re_appending_the_identical_round_is_a_no_op(store: Store) -> None:
    await store.create_session(make_meta())
    first = await append(store, 1)
    second = await append(store, 2)
    await store.append_round(first, segments=make_segments(1), variables=first.variables)  # a retried write
    assert await store.rounds("s1") == [first, second]
    assert await store.segments("s1") == make_segments(1) + make_segments(2)
    assert await store.variables("s1") == second.variables


async def test_append_round_to_unknown_session_fails(store: Store) -> None:
    with pytest.raises(StoreError) as info:
        await append(store, 1, "ghost")
    assert info.value.message == f"session 'ghost' not found in {store.url}"
    assert await store.rounds("ghost") == []


async def test_concurrent_writers_of_one_round_exactly_one_wins(store: Store) -> None:
    await store.create_session(make_meta())
    results = await asyncio.gather(*(append(store, 1, code=f"x = {n}") for n in range(5)), return_exceptions=True)
    winners = [r for r in results if isinstance(r, RoundRecord)]
    assert len(winners) == 1
    assert all(isinstance(r, StoreError) and r.code == "store.conflict" for r in results if r not in winners)
    assert await store.rounds("s1") == winners


class _Unserializable:
    def __repr__(self) -> str:
        return "<Unserializable>"


@pytest.mark.parametrize(
    ("part", "message"),
    [
        pytest.param(
            {"record": {"calls": ({"toolkit": "t", "result": _Unserializable()},)}},
            "cannot store round 2 of session 's1': it is not JSON-serializable (Object of type _Unserializable is "
            "not JSON serializable); encode values with the sandbox codec first",
            id="round-record",
        ),
        pytest.param(
            {"segments": [{"id": "ok", "text": "fine"}, {"id": "bad", "payload": _Unserializable()}]},
            "cannot store segment 'bad' of session 's1': it is not JSON-serializable (Object of type "
            "_Unserializable is not JSON serializable); encode values with the sandbox codec first",
            id="segment",
        ),
        pytest.param(
            {"segments": [{"id": "ok"}, {"kind": "code"}]},
            "cannot store segment 2 of round 2 of session 's1': it has no string 'id'",
            id="segment-without-id",
        ),
        pytest.param(
            {"variables": {"good": 1, "df": _Unserializable()}},
            "cannot store variable 'df' of session 's1': it is not JSON-serializable (Object of type "
            "_Unserializable is not JSON serializable); encode values with the sandbox codec first",
            id="variable",
        ),
    ],
)
async def test_a_round_that_fails_midway_leaves_the_previous_round_intact(
    store: Store, part: dict[str, Any], message: str
) -> None:
    await store.create_session(make_meta())
    first = await append(store, 1)
    before = (await store.get_session("s1"), await store.segments("s1"), await store.variables("s1"))

    record = make_round(2, **part.get("record", {}))
    with pytest.raises(StoreError) as info:
        await store.append_round(
            record,
            segments=part.get("segments", make_segments(2)),
            variables=part.get("variables", {"x1": 1, "x2": 2}),
        )
    assert info.value.message == message
    assert await store.rounds("s1") == [first]
    assert (await store.get_session("s1"), await store.segments("s1"), await store.variables("s1")) == before

    # Nothing half-written blocks the retry of the same round.
    second = await append(store, 2)
    assert await store.rounds("s1") == [first, second]


async def test_delete_session_removes_everything(store: Store) -> None:
    await store.create_session(make_meta())
    await store.create_session(make_meta("keep"))
    await append(store, 1)
    await store.delete_session("s1")
    await store.delete_session("s1")  # idempotent
    assert await store.get_session("s1") is None
    assert (await store.rounds("s1"), await store.segments("s1"), await store.variables("s1")) == ([], [], {})
    assert [m.session_id for m in await store.list_sessions()] == ["keep"]
    await store.create_session(make_meta())  # the id is free again
    await append(store, 1)


@pytest.mark.parametrize(
    "session_id",
    [pytest.param("a:b", id="colon"), pytest.param("", id="empty"), pytest.param("x" * 129, id="too-long")],
)
async def test_invalid_session_ids_are_refused(store: Store, session_id: str) -> None:
    with pytest.raises(StoreError) as info:
        await store.get_session(session_id)
    assert info.value.message == (
        f"invalid session id {session_id!r}: use 1-128 letters, digits, '_', '-' or '.', "
        "starting with a letter or digit"
    )


async def test_second_run_on_a_locked_session_fails_clearly(store: Store) -> None:
    async with store.lock("s1") as held:
        assert held.held
        with pytest.raises(SessionBusyError) as info:
            async with store.lock("s1"):
                raise AssertionError("must not enter")
        until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(info.value.held_until))
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(held.token.split("|")[3])))
        owner = f"{socket.gethostname()}:{os.getpid()}"
        assert info.value.message == (
            f"session 's1' is in use by another run (lock held until {until} by {owner} since {since}; its "
            "heartbeat renews it while that run lives); wait or use another --session, or if that run is gone, "
            "force it with `codeact sessions unlock s1`"
        )
        assert info.value.held_until > time.time() + 5  # the default ttl is 10 s, renewed every 3 s
        async with store.lock("other"):  # other sessions are not affected
            pass
    async with store.lock("s1"):  # released on exit
        pass


async def test_second_run_waits_for_the_lock(store: Store) -> None:
    order: list[str] = []

    async def first() -> None:
        async with store.lock("s1"):
            order.append("first in")
            await asyncio.sleep(0.2)
            order.append("first out")

    async def second() -> None:
        await asyncio.sleep(0.05)
        async with store.lock("s1", wait=30):
            order.append("second in")

    await asyncio.gather(first(), second())
    assert order == ["first in", "first out", "second in"]


async def test_a_crashed_holders_lock_expires(store: Store) -> None:
    # A holder that died without releasing: the raw primitive, no refresher.
    assert await store._acquire_lock("s1", "crashed-run", 0.3) is None
    with pytest.raises(SessionBusyError):
        async with store.lock("s1"):
            pass
    async with store.lock("s1", wait=30) as lock:
        assert lock.held


async def test_a_long_run_keeps_its_lock_by_refreshing(store: Store) -> None:
    async with store.lock("s1", ttl=0.3):
        await asyncio.sleep(0.8)  # > 2 x ttl: only the background refresh keeps the lock alive
        with pytest.raises(SessionBusyError):
            async with store.lock("s1"):
                pass


async def test_refresh_reports_a_lost_lock(store: Store) -> None:
    async with store.lock("s1", ttl=60) as lock:
        await store._release_lock("s1", lock.token)  # expired and ...
        assert await store._acquire_lock("s1", "thief", 60) is None  # ... taken by another run
        with pytest.raises(SessionBusyError) as info:
            await lock.refresh()
        assert info.value.message == (
            "lost the lock on session 's1': it expired (no heartbeat for 60 s) or was forced with "
            "`codeact sessions unlock`; this run can no longer record rounds"
        )
    assert await store._acquire_lock("s1", "third", 60) is not None  # exit did not drop the thief's lock


async def test_store_is_an_async_context_manager(store: Store) -> None:
    async with store as opened:
        await opened.create_session(make_meta())
    # closed now: the fixture's second close() must be harmless
    await store.close()
