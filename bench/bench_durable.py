"""The call journal (issue 34): what write-ahead recording costs per toolkit call, and the kill test at size.

Journal cost, measured in one run against today's bridge (the run's bridge without a journal):
1,000 calls of a trivial operation from code in the subprocess sandbox, sequential (awaited one after
another) and gathered (``asyncio.gather``), through the run's bridge (``engine.calls.call_bridge``)
(a) without a journal, (b) with the journal on a SQLite file, (c) with the journal on Redis (when
``CODEACT_TEST_REDIS_URL`` is set).
Rounds alternate between the set-ups ``REPEAT`` times; figures are medians. ``*_extra_per_call_ms`` is
the sequential difference per call (target: <= 1 ms with SQLite); ``gather_ratio`` the gathered time
over today's (target: <= 2). ``entries_per_write``: journal entries per store write in the gathered
round (the group commit).

The kill test (``kill_*``): ``tests/engine/durable_calls.py``'s random-instant trials, ``KILL_TRIALS``
per store (env ``CODEACT_BENCH_KILL_TRIALS``, default 40; the issue's bar is 200): a real ``codeact
run`` SIGKILLed at a random instant while round 1 makes five side-effecting calls, then resumed by a
model that follows the resumed prompt. Reported: trials, lost (completed calls missing from the resumed
prompt), duplicated (side effects done twice), resume failures.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from codeact.toolkits import DEFAULT_BUDGETS, ToolkitContext, ToolkitRegistry, operation, toolkit

CALLS = 1000
REPEAT = 9


@toolkit(name="bench", description="Benchmark operations")
class Bench:
    @operation
    async def ping(self, n: int) -> int:
        """Return n."""
        return n


_ROUNDS = {
    "empty": "x = 1",
    "sequential": f"for i in range({CALLS}):\n    await bench.ping(i)\nx = 1",
    "gather": f"import asyncio\nr = await asyncio.gather(*[bench.ping(i) for i in range({CALLS})])\nr = None",
}


class _Setup:
    def __init__(self, name: str, store: Any) -> None:
        from codeact.engine.agent.recovery import CallJournal
        from codeact.engine.calls import call_bridge

        self.name = name
        self.store = store
        self.session = f"bench-{uuid.uuid4().hex[:8]}"
        self.round = 0
        self.journal = CallJournal(store, self.session) if store is not None else None
        self.handler = call_bridge(
            ToolkitRegistry([Bench()]),
            grants=None,
            context=ToolkitContext(session_id=self.session),
            budgets=DEFAULT_BUDGETS,
            emit=lambda *a, **k: None,
            round_ref=lambda: self.round,
            policies={},
            approver=None,
            journal=lambda: self.journal,
        )

    async def round_ms(self, box: Any, code: str) -> float:
        self.round += 1
        started = time.perf_counter()
        result = await box.execute(code, deadline=120)
        elapsed = (time.perf_counter() - started) * 1000
        if result.error is not None:
            raise RuntimeError(f"{self.name}: {result.error.type}: {result.error.message}")
        self.handler.drain_calls()
        if self.journal is not None:
            self.journal.clear()
        return elapsed


async def _journal_figures() -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-durable-") as tmp:
        return await _journal_figures_in(tmp)


async def _journal_figures_in(tmp: str) -> dict[str, Any]:
    from codeact.engine.store import open_store
    from codeact.sandbox import SubprocessSandbox

    stores: dict[str, Any] = {"none": None, "sqlite": open_store(f"sqlite:///{Path(tmp) / 'sessions.db'}")}
    redis_url = os.environ.get("CODEACT_TEST_REDIS_URL")
    if redis_url:
        stores["redis"] = open_store(redis_url + ("&" if "?" in redis_url else "?") + "prefix=bench-durable")
    setups = [_Setup(name, store) for name, store in stores.items()]
    boxes = [SubprocessSandbox(bridge=s.handler) for s in setups]
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for box in boxes:
            await box.start()
            await box.execute("pass")
        for _ in range(REPEAT):
            for setup, box in zip(setups, boxes, strict=True):
                for kind, code in _ROUNDS.items():
                    times.setdefault((setup.name, kind), []).append(await setup.round_ms(box, code))
        entries_per_write: dict[str, float] = {}
        for setup, box in zip(setups, boxes, strict=True):
            if setup.journal is not None:
                before = setup.journal.writes
                await setup.round_ms(box, _ROUNDS["gather"])
                await setup.journal.flush()
                entries_per_write[setup.name] = round(2 * CALLS / max(1, setup.journal.writes - before - 1), 1)
    finally:
        for box in boxes:
            await box.aclose()
        for setup in setups:
            if setup.journal is not None:
                await setup.journal.aclose()
        for store in stores.values():
            if store is not None:
                await store.close()
        if "redis" in stores:
            await _drop_bench_keys(redis_url or "", [s.session for s in setups if s.name == "redis"])
    med = {key: statistics.median(values) for key, values in times.items()}
    out: dict[str, Any] = {}
    base_seq = med[("none", "sequential")] - med[("none", "empty")]
    base_gather = med[("none", "gather")] - med[("none", "empty")]
    out["today_sequential_per_call_ms"] = round(base_seq / CALLS, 4)
    out["today_gather_ms"] = round(base_gather, 2)
    for name in stores:
        if name == "none":
            continue
        seq = med[(name, "sequential")] - med[(name, "empty")]
        gathered = med[(name, "gather")] - med[(name, "empty")]
        out[name] = {
            "sequential_per_call_ms": round(seq / CALLS, 4),
            "sequential_extra_per_call_ms": round((seq - base_seq) / CALLS, 4),
            "gather_ms": round(gathered, 2),
            "gather_ratio": round(gathered / base_gather, 2),
            "entries_per_write": entries_per_write.get(name),
        }
    return out


async def _drop_bench_keys(url: str, sessions: list[str]) -> None:
    from codeact.engine.store import open_store

    store = open_store(url + ("&" if "?" in url else "?") + "prefix=bench-durable")
    try:
        for session in sessions:
            await store.delete_session(session)
            await store.clear_pending(session)
    finally:
        await store.close()


def run() -> dict[str, Any]:
    """The journal's cost per call, and the kill test's trials, lost, duplicated (see the module docstring)."""
    figures: dict[str, Any] = {"journal": asyncio.run(_journal_figures())}
    trials = int(os.environ.get("CODEACT_BENCH_KILL_TRIALS", "40"))
    if trials > 0:
        from tests.engine.durable_calls import kill_trials

        figures["kill"] = kill_trials(trials)
    return figures
