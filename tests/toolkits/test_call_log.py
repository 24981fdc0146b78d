"""The call log folds the calls over the per-round cap as they end: the same record as capping at the end."""

from __future__ import annotations

import asyncio
import random

import pytest

from codeact.toolkits import CallLog, CallRecord, RecordCaps, cap_calls
from codeact.toolkits.pipeline import Call, CallOutcome


def _record(call: Call, outcome: CallOutcome, *, call_id: str | None = None) -> CallRecord:
    return CallRecord(
        sequence=call.sequence,
        session_id="s",
        toolkit=call.toolkit,
        operation=call.operation,
        arguments=call.arguments,
        result=outcome.result,
        started_at=call.started_at,
        duration_s=outcome.duration_s,
        call_id=call.call_id if call_id is None else call_id,
    )


def _call(sequence: int) -> Call:
    return Call(
        toolkit="t",
        operation=f"op{sequence % 3}",
        arguments={"n": sequence},
        sequence=sequence,
        started_at=1000.0 + sequence,
        t0=0.0,
        raw=("t", f"op{sequence % 3}", {"n": sequence}),
    )


async def _round(log: CallLog, calls: int, *, shuffled: bool) -> list[tuple[Call, CallOutcome]]:
    """``calls`` calls through ``log`` at once, each ending after a (shuffled or in-order) number of steps."""
    steps = list(range(calls))
    if shuffled:
        random.Random(7).shuffle(steps)
    seen: list[tuple[Call, CallOutcome]] = []

    async def run(call: Call, wait: int) -> None:
        async def core(call: Call) -> CallOutcome:
            for _ in range(wait % 17):
                await asyncio.sleep(0)
            outcome = CallOutcome(result=call.sequence * 2, duration_s=0.001 * (call.sequence % 5))
            seen.append((call, outcome))
            return outcome

        await log(call, core)

    await asyncio.gather(*(run(_call(n), steps[n]) for n in range(calls)))
    return seen


@pytest.mark.parametrize("ordered", [True, False])
@pytest.mark.parametrize("shuffled", [True, False])
def test_the_log_gives_the_record_capping_at_the_end_gives(
    monkeypatch: pytest.MonkeyPatch, ordered: bool, shuffled: bool
) -> None:
    monkeypatch.setenv("CODEACT_RECORD_CALLS", "10")
    log = CallLog(_record, ordered=ordered)
    for calls in (25, 7, 40):  # three rounds: over the cap, under it, over it again
        ended = asyncio.run(_round(log, calls, shuffled=shuffled))
        if ordered:
            ended.sort(key=lambda pair: pair[0].sequence)
        expected = cap_calls([_record(call, outcome) for call, outcome in ended], RecordCaps(calls=10))
        assert log.drain() == expected


def test_the_log_holds_no_more_than_the_cap_of_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEACT_RECORD_CALLS", "5")
    log = CallLog(_record, ordered=True)
    asyncio.run(_round(log, 500, shuffled=False))
    assert len(log._calls) == 5 and not log._waiting  # the other 495 are folded, not kept
    records = log.drain()
    assert len(records) == 6 and records[-1].capped is not None and records[-1].capped["calls"] == 495
