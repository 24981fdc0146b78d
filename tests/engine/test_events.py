"""Events: protocol names, the envelope, sequence stamping and the JSON round trip."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from codeact.engine.errors import CodeactError
from codeact.engine.events import (
    EVENT_TYPES,
    ActionRequested,
    ArtifactCreated,
    CodeCompleted,
    CodeStarted,
    Event,
    EventSequence,
    FlowStepCompleted,
    FlowStepStarted,
    MessageCompleted,
    MessageDelta,
    RoundStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    SegmentCreated,
    StateUpdated,
    ToolCallCompleted,
    ToolCallStarted,
    event_from_json,
)

SAMPLES: list[tuple[type[Event], dict[str, Any]]] = [
    (RunStarted, {"session_id": "s1", "blueprint_id": "devops", "model": "scripted/x", "input": "hi"}),
    (RoundStarted, {"round": 1}),
    (SegmentCreated, {"segment": {"id": "seg-1", "kind": "user", "text": "hi"}, "round": 1}),
    (MessageDelta, {"text": "pri", "purpose": "code", "round": 1}),
    (MessageCompleted, {"text": "print(1)", "round": 1, "model": "m", "usage": {"total_tokens": 12}}),
    (ToolCallStarted, {"call_id": "c1", "toolkit": "devops", "operation": "get_app", "arguments": {"id": "7"}}),
    (ToolCallCompleted, {"call_id": "c1", "toolkit": "devops", "operation": "get_app", "result": {"ok": True}}),
    (CodeStarted, {"round": 1, "code": "x = 1"}),
    (CodeCompleted, {"round": 1, "stdout": "1\n", "variables_changed": ("x", "y"), "duration_s": 0.01}),
    (StateUpdated, {"round": 1, "changed": {"x": 1}, "removed": ("old",), "uncaptured": ({"name": "f"},)}),
    (
        ArtifactCreated,
        {"round": 1, "session_id": "s1", "name": "chart.png", "mime": "image/png", "size": 10, "uri": "codeact://x"},
    ),
    (ActionRequested, {"request_id": "r1", "toolkit": "devops", "operation": "deploy", "arguments": {"app": "a"}}),
    (RunCompleted, {"answer": "3 deployments failed", "reason": "finished", "rounds": 4}),
    (RunFailed, {"error": {"code": "store.unavailable", "message": "Redis at ... is unreachable"}, "rounds": 2}),
    (FlowStepStarted, {"agent": "writer", "position": "1", "session_id": "s1.1.writer", "parent_run_id": "run-0"}),
    (FlowStepCompleted, {"agent": "writer", "position": "1", "answer": {"draft": "x"}, "output_key": "draft"}),
]


def test_every_protocol_event_has_a_class() -> None:
    assert sorted(EVENT_TYPES) == sorted(
        [
            "run.started",
            "round.started",
            "segment.created",
            "message.delta",
            "message.completed",
            "tool.call.started",
            "tool.call.completed",
            "code.started",
            "code.completed",
            "artifact.created",
            "state.updated",
            "action.requested",
            "run.completed",
            "run.failed",
            "flow.step.started",  # engine.flow: a step of a flow (a sub-agent's run) began / ended
            "flow.step.completed",
        ]
    )
    assert sorted(cls.type for cls, _ in SAMPLES) == sorted(EVENT_TYPES)


def test_sequence_stamps_run_id_sequence_and_time() -> None:
    events = EventSequence("run-1")
    before = time.time()
    stamped = [events.emit(cls, **payload) for cls, payload in SAMPLES]
    assert [e.sequence for e in stamped] == list(range(1, len(SAMPLES) + 1))
    assert {e.run_id for e in stamped} == {"run-1"}
    assert all(before <= e.timestamp <= time.time() for e in stamped)
    assert [e.timestamp for e in stamped] == sorted(e.timestamp for e in stamped)


def test_run_ids_are_generated_and_distinct() -> None:
    first, second = EventSequence(), EventSequence()
    assert first.run_id != second.run_id and len(first.run_id) == 32


@pytest.mark.parametrize(("cls", "payload"), [pytest.param(c, p, id=c.type) for c, p in SAMPLES])
def test_json_round_trip(cls: type[Event], payload: dict[str, Any]) -> None:
    event = EventSequence("run-1").emit(cls, **payload)
    line = event.to_json_line()
    assert "\n" not in line
    data = json.loads(line)
    assert list(data)[:4] == ["type", "run_id", "sequence", "timestamp"]
    assert (data["type"], data["run_id"], data["sequence"]) == (cls.type, "run-1", 1)
    assert event_from_json(data) == event


def test_to_json_is_flat_with_the_payload() -> None:
    event = RoundStarted(run_id="r", sequence=3, timestamp=12.5, round=2)
    assert event.to_json() == {"type": "round.started", "run_id": "r", "sequence": 3, "timestamp": 12.5, "round": 2}
    completed = CodeCompleted(run_id="r", sequence=4, timestamp=13.0, round=2, variables_changed=("a",))
    assert completed.to_json() == {
        "type": "code.completed",
        "run_id": "r",
        "sequence": 4,
        "timestamp": 13.0,
        "round": 2,
        "status": "ok",
        "stdout": "",
        "stderr": "",
        "error": None,
        "variables_changed": ["a"],
        "duration_s": 0.0,
        "reply": "",
    }


def test_unknown_keys_are_ignored_for_forward_compatibility() -> None:
    data = {"type": "round.started", "run_id": "r", "sequence": 1, "timestamp": 1.0, "round": 1, "new_field": 5}
    assert event_from_json(data) == RoundStarted(run_id="r", sequence=1, timestamp=1.0, round=1)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {"type": "artifact.deleted", "run_id": "r"},
            "unknown event type 'artifact.deleted'; known types: ['action.requested', 'artifact.created', "
            "'code.completed', "
            "'code.started', 'flow.step.completed', 'flow.step.started', 'message.completed', 'message.delta', "
            "'round.started', 'run.completed', "
            "'run.failed', 'run.started', 'segment.created', 'state.updated', 'tool.call.completed', "
            "'tool.call.started']",
            id="unknown-type",
        ),
        pytest.param(
            {"type": "round.started", "run_id": "r", "sequence": 1, "timestamp": 1.0},
            "malformed 'round.started' event: RoundStarted.__init__() missing 1 required keyword-only "
            "argument: 'round'",
            id="missing-field",
        ),
    ],
)
def test_invalid_events_are_refused(data: dict[str, Any], message: str) -> None:
    with pytest.raises(CodeactError) as info:
        event_from_json(data)
    assert info.value.message == message
    assert info.value.code == "event.invalid"


def test_events_are_frozen() -> None:
    event = RoundStarted(run_id="r", sequence=1, timestamp=1.0, round=1)
    with pytest.raises(AttributeError):
        event.round = 2  # type: ignore[misc]


def test_non_json_answers_are_stringified_on_the_line() -> None:
    odd = RunCompleted(run_id="r", sequence=9, timestamp=1.0, answer=_Weird(), rounds=1)
    assert json.loads(odd.to_json_line())["answer"] == "<weird>"


class _Weird:
    def __str__(self) -> str:
        return "<weird>"


def test_render_event_prints_a_plain_transcript_off_a_terminal() -> None:
    import io

    from rich.console import Console

    from codeact.engine.events import render_event

    buffer = io.StringIO()
    console = Console(file=buffer, width=60, force_terminal=False)
    events = EventSequence("0123456789abcdef")
    for cls, payload in SAMPLES:
        render_event(events.emit(cls, **payload), console)
    render_event(events.emit(SegmentCreated, segment={"id": "t", "kind": "Thought", "content": "check apps"}), console)
    assert buffer.getvalue().splitlines() == [
        "run 01234567 · session s1 · scripted/x",
        "─" * 25 + " round 1 " + "─" * 26,
        '→ devops.get_app(id="7")',
        '← devops.get_app -> {"ok": true}',
        "x = 1",
        "1",
        "variables: x, y",
        "! variable f is not kept for the next round",
        "artifact: chart.png (image/png, 10 bytes)",
        '? approval needed: devops.deploy(app="a")',
        "✔ finished after 4 rounds",
        "✖ [store.unavailable] Redis at ... is unreachable",
        "─" * 13 + " writer (1) · session s1.1.writer " + "─" * 13,
        '◆ writer: completed -> {"draft": "x"}',
        "Thought: check apps",
    ]


def test_render_event_shows_thought_and_express_segments() -> None:
    import io

    from rich.console import Console

    from codeact.engine.events import EventSequence, SegmentCreated, render_event

    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    seq = EventSequence("r1")
    render_event(seq.emit(SegmentCreated, segment={"kind": "Thought", "content": "look up P-123"}, round=1), console)
    render_event(seq.emit(SegmentCreated, segment={"kind": "Express", "content": "done soon"}, round=1), console)
    render_event(seq.emit(SegmentCreated, segment={"kind": "Evaluation", "content": "hidden"}, round=1), console)
    assert out.getvalue() == "Thought: look up P-123\nExpress: done soon\n"
