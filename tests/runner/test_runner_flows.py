"""Runs through ``BlueprintRunner`` the way a host drives them: attachments, conversations,
approvals, questions and their answers, deadlines, cancellation (scripted models, real sandbox)."""

from __future__ import annotations

import asyncio
import base64

import pytest

from codeact.engine.errors import CodeactError
from codeact.engine.runner import Interactions, RunnerResult, continuation_context, session_id_for
from tests.runner.conftest import MakeRunner, code, collect, context, sent, types
from tests.runner.sdk import sdk_check

CSV = "sku,qty\nA-1,3\nB-2,0\n"


async def test_attachments_are_read_by_the_code_through_the_bridge(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code(
                """
                rows = attachments.read_text("stock.csv").splitlines()[1:]
                print(rows)
                system.finish(f"{len(rows)} rows")
                """,
                "The file is attached; I read it.",
            )
        ]
    )
    ctx = context(
        input={
            "text": "How many rows has the file?",
            "attachments": [
                {
                    "name": "stock.csv",
                    "mime_type": "text/csv",
                    "size": len(CSV),
                    "content": base64.b64encode(CSV.encode()).decode(),
                }
            ],
        }
    )
    results = await collect(runner, ctx)
    calls = [r.data for r in results if r.type == "tool.call.completed"]
    assert calls[0]["tool_name"] == "attachments.read_text" and calls[0]["result"] == {"value": CSV}
    assert results[-1].type == "run.completed"
    assert [r.data["message"]["content"] for r in results if r.type == "message.completed"][-1] == "2 rows"


async def test_the_next_message_of_a_conversation_resumes_its_session(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('total = await inventory.stock(sku="A-1")\nsystem.finish(f"{total} units")'),
            code('system.finish(f"still {total} units")', "`total` is still there from the last message."),
        ]
    )
    first = await collect(runner, context("How many A-1?", run_id="m1"))
    second = await collect(runner, context("And now?", run_id="m2"))
    assert first[0].data == {"scope": "conversation", "key": "codeact.session_id", "value": session_id_for(context())}
    assert second[0].data == first[0].data
    answers = [r.data["message"]["content"] for r in second if r.type == "message.completed"]
    assert answers[-1] == "still 3 units"
    assert [r.sequence for r in second][0] == 1  # numbering restarts per run


async def test_a_question_ends_the_run_and_the_answer_continues_the_session(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('size = None\nsystem.ask_user("Which size do you want, M or XL?")', "I need the size first."),
            code('size = "XL"\nsystem.finish(f"ordered in {size}")'),
        ]
    )
    interactions = Interactions()
    ctx = context("Order the shirt", run_id="q1")
    asked = await collect(runner, ctx, interactions=interactions)
    assert types(asked)[-3:] == ["action.requested", "message.completed", "run.completed"]
    request = asked[-3].data["payload"]
    assert request["kind"] == "form" and request["fields"][0]["id"] == "answer"
    assert asked[-1].data == {"finish_reason": "ask_user"}
    assert interactions.pending() == []
    with pytest.raises(CodeactError) as info:
        interactions.submit(request["interaction_id"], {"values": {"answer": "XL"}})
    assert info.value.code == "runner.interaction_not_found"

    answer = {"interaction_id": request["interaction_id"], "values": {"answer": "XL please"}}
    follow = continuation_context(ctx, answer, run_id="q2")
    assert follow.event.event_type == "interaction.submitted" and session_id_for(follow) == session_id_for(ctx)
    done = await collect(runner, follow)
    assert done[-1].type == "run.completed"
    assert "XL please" in sent(runner)


async def test_a_denied_approval_reaches_the_code_and_the_run_goes_on(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('order = await orders.place(sku="A-1", qty=300)'),
            code('system.finish("not ordered: " + "denied")', "The order was not approved."),
        ]
    )
    interactions = Interactions()

    async def deny(result: RunnerResult) -> None:
        if result.type == "action.requested":
            with pytest.raises(CodeactError, match="action_id"):
                interactions.submit(result.data["payload"]["interaction_id"], {"maybe": True})
            interactions.submit(
                result.data["payload"]["interaction_id"], {"action_id": "deny", "values": {"reason": "too many"}}
            )

    results = await collect(runner, context(), interactions=interactions, on_result=deny)
    completed = [r.data for r in results if r.type == "tool.call.completed"]
    assert "too many" in completed[0]["error"]
    assert results[-1].type == "run.completed"


async def test_without_interactions_an_approval_is_denied_and_logged(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('order = await orders.place(sku="A-1", qty=1)'),
            code('system.finish("could not order")', "The platform cannot approve orders here."),
        ]
    )
    results = await collect(runner, context(run_id="n1"))
    assert "action.requested" not in types(results)
    (log,) = [r for r in results if r.type == "processor.log"]
    assert log.data["level"] == "warning" and "orders.place" in log.data["text"]
    error = [r.data["error"] for r in results if r.type == "tool.call.completed"][0]
    assert "cannot wait for an approval" in error and "approval: auto" in error
    assert results[-1].type == "run.completed"
    for result in results:
        sdk_check(result)


async def test_the_deadline_stops_a_waiting_run_and_the_session_stays_resumable(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('kept = 7\nsystem.finish("noted")'),
            code('order = await orders.place(sku="A-1", qty=1)'),  # waits for an approval nobody gives
            code('system.finish(f"kept {kept}")'),
        ]
    )
    assert (await collect(runner, context("Note 7", run_id="d0")))[-1].type == "run.completed"
    interactions = Interactions()
    results = await collect(runner, context("Order one", run_id="d1", deadline_in=3), interactions=interactions)
    last = results[-1]
    assert last.type == "run.failed" and last.data["code"] == "runner.timeout" and last.data["retryable"] is True
    assert interactions.pending() == []
    meta = await runner.agent.store.get_session(session_id_for(context()))
    assert meta is not None and meta.status == "interrupted"
    again = await collect(runner, context("Go on", run_id="d2"))
    assert again[-1].type == "run.completed"
    assert [r.data["message"]["content"] for r in again if r.type == "message.completed"][-1] == "kept 7"


async def test_cancelling_the_iterating_task_stops_the_run_and_keeps_the_session(make_runner: MakeRunner) -> None:
    runner = make_runner(
        [
            code('order = await orders.place(sku="A-1", qty=1)'),
            code('system.finish("resumed after the cancel")', "The last round was interrupted; I stop here."),
        ]
    )
    interactions = Interactions()
    seen: list[str] = []

    async def consume() -> None:
        async for result in runner.run(context(run_id="c1"), run_id="c1", interactions=interactions):
            seen.append(result.type)

    task = asyncio.create_task(consume())
    while not interactions.pending():
        assert not task.done(), f"the run ended before it asked for the approval: {seen}"
        await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "run.completed" not in seen and "run.failed" not in seen
    meta = await runner.agent.store.get_session(session_id_for(context()))
    assert meta is not None and meta.status == "interrupted"
    rounds = await runner.agent.store.rounds(session_id_for(context()))
    assert [r.status for r in rounds] == ["interrupted"]
    again = await collect(runner, context("Continue", run_id="c2"))
    assert again[-1].type == "run.completed", again[-1].data
