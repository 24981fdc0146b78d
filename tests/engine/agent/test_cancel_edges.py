"""Cancelling a run at its edges: no round runs on after the cancel, the session stays consistent.

Python 3.11's ``asyncio.wait_for`` swallows a cancel that arrives just as its call completes; a run
cancelled at that instant used to start its next round. These tests cancel runs at random points
(seeded) and through a model call that swallows the cancel, then check what the store holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import random
from collections.abc import Iterator
from typing import Any

import pytest

from codeact.engine.model import ModelClient, ModelReply, ModelSettings, ScriptedReplies
from codeact.engine.store import Store

from .conftest import BASE, MakeAgent, Probe, code

MANY = BASE.replace("maxTurns: 6", "maxTurns: 40").replace("  - ref: devops", "  - ref: devops\n  - ref: probe")


def _round(i: int) -> str:
    return code(f"probe.record({i})\nv{i} = {i}\nprint('round {i}')")


async def _assert_consistent(store: Store, session_id: str) -> int:
    """The session's record is whole: contiguous rounds, no pending entries, the lock free."""
    meta = await store.get_session(session_id)
    if meta is None:
        return 0  # cancelled before the session was opened
    await store.check_session(session_id)
    rounds = await store.rounds(session_id)
    assert [r.index for r in rounds] == list(range(1, meta.rounds + 1))
    assert meta.status in {"interrupted", "completed", "failed"}
    assert await store.pending(session_id) == []
    async with store.lock(session_id):  # free: raises SessionBusyError otherwise
        pass
    return meta.rounds


@pytest.fixture(autouse=True)
def _collect_dropped_calls() -> Iterator[None]:
    """Finalize the model calls a cancel dropped while this test's warning filters apply.

    Left to a later garbage collection, their finalizer formats a traceback, and on Python 3.11 that
    can run ``ast.parse`` inside another ``ast.parse`` of the same thread (CPython gh-106905: "AST
    constructor recursion depth mismatch" in whichever test or plugin parses then).
    """
    yield
    gc.collect()


# litellm runs the provider's call in a thread that returns a coroutine: a cancel that lands while
# the thread runs drops that coroutine unawaited (litellm's behaviour, not the run's).
@pytest.mark.filterwarnings("ignore:Exception ignored in.*acompletion:pytest.PytestUnraisableExceptionWarning")
@pytest.mark.filterwarnings("ignore:coroutine .*acompletion' was never awaited:RuntimeWarning")
async def test_runs_cancelled_at_random_points_stop_and_stay_resumable(
    make_agent: MakeAgent, sqlite_store: Store, probe: Probe
) -> None:
    rng = random.Random(20261124)
    built = make_agent(MANY, [_round(i) for i in range(400)])
    session_id = "s-cancel-edges"

    async def consume() -> None:
        async for _ in built.agent.run("count", session_id=session_id):
            pass

    recorded = 0
    for _ in range(12):
        consumer = asyncio.create_task(consume())
        # Anywhere: opening the session, the model call, the code running, recording the round.
        await asyncio.sleep(rng.uniform(0.0, 0.4))
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer
        # The run is over once the cancel returns: nothing of it goes on afterwards.
        calls, consumed = len(probe.calls), built.script.consumed
        stored = await _assert_consistent(sqlite_store, session_id)
        await asyncio.sleep(0.05)
        assert (len(probe.calls), built.script.consumed) == (calls, consumed)
        assert await _assert_consistent(sqlite_store, session_id) == stored
        assert stored >= recorded  # resumed runs continue the record, never rewrite it
        recorded = stored

    finish = make_agent(MANY, [code("system.finish('done')")])
    events = await finish.run("finish", session_id=session_id)
    assert events[-1].type == "run.completed"
    started = [e.round for e in events if e.type == "round.started"]  # type: ignore[attr-defined]
    assert started == [recorded + 1]
    assert await _assert_consistent(sqlite_store, session_id) == recorded + 1


class _SwallowingClient(ModelClient):
    """A model client whose call swallows a cancel, like 3.11's wait_for when its call completes."""

    def __init__(self, settings: ModelSettings, *, swallow_on: int) -> None:
        super().__init__(settings)
        self.calls = 0
        self.swallow_on = swallow_on
        self.entered = asyncio.Event()
        self.swallowed = False

    async def complete(self, **kwargs: Any) -> ModelReply:
        reply = await super().complete(**kwargs)
        self.calls += 1
        if self.calls == self.swallow_on:
            self.entered.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                self.swallowed = True  # the reply is returned as if nobody had cancelled
        return reply


async def test_a_swallowed_cancel_does_not_let_the_round_run_on(
    make_agent: MakeAgent, sqlite_store: Store, probe: Probe
) -> None:
    script = ScriptedReplies([_round(i) for i in range(1, 6)])
    client = _SwallowingClient(ModelSettings(model=script.model, max_retries=0), swallow_on=2)
    built = make_agent(MANY, script=script, model=client)

    async def consume() -> None:
        async for _ in built.agent.run("count", session_id="s-swallow"):
            pass

    consumer = asyncio.create_task(consume())
    await client.entered.wait()  # round 2's model call is in progress
    consumer.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await consumer

    assert client.swallowed
    # Round 2's code never ran, no round 3 started; the session is interrupted after round 1.
    assert probe.calls == [("record", 1)]
    assert (client.calls, script.consumed) == (2, 2)
    assert await _assert_consistent(sqlite_store, "s-swallow") == 1
    meta = await sqlite_store.get_session("s-swallow")
    assert meta is not None and meta.status == "interrupted"
