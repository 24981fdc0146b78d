"""Linear storage: stored bytes per round and resume time at 10, 100 and 1,000 rounds (SQLite, Redis).

A session shaped like the agent loop's: each round adds 3 segments (its prompt is built from EVERY
segment so far, so ``segment_ids`` grows by 3 per round), makes 3 bridge calls and changes 2 of 20
variables. Figures per backend, at 10, 100 and 1,000 rounds:

* ``record_bytes``: the stored record of that round; ``record_growth_1000_vs_10`` is the ratio of
  round 1,000's record to round 10's (goal <= 1.2: records do not grow with the session).
* ``store_bytes_per_round``: everything the session holds (records, segments, variables) / rounds.
* ``resume_ms`` / ``resume_ms_per_round`` (best of 5): what a resume reads (``check_session`` = every record
  decoded, segments, variables) and ``read_rounds_ms`` (what replay reads); linear when per-round is flat.
  ``read_rounds`` builds one ``RoundRecord`` per round whose ``segment_ids`` hold EVERY segment id of
  its prompt (the record API), so its per-round cost still grows with the session (a tuple copy per
  round); a resume does not build them (``verify_rounds`` keeps one running state).
* ``append_ms``: median ``append_round`` time over the 10 rounds up to that point.
* Baseline measured in the same run: ``format1_record_bytes`` is the same round written whole (the
  previous format, every segment id and every variable repeated); ``saving_at_1000`` = format 1 / stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from codeact.engine.store import RoundRecord, SessionMeta, SQLiteStore, Store

CHECKPOINTS = (10, 100, 1000)
GOAL = 1.2


def _round(index: int, ids: tuple[str, ...], variables: dict[str, Any]) -> RoundRecord:
    code = "\n".join(f"info_{c} = devops.get_project_info(project_id='P-{index}-{c}')" for c in range(3))
    return RoundRecord(
        session_id="bench",
        index=index,
        started_at=time.time(),
        duration_s=0.4,
        prompt_hash="sha256:" + "ab" * 32,
        segment_ids=ids,
        reply=f"Thought: look at the projects.\n```python\n{code}\n```",
        code=code,
        calls=tuple(
            {
                "sequence": c,
                "session_id": "bench",
                "toolkit": "devops",
                "operation": "get_project_info",
                "arguments": {"project_id": f"P-{index}-{c}"},
                "result": {"id": f"P-{index}-{c}", "name": "Checkout", "apps": ["api", "web"]},
                "started_at": time.time(),
                "duration_s": 0.002,
            }
            for c in range(3)
        ),
        stdout=f"round {index}: 3 projects\n",
        variables=variables,
        usage={"total_tokens": 1900},
        timings={"model": 0.3, "sandbox": 0.05},
    )


async def _store_bytes(store: Store) -> int:
    if isinstance(store, SQLiteStore):
        conn = store._conn
        total = 0
        for table, column in (("rounds", "record"), ("segments", "body"), ("variables", "value")):
            (n,) = conn.execute(f"SELECT COALESCE(SUM(length({column})), 0) FROM {table}").fetchone()  # noqa: S608
            total += int(n)
        return total
    client = store._client  # type: ignore[attr-defined]
    key = store._key  # type: ignore[attr-defined]
    rounds = await client.lrange(key("bench", "rounds"), 0, -1)
    segments = await client.lrange(key("bench", "segments"), 0, -1)
    variables = await client.hgetall(key("bench", "vars"))
    return sum(len(x.encode()) for x in (*rounds, *segments, *variables.values()))


async def _record_bytes(store: Store, index: int) -> int:
    if isinstance(store, SQLiteStore):
        (n,) = store._conn.execute("SELECT length(record) FROM rounds WHERE idx = ?", (index,)).fetchone()
        return int(n)
    item = await store._client.lindex(store._key("bench", "rounds"), index - 1)  # type: ignore[attr-defined]
    return len(item.encode())


async def _resume_ms(store: Store, opener: Any) -> tuple[float, float]:
    """A fresh store object (no cache), reading what a resume reads, then what replay reads."""
    resumes, replays = [], []
    for _ in range(5):  # best of 5: the machine is shared
        async with opener() as fresh:
            started = time.perf_counter()
            await fresh.check_session("bench")
            await fresh.segments("bench")
            await fresh.variables("bench")
            resumes.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            await fresh.read_rounds("bench")
            replays.append((time.perf_counter() - started) * 1000)
    return min(resumes), min(replays)


async def _measure(store: Store, opener: Any) -> dict[str, Any]:
    await store.create_session(SessionMeta(session_id="bench", blueprint_id="b", blueprint_hash="h", model="m"))
    ids: tuple[str, ...] = ()
    variables: dict[str, Any] = {f"var_{n}": {"n": n, "text": "lorem ipsum " * 8} for n in range(20)}
    out: dict[str, Any] = {}
    append_ms: list[float] = []
    for index in range(1, CHECKPOINTS[-1] + 1):
        segments = [{"id": f"s{index}-{k}", "kind": "code", "text": f"round {index} part {k}"} for k in range(3)]
        ids = (*ids, *(s["id"] for s in segments))
        variables = {**variables, f"var_{index % 20}": {"n": index, "text": "changed " * 8}, "last": index}
        record = _round(index, ids, variables)
        started = time.perf_counter()
        await store.append_round(record, segments=segments, variables=variables)
        append_ms.append((time.perf_counter() - started) * 1000)
        if index in CHECKPOINTS:
            resume, replay = await _resume_ms(store, opener)
            stored = await _record_bytes(store, index)
            out[str(index)] = {
                "record_bytes": stored,
                "format1_record_bytes": len(json.dumps(record.to_json(), separators=(",", ":"), ensure_ascii=False)),
                "store_bytes_per_round": round(await _store_bytes(store) / index),
                "resume_ms": round(resume, 2),
                "resume_ms_per_round": round(resume / index, 4),
                "read_rounds_ms": round(replay, 2),
                "read_rounds_ms_per_round": round(replay / index, 4),
                "append_ms": round(statistics.median(append_ms[-10:]), 3),
            }
    first, last = out[str(CHECKPOINTS[0])], out[str(CHECKPOINTS[-1])]
    out["record_growth_1000_vs_10"] = round(last["record_bytes"] / first["record_bytes"], 3)
    out["store_bytes_per_round_1000_vs_10"] = round(last["store_bytes_per_round"] / first["store_bytes_per_round"], 3)
    out["resume_ms_per_round_1000_vs_100"] = round(
        last["resume_ms_per_round"] / out[str(CHECKPOINTS[1])]["resume_ms_per_round"], 2
    )
    out["read_rounds_ms_per_round_1000_vs_100"] = round(
        last["read_rounds_ms_per_round"] / out[str(CHECKPOINTS[1])]["read_rounds_ms_per_round"], 2
    )
    out["saving_at_1000"] = round(last["format1_record_bytes"] / last["record_bytes"], 1)
    out["within_goal"] = out["record_growth_1000_vs_10"] <= GOAL
    return out


async def _main() -> dict[str, Any]:
    results: dict[str, Any] = {"checkpoints": list(CHECKPOINTS), "goal_growth": GOAL}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        async with SQLiteStore(path) as sqlite_store:
            results["sqlite"] = await _measure(sqlite_store, lambda: SQLiteStore(path))
    url = os.environ.get("CODEACT_TEST_REDIS_URL") or os.environ.get("CODEACT_BENCH_REDIS_URL")
    if url:
        from codeact.engine.store.redis_store import RedisStore

        prefix = f"codeact-bench:{uuid.uuid4().hex[:8]}"
        async with RedisStore(url, prefix=prefix) as redis_store:
            try:
                results["redis"] = await _measure(redis_store, lambda: RedisStore(url, prefix=prefix))
            finally:
                await redis_store.delete_session("bench")
    else:
        results["redis"] = {"skipped": "set CODEACT_TEST_REDIS_URL (make bench starts Redis)"}
    return results


def run() -> dict[str, Any]:
    """Stored bytes per round and resume time at 10, 100 and 1,000 rounds, on both backends."""
    return asyncio.run(_main())


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
