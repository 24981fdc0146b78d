"""The loop's side of cut-off replies (scripted model, chat protocol, in process): how continuations are joined."""

from __future__ import annotations

from codeact.engine.store import Store

from .conftest import MakeAgent, code, of_type

FINISH = code("system.finish(total)")


async def test_a_reopened_fence_is_dropped_when_the_rest_is_joined(make_agent: MakeAgent, sqlite_store: Store) -> None:
    built = make_agent(
        replies=[
            {"text": "```python\nrows = [1, 2,", "finish_reason": "length"},
            "```python\n 3]\ntotal = sum(rows)\n```",
            FINISH,
        ]
    )
    events = await built.run("sum", session_id="c1")
    assert events[-1].answer == 6  # type: ignore[attr-defined]
    started = of_type(events, "code.started")[0]
    assert started.code == "rows = [1, 2, 3]\ntotal = sum(rows)"  # type: ignore[attr-defined]
    record = await sqlite_store.round("c1", 1)
    assert record is not None and record.usage["code"]["continuations"] == 1


async def test_a_continuation_that_starts_over_replaces_the_partial_reply(make_agent: MakeAgent) -> None:
    built = make_agent(
        replies=[
            {"text": "```python\nseen = 'partial'\nrows = [1, 2,", "finish_reason": "length"},
            "```python\nrows = [1, 2, 3]\ntotal = sum(rows)\n```",
            FINISH,
        ]
    )
    events = await built.run("sum", session_id="c2")
    assert events[-1].answer == 6  # type: ignore[attr-defined]
    assert of_type(events, "code.started")[0].code == "rows = [1, 2, 3]\ntotal = sum(rows)"  # type: ignore[attr-defined]
    request = built.script.requests[1]
    assert request.messages[-2] == {"role": "assistant", "content": "```python\nseen = 'partial'\nrows = [1, 2,"}
