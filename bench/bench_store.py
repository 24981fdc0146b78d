"""Store cost per round: append_round + read-back for SQLite and Redis, against json.dumps of the record.

A realistic round (~10 KB: 5 bridge calls, 20 variables, 2 segments) is appended and then read back
the way a resume does (``rounds`` is NOT read per round; ``round(i)`` and ``variables`` are). The
baseline is ``json.dumps`` of the same record and variables in the same run; ``ratio`` = store / baseline.
Target (issue 6): the store's share of engine overhead <= 5 ms per round.
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

ROUNDS = 200
TARGET_MS = 5.0


def _variables(index: int) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for n in range(20):
        if n % 4 == 0:
            values[f"rows_{n}"] = [{"id": i, "name": f"app-{i}", "healthy": i % 3 != 0} for i in range(8)]
        elif n % 4 == 1:
            values[f"text_{n}"] = f"round {index} " + "lorem ipsum " * 10
        elif n % 4 == 2:
            values[f"count_{n}"] = index * n
        else:
            values[f"when_{n}"] = {"__codeact__": "datetime", "v": "2024-05-01T12:00:00+00:00"}
    return values


def _record(session_id: str, index: int) -> tuple[RoundRecord, list[dict[str, Any]], dict[str, Any]]:
    variables = _variables(index)
    calls = tuple(
        {
            "toolkit": "devops",
            "operation": "list_deployments",
            "arguments": {"project_id": f"p-{c}", "limit": 20},
            "result": [{"id": f"d-{c}-{i}", "status": "failed" if i % 4 == 0 else "ok"} for i in range(6)],
            "started_at": time.time(),
            "duration_s": 0.002,
        }
        for c in range(5)
    )
    code = "\n".join(f"deploys_{i} = await devops.list_deployments(project_id='p-{i}', limit=20)" for i in range(5))
    record = RoundRecord(
        session_id=session_id,
        index=index,
        started_at=time.time(),
        duration_s=0.4,
        prompt_hash="sha256:" + "ab" * 32,
        segment_ids=tuple(f"seg-{index}-{k}" for k in range(6)),
        reply=f"Thought: look at the deployments.\n```python\n{code}\n```",
        code=code,
        calls=calls,
        stdout="\n".join(f"project p-{i}: 2 failed" for i in range(5)),
        variables=variables,
        usage={"prompt_tokens": 1800, "completion_tokens": 120, "cost": 0.0004},
        timings={"model": 0.3, "sandbox": 0.05},
    )
    segments = [
        {"id": f"seg-{index}-code", "kind": "code", "text": code},
        {"id": f"seg-{index}-eval", "kind": "evaluation", "text": record.stdout},
    ]
    return record, segments, variables


def _baseline_ms(records: list[tuple[RoundRecord, list[dict[str, Any]], dict[str, Any]]]) -> float:
    started = time.perf_counter()
    for record, segments, variables in records:
        json.dumps(record.to_json())
        json.dumps(segments)
        json.dumps(variables)
    return (time.perf_counter() - started) * 1000 / len(records)


async def _measure(store: Store, session_id: str) -> dict[str, float]:
    await store.create_session(
        SessionMeta(session_id=session_id, blueprint_id="bench", blueprint_hash="h", model="scripted/bench")
    )
    records = [_record(session_id, i) for i in range(1, ROUNDS + 1)]
    append_ms: list[float] = []
    read_ms: list[float] = []
    for record, segments, variables in records:
        started = time.perf_counter()
        await store.append_round(record, segments=segments, variables=variables)
        middle = time.perf_counter()
        await store.round(session_id, record.index)
        await store.variables(session_id)
        ended = time.perf_counter()
        append_ms.append((middle - started) * 1000)
        read_ms.append((ended - middle) * 1000)
    started = time.perf_counter()
    await store.rounds(session_id)
    resume_ms = (time.perf_counter() - started) * 1000
    await store.delete_session(session_id)
    baseline = _baseline_ms(records)
    per_round = statistics.median(a + r for a, r in zip(append_ms, read_ms, strict=True))
    return {
        "append_ms_median": round(statistics.median(append_ms), 3),
        "append_ms_p95": round(sorted(append_ms)[int(len(append_ms) * 0.95)], 3),
        "read_back_ms_median": round(statistics.median(read_ms), 3),
        "per_round_ms": round(per_round, 3),
        "json_dumps_baseline_ms": round(baseline, 3),
        "ratio_vs_json_dumps": round(per_round / baseline, 1),
        f"read_all_{ROUNDS}_rounds_ms": round(resume_ms, 2),
        "within_target": per_round <= TARGET_MS,
    }


async def _main() -> dict[str, Any]:
    record, segments, variables = _record("size", 1)
    size = len(json.dumps(record.to_json())) + len(json.dumps(segments)) + len(json.dumps(variables))
    results: dict[str, Any] = {"rounds": ROUNDS, "round_bytes": size, "target_ms_per_round": TARGET_MS}
    with tempfile.TemporaryDirectory() as tmp:
        async with SQLiteStore(Path(tmp) / "bench.db") as sqlite_store:
            results["sqlite"] = await _measure(sqlite_store, "bench")
    url = os.environ.get("CODEACT_TEST_REDIS_URL") or os.environ.get("CODEACT_BENCH_REDIS_URL")
    if url:
        from codeact.engine.store.redis_store import RedisStore

        async with RedisStore(url, prefix=f"codeact-bench:{uuid.uuid4().hex[:8]}") as redis_store:
            results["redis"] = await _measure(redis_store, "bench")
    else:
        results["redis"] = {"skipped": "set CODEACT_TEST_REDIS_URL (make bench starts Redis)"}
    return results


def run() -> dict[str, Any]:
    """Measure both backends; figures in milliseconds per round and ratios against json.dumps."""
    return asyncio.run(_main())


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
