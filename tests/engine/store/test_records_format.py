"""The stored round format: linear records, old (format 1) records still read, truncate, named corruption."""

from __future__ import annotations

import json
from typing import Any

import pytest

from codeact.engine.errors import StoreError
from codeact.engine.store import CorruptRecordError, RoundRecord, SessionBusyError, SQLiteStore, Store

from ._helpers import make_meta, make_round


def _loop_round(index: int, segment_ids: tuple[str, ...], variables: dict[str, Any]) -> RoundRecord:
    """A round as the agent loop writes it: its prompt is built from every segment so far."""
    return make_round(index, segment_ids=segment_ids, variables=variables)


async def _loop(store: Store, rounds: int, *, session_id: str = "s1") -> list[RoundRecord]:
    """``rounds`` rounds, each adding 3 segments and changing 2 of 20 variables (the loop's shape)."""
    await store.create_session(make_meta(session_id))
    ids: tuple[str, ...] = ()
    variables: dict[str, Any] = {f"v{n}": n for n in range(20)}
    out = []
    for index in range(1, rounds + 1):
        new = [{"id": f"s{index}-{k}", "kind": "code", "text": f"round {index}"} for k in range(3)]
        ids = (*ids, *(s["id"] for s in new))
        variables = {**variables, f"v{index % 20}": index, "last": f"round {index}"}
        record = make_round(index, session_id, segment_ids=ids, variables=variables)
        await store.append_round(record, segments=new, variables=variables)
        out.append(record)
    return out


async def _raw_sizes(store: Store, session_id: str) -> list[int]:
    if isinstance(store, SQLiteStore):
        rows = store._conn.execute("SELECT length(record) FROM rounds WHERE session_id = ? ORDER BY idx", (session_id,))
        return [int(n) for (n,) in rows.fetchall()]
    items = await store._client.lrange(store._key(session_id, "rounds"), 0, -1)  # type: ignore[attr-defined]
    return [len(item.encode()) for item in items]


async def test_a_rounds_record_does_not_grow_with_the_session(store: Store) -> None:
    written = await _loop(store, 300)
    sizes = await _raw_sizes(store, "s1")
    assert sizes[299] <= sizes[9] * 1.2, (sizes[9], sizes[299])
    assert await store.rounds("s1") == written
    assert await store.round("s1", 150) == written[149]
    assert await store.variables("s1") == written[-1].variables


async def _write_raw(store: Store, session_id: str, index: int, body: str, variables: dict[str, Any]) -> None:
    """Write a record body by hand, the way a store of an older codeact did (format 1)."""
    if isinstance(store, SQLiteStore):
        conn = store._conn
        conn.execute("INSERT INTO rounds (session_id, idx, record) VALUES (?, ?, ?)", (session_id, index, body))
        conn.execute("DELETE FROM variables WHERE session_id = ?", (session_id,))
        for name, value in variables.items():
            conn.execute("INSERT INTO variables VALUES (?, ?, ?)", (session_id, name, json.dumps(value)))
        conn.execute("UPDATE sessions SET rounds = ? WHERE session_id = ?", (index, session_id))
        return
    client = store._client  # type: ignore[attr-defined]
    key = store._key  # type: ignore[attr-defined]
    await client.rpush(key(session_id, "rounds"), body)
    await client.delete(key(session_id, "vars"))
    if variables:
        await client.hset(key(session_id, "vars"), mapping={k: json.dumps(v) for k, v in variables.items()})
    await client.hset(key(session_id), "rounds", str(index))


async def test_old_shape_records_are_read_and_new_rounds_build_on_them(store: Store) -> None:
    await store.create_session(make_meta())
    old = [make_round(1), make_round(2, segment_ids=("seg-1-a", "seg-2-a"))]
    for record in old:  # format 1: the whole RoundRecord, every id and every variable repeated
        await _write_raw(store, "s1", record.index, json.dumps(record.to_json()), record.variables)
    third = make_round(3, segment_ids=("seg-1-a", "seg-2-a", "seg-3-a"), variables={"x1": 1, "x3": 3})
    await store.append_round(third, segments=[], variables=third.variables)

    assert await store.rounds("s1") == [*old, third]
    assert await store.round("s1", 2) == old[1]
    read = await store.read_rounds("s1")
    assert (read.entries[2].changed, read.entries[2].removed, read.entries[2].added) == ({"x3": 3}, ("x2",), ("x3",))
    assert await store.variables("s1") == {"x1": 1, "x3": 3}
    await store.truncate("s1", after=1)
    assert await store.rounds("s1") == old[:1]
    assert await store.variables("s1") == old[0].variables


async def test_truncate_keeps_rounds_segments_and_variables_as_of_round_n(store: Store) -> None:
    written = await _loop(store, 5)
    report = await store.truncate("s1", after=3)
    assert (report.after, report.dropped_rounds, report.dropped_segments, report.variables) == (3, 2, 6, 21)
    assert await store.rounds("s1") == written[:3]
    assert [s["id"] for s in await store.segments("s1")] == list(written[2].segment_ids)
    assert await store.variables("s1") == written[2].variables
    meta = await store.get_session("s1")
    assert meta is not None and meta.rounds == 3
    # The session goes on from round 3 as if rounds 4 and 5 never happened.
    again = make_round(4, segment_ids=(*written[2].segment_ids, "new"), variables={"only": 1})
    await store.append_round(again, segments=[{"id": "new"}], variables=again.variables)
    assert await store.rounds("s1") == [*written[:3], again]


async def test_truncate_refuses_rounds_that_are_not_there(store: Store) -> None:
    await _loop(store, 2)
    with pytest.raises(StoreError, match="round 5 is not recorded"):
        await store.truncate("s1", after=5)
    async with store.lock("s1"):
        with pytest.raises(SessionBusyError):
            async with store.lock("s1"):
                pass


@pytest.mark.parametrize(
    ("body", "message"),
    [
        pytest.param(
            "[1, 2]", "round 2 of session 's1' is unreadable: expected a JSON object, got list", id="not-object"
        ),
        pytest.param(
            '{"v": 2, "session_id": "s1", "index": 2, "started_at": 1, "duration_s": 0, "prompt_hash": "", '
            '"reply": "", "calls": 7, "segments": {"keep": 0, "add": []}, "vars": {"set": {}, "del": []}, '
            '"table": {"segments": 0}}',
            "round 2 of session 's1' is unreadable: field 'calls': expected a list of objects, got int",
            id="wrong-type",
        ),
        pytest.param(
            '{"v": 2, "session_id": "s1", "index": 2}',
            "round 2 of session 's1' is unreadable: field 'started_at': missing",
            id="missing-field",
        ),
        pytest.param(
            '{"v": 9}',
            "round 2 of session 's1' is unreadable: field 'v': unknown record format 9 (written by a newer codeact?)",
            id="future",
        ),
    ],
)
async def test_an_unreadable_round_is_named_and_the_rounds_before_it_are_kept(
    store: Store, body: str, message: str
) -> None:
    written = await _loop(store, 1)
    await _write_raw(store, "s1", 2, body, {})
    read = await store.read_rounds("s1")
    assert read.rounds == tuple(written)
    assert read.problem is not None and read.problem.message.startswith(message)
    assert read.problem.message.endswith("codeact sessions truncate s1 --after 1")
    with pytest.raises(CorruptRecordError) as info:
        await store.rounds("s1")
    assert (info.value.round, info.value.part, info.value.repair_after) == (2, "round", 1)
    with pytest.raises(CorruptRecordError):
        await store.check_session("s1")
    with pytest.raises(CorruptRecordError):  # nothing is built on top of an unreadable round
        await store.append_round(make_round(3), segments=[], variables={})
