"""The run's toolkit-call pipeline (engine/calls): one handler, one approval vocabulary, each call recorded once."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from codeact.engine.calls import Resumed, call_bridge
from codeact.engine.events import ActionRequested, Event, ToolCallCompleted, ToolCallStarted
from codeact.sandbox.runtime.protocol import RpcError
from codeact.toolkits import (
    DEFAULT_BUDGETS,
    Approval,
    ApprovalDecision,
    ApprovalRequest,
    ToolkitBridge,
    ToolkitContext,
    operation,
    toolkit,
)


@toolkit(name="kit", description="A kit")
class Kit:
    @operation
    async def echo(self, text: str) -> str:
        """Echo the text."""
        return text

    @operation(approval="ask")
    async def risky(self, text: str) -> str:
        """Something the user approves."""
        return text.upper()


def _bridge(
    events: list[tuple[type[Event], dict[str, object]]],
    *,
    policies: dict[str, str] | None = None,
    allow: bool = True,
    asked: list[ApprovalRequest] | None = None,
) -> ToolkitBridge:
    def emit(event_type: type[Event], /, **fields: object) -> Event:
        events.append((event_type, fields))
        return None  # type: ignore[return-value]  # the pipeline ignores what emit returns

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        if asked is not None:
            asked.append(request)
        return ApprovalDecision(allow=allow, reason="" if allow else "no")

    return call_bridge(
        [Kit()],
        grants=None,
        context=ToolkitContext(session_id="S"),
        budgets=DEFAULT_BUDGETS,
        emit=emit,
        round_ref=lambda: 3,
        policies=policies or {},
        approver=approver,
    )


def _call(bridge: ToolkitBridge, op: str, text: str = "hi") -> object:
    async def go() -> object:
        try:
            return await bridge.handle("call", {"toolkit": "kit", "operation": op, "arguments": {"text": text}})
        except RpcError as exc:
            return exc

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("word", "meaning"),
    [
        pytest.param(None, Approval.RUN, id="none"),
        pytest.param("always", Approval.RUN, id="always"),
        pytest.param("safe", Approval.RUN, id="safe"),
        pytest.param("auto", Approval.RUN, id="auto"),
        pytest.param("ask", Approval.ASK, id="ask"),
        pytest.param("manual", Approval.ASK, id="manual"),
        pytest.param("never", Approval.DENY, id="never"),
        pytest.param("deny", Approval.DENY, id="deny"),
        pytest.param("sometimes", Approval.ASK, id="unknown-asks"),
    ],
)
def test_every_approval_word_maps_to_one_vocabulary(word: str | None, meaning: Approval) -> None:
    assert Approval.of(word) is meaning
    assert Approval.of(meaning.value) is meaning


def test_a_call_is_recorded_once_with_its_id_and_reported_around_it() -> None:
    events: list[tuple[type[Event], dict[str, object]]] = []
    bridge = _bridge(events)

    assert _call(bridge, "echo") == "hi"
    assert _call(bridge, "echo", "again") == "again"

    records = bridge.drain_calls()
    assert [(r.sequence, r.call_id, r.result) for r in records] == [(0, "S:3:0", "hi"), (1, "S:3:1", "again")]
    assert bridge.drain_calls() == []
    assert [kind for kind, _ in events] == [ToolCallStarted, ToolCallCompleted] * 2
    assert events[1][1]["call_id"] == "S:3:0" and events[1][1]["result"] == "hi"


def test_one_gate_asks_once_for_a_call_its_grant_and_its_operation_both_ask() -> None:
    events: list[tuple[type[Event], dict[str, object]]] = []
    asked: list[ApprovalRequest] = []
    bridge = _bridge(events, policies={"kit": "manual"}, asked=asked)

    assert _call(bridge, "risky") == "HI"

    assert len(asked) == 1
    assert [fields["request_id"] for kind, fields in events if kind is ActionRequested] == ["S:3:0"]


def test_a_denied_grant_is_refused_before_the_call_and_recorded() -> None:
    events: list[tuple[type[Event], dict[str, object]]] = []
    bridge = _bridge(events, policies={"kit": "never"})

    error = _call(bridge, "echo")

    assert isinstance(error, RpcError)
    assert error.message == "kit.echo is denied by the blueprint's approval policy"
    [record] = bridge.drain_calls()
    assert record.error is not None and record.error["message"] == error.message
    assert events[-1][0] is ToolCallCompleted and events[-1][1]["error"] == record.error


@toolkit(name="tally", description="Counts what it did")
class Tally:
    def __init__(self) -> None:
        self.done: list[str] = []

    @operation
    async def mark(self, text: str) -> str:
        """Mark the text (a side effect)."""
        self.done.append(text)
        return f"marked {text}"

    @operation(approval="ask")
    async def ship(self, text: str) -> str:
        """Ship it (the user approves)."""
        self.done.append(f"ship {text}")
        return f"shipped {text}"


def _recorded(operation: str, text: str, **outcome: object) -> dict[str, object]:
    return {"toolkit": "tally", "operation": operation, "arguments": {"text": text}, "result": None, **outcome}


def test_a_resumed_round_gets_the_completed_calls_of_the_interrupted_one_from_its_record() -> None:
    # Round 2 was interrupted; round 3 resumes it. Its calls identical to a call round 2 completed with a result
    # are answered from the record, each record once; anything else runs (another call, one that failed, one
    # whose record was capped, one in flight), as does every call of a later round.
    tally, events, asked, answered = Tally(), [], [], []
    calls = [
        _recorded("mark", "a", result="marked a"),
        _recorded("mark", "a", result="marked a"),  # the same call made twice: answers twice
        _recorded("ship", "b", result="shipped b"),  # approved when it ran: not asked again
        _recorded("mark", "failed", error={"code": -32000, "name": "tool_error", "message": "down"}),
        _recorded("mark", "big", result="[...]", capped={"reason": "result_bytes"}),
        _recorded("mark", "unknown", error={"code": -32603}, in_flight=True),
    ]
    current = [3]

    def emit(event_type: type[Event], /, **fields: object) -> Event:
        events.append((event_type, fields))
        return None  # type: ignore[return-value]

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        asked.append(request)
        return ApprovalDecision(allow=True)

    bridge = call_bridge(
        [tally],
        grants=None,
        context=ToolkitContext(session_id="S"),
        budgets=DEFAULT_BUDGETS,
        emit=emit,
        round_ref=lambda: current[0],
        policies={},
        approver=approver,
        resumes=Resumed(interrupted=2, first_round=3, calls=calls, answered=answered.append),
    )

    async def call(op: str, text: str) -> object:
        return await bridge.handle("call", {"toolkit": "tally", "operation": op, "arguments": {"text": text}})

    async def run() -> list[object]:
        results = [await call("mark", "a") for _ in range(3)]
        results += [await call(op, text) for op, text in (("ship", "b"), ("mark", "failed"), ("mark", "big"))]
        results += [await call("mark", "unknown"), await call("mark", "new")]
        current[0] = 4  # a later round: it runs, even the same call
        results.append(await call("ship", "b"))
        return results

    results = asyncio.run(run())
    ran = ["marked failed", "marked big", "marked unknown", "marked new"]
    assert results == ["marked a"] * 3 + ["shipped b", *ran, "shipped b"]
    assert tally.done == ["a", "failed", "big", "unknown", "new", "ship b"]  # the third "a" ran, the first two not
    assert [(r["operation"], r["arguments"]) for r in answered] == [("mark", {"text": "a"})] * 2 + [
        ("ship", {"text": "b"})
    ]
    assert [a.arguments for a in asked] == [{"text": "b"}]  # round 4's ship, not round 3's
    records = bridge.drain_calls()  # the answered calls are recorded as the code got them, with their ids
    assert [(r.call_id, r.result) for r in records[:2]] == [("S:2:0", "marked a"), ("S:2:1", "marked a")]
    assert sum(kind is ToolCallCompleted for kind, _ in events) == 9


@pytest.mark.parametrize("stage", [pytest.param("grant", id="grant"), pytest.param("operation", id="operation")])
def test_a_call_cancelled_while_it_waits_for_its_approval_is_journaled_as_not_performed(
    tmp_path: Path, stage: str
) -> None:
    # A queued run pauses at an approval by stopping the round under the waiting call. Whichever stage asks
    # (the grant's, before the call's start is journaled; the operation's, after it), the journal says the call
    # did not run, so the interrupted round lists it as not performed, not as completed or in flight.
    from codeact.engine.agent.recovery import interrupted_evaluation, journal_groups
    from codeact.engine.calls import CallJournal
    from codeact.engine.store import open_store

    asking = asyncio.Event()

    async def approver(request: ApprovalRequest) -> ApprovalDecision:
        if request.arguments == {"text": "first"}:
            return ApprovalDecision(allow=True)
        asking.set()
        await asyncio.Event().wait()  # the host waits for the user (a queued run pauses here)
        raise AssertionError("unreachable")

    async def go() -> tuple[object, Any]:
        store = open_store(str(tmp_path / "store.db"))
        journal = CallJournal(store, "S")
        bridge = call_bridge(
            [Kit()],
            grants=None,
            context=ToolkitContext(session_id="S"),
            budgets=DEFAULT_BUDGETS,
            emit=lambda *_, **__: None,  # type: ignore[arg-type,return-value]
            round_ref=lambda: 3,
            policies={"kit": "ask"} if stage == "grant" else {},
            approver=approver,
            journal=lambda: journal,
        )
        first = await bridge.handle("call", {"toolkit": "kit", "operation": "echo", "arguments": {"text": "first"}})
        waiting = {"toolkit": "kit", "operation": "echo" if stage == "grant" else "risky", "arguments": {"text": "x"}}
        task = asyncio.create_task(bridge.handle("call", waiting))
        await asyncio.wait_for(asking.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await journal.flush()
        groups = journal_groups(await store.pending("S"), 3)
        await journal.aclose()
        await store.close()
        return first, groups

    first, groups = asyncio.run(go())
    operation = "echo" if stage == "grant" else "risky"
    assert first == "first"
    assert [(c["operation"], c["result"]) for c in groups.completed] == [("echo", "first")]
    assert groups.in_flight == ()
    assert [(c["operation"], c["arguments"], c["call_id"]) for c in groups.not_performed] == [
        (operation, {"text": "x"}, "S:3:1")
    ]
    text = interrupted_evaluation(
        3, groups.completed, reason="r", in_flight=groups.in_flight, not_performed=groups.not_performed
    )
    assert (
        f'Not performed: these calls did not run, so they had no effect:\n- kit.{operation}(text="x"): it was '
        "waiting for the user's approval when the round stopped\nMake them again if they are still needed.\n"
    ) in text


def test_a_call_never_enters_engine_agent() -> None:
    # The whole host side of a call, from the bridge's handler to the toolkit method and back.
    events: list[tuple[type[Event], dict[str, object]]] = []
    bridge = _bridge(events, policies={"kit": "ask"})
    entered: set[str] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            entered.add(frame.f_code.co_filename)

    async def go() -> object:
        sys.setprofile(profile)
        try:
            return await bridge.handle("call", {"toolkit": "kit", "operation": "risky", "arguments": {"text": "x"}})
        finally:
            sys.setprofile(None)

    assert asyncio.run(go()) == "X"
    agent = Path(__file__).resolve().parents[3] / "engine" / "agent"
    assert not [f for f in entered if Path(f).resolve().is_relative_to(agent)]
    assert any(Path(f).name == "_wrappers.py" for f in entered)


def test_a_flood_in_a_resumed_round_is_answered_from_the_record_once_per_record_then_ends_at_the_round_budget() -> None:
    # Hostile: calls answered from an interrupted round's record run nothing and are not charged to the round's
    # budget. Code that repeats a recorded call in a loop must not turn that into unbounded free calls: each
    # record answers once, every further call runs and is charged, and the round budget stops the flood.
    from codeact.toolkits import CallBudgets

    tally, answered = Tally(), []
    calls = [_recorded("mark", "a", result="marked a") for _ in range(5)]
    bridge = call_bridge(
        [tally],
        grants=None,
        context=ToolkitContext(session_id="S"),
        budgets=CallBudgets(round_calls=20),
        emit=lambda event_type, /, **fields: None,  # type: ignore[arg-type,return-value]
        round_ref=lambda: 3,
        policies={},
        approver=None,
        resumes=Resumed(interrupted=2, first_round=3, calls=calls, answered=answered.append),
    )

    async def flood() -> list[object]:
        results: list[object] = []
        for _ in range(10_000):
            result = await bridge.handle("call", {"toolkit": "tally", "operation": "mark", "arguments": {"text": "a"}})
            results.append(result)
            if isinstance(result, dict) and "$control" in result:
                break
        return results

    results = asyncio.run(flood())
    assert len(answered) == 5  # each record once
    assert len(tally.done) == 20  # then the round's budget: 20 calls ran
    assert results[:25] == ["marked a"] * 25
    last = results[-1]
    assert len(results) == 26 and isinstance(last, dict) and last["$control"]["kind"] == "budget_exceeded", last
