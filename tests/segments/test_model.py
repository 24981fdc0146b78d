"""Segments and the segment history."""

from __future__ import annotations

import pydantic
import pytest

from codeact.segments import Segment, SegmentHistory, SegmentKind, segment_label


@pytest.mark.parametrize(
    ("kind", "content", "rendered"),
    [
        pytest.param("User", "find it", "User: find it", id="user"),
        pytest.param(SegmentKind.NEXT_GOAL, "print titles", "NextGoal: print titles", id="next-goal"),
        pytest.param("Code", "x = 1\nprint(x)", "Python:\nx = 1\nprint(x)", id="code-as-python"),
        pytest.param("Plan", "1. a\n2. b", "Plan: 1. a\n2. b", id="multi-line"),
        pytest.param("CardEvent", "clicked OK", "CardEvent: clicked OK", id="custom-kind"),
    ],
)
def test_render(kind: str, content: str, rendered: str) -> None:
    assert Segment(kind=kind, content=content).render() == rendered


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        pytest.param("thought", "Thought", id="lower"),
        pytest.param("NEXTGOAL", "NextGoal", id="upper"),
        pytest.param("next_goal", "NextGoal", id="snake"),
        pytest.param("cmd", "Code", id="seed-cmd"),
    ],
)
def test_known_kinds_are_canonical(given: str, canonical: str) -> None:
    segment = Segment(kind=given, content="x")
    assert segment.kind == canonical
    assert segment_label(segment.kind) == ("Python" if canonical == "Code" else canonical)


def test_invalid_custom_kind() -> None:
    with pytest.raises(pydantic.ValidationError) as caught:
        Segment(kind="Bad Kind!", content="x")
    assert "segment kind 'Bad Kind!' is not a known kind nor a valid custom kind" in str(caught.value)


def test_segment_is_frozen_and_round_trips_json() -> None:
    segment = Segment(
        kind="Evaluation",
        content="ok ✓",
        round_index=2,
        exec_id="e2",
        parent_exec_ids=("e1",),
        tags=("error",),
        timestamp=1.5,
        sort_value=3,
        id="abc",
    )
    text = segment.to_json()
    assert text == (
        '{"content":"ok ✓","exec_id":"e2","id":"abc","kind":"Evaluation","parent_exec_ids":["e1"],'
        '"round_index":2,"sort_value":3,"tags":["error"],"timestamp":1.5}'
    )
    assert Segment.from_json(text) == segment
    with pytest.raises(pydantic.ValidationError):
        segment.content = "changed"


def test_history_rounds_follow_the_seed() -> None:
    history = SegmentHistory()
    history.add("User", "task")
    history.add("Context", "page")
    assert history.add_round(thought="t1", plan="p1", code="c1", evaluation="e1", next_goal="g1") == 1
    assert history.add_round(thought="t2", plan="p2", code="c2", evaluation="e2", next_goal="g2") == 2
    kinds = [(s.kind, s.round_index) for s in history]
    assert kinds == [
        ("User", 0),
        ("Context", 0),
        ("Thought", 1),
        ("Plan", 1),
        ("Code", 1),
        ("Evaluation", 1),
        ("NextGoal", 1),
        ("Thought", 2),
        ("Plan", 2),
        ("Code", 2),
        ("Evaluation", 2),
        ("NextGoal", 2),
    ]
    assert history.current_round == 2
    assert list(history.rounds()) == [0, 1, 2]
    last = history.last("NextGoal")
    assert last is not None and last.content == "g2"
    assert [s.content for s in history.of_kind("Plan")] == ["p1", "p2"]
    assert history.render().startswith(
        "User: task\nContext: page\nThought: t1\nPlan: p1\nPython:\nc1\nEvaluation: e1\n"
    )


def test_history_json_round_trip() -> None:
    history = SegmentHistory()
    history.add("User", "task", timestamp=1.0, id="u")
    history.add_round(thought="t", code="print(1)")
    again = SegmentHistory.from_json(history.to_json())
    assert again.segments == history.segments
    assert again.render() == history.render()
