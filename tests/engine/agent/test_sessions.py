"""Sessions: pause on ask_user and resume (also on "another machine"), one run per session at a time."""

from __future__ import annotations

import asyncio

import pytest

from codeact.engine.store import Store

from .conftest import BASE, MakeAgent, Probe, code, of_type, segments_of, sent_text

ASK = code(
    """
    limit = 3
    system.ask_user("Which project?")
    print("not reached")
    """
)


@pytest.mark.parametrize("new_agent", [pytest.param(False, id="same-agent"), pytest.param(True, id="new-agent")])
async def test_ask_user_pauses_and_the_session_resumes_with_history_and_variables(
    make_agent: MakeAgent, store: Store, new_agent: bool
) -> None:
    later = [
        code('project = "P-123"\nreqs = devops.search_requirements(project, "login")[:limit]'),
        code("system.finish([r['id'] for r in reqs])"),
    ]
    first = make_agent(replies=[ASK] if new_agent else [ASK, *later], store=store)
    result = await first.agent.invoke("List the login requirements", session_id="s-resume")

    assert (result.status, result.reason, result.answer, result.rounds) == ("paused", "ask_user", "Which project?", 1)
    assert result.session_id == "s-resume"
    meta = await store.get_session("s-resume")
    assert meta is not None and (meta.status, meta.rounds) == ("paused", 1)
    record = await store.round("s-resume", 1)
    assert record is not None
    assert record.control == {"kind": "ask_user", "question": "Which project?"}
    assert record.stdout == ""
    assert await store.variables("s-resume") == {"limit": 3}

    # The answer is a new run on the same session; "another machine" is a new Agent, model and sandbox.
    second = make_agent(replies=later, store=store) if new_agent else first
    asked = len(second.script.requests)
    events = await second.run("P-123", session_id="s-resume")

    assert events[0].type == "run.started"
    assert events[0].resumed is True  # type: ignore[attr-defined]
    assert events[-1].type == "run.completed"
    assert events[-1].answer == ["R-1", "R-2", "R-4"]  # type: ignore[attr-defined]
    assert events[-1].rounds == 3  # type: ignore[attr-defined]
    assert [e.round for e in of_type(events, "round.started")] == [2, 3]  # type: ignore[attr-defined]
    # History: the first prompt of this run shows both user messages and round 1's question.
    prompt = sent_text(second.script.requests[asked])
    assert "List the login requirements" in prompt
    assert "P-123" in prompt
    assert "limit" in prompt
    assert [s["content"] for s in segments_of(events, "User")] == ["P-123"]
    rounds = await store.rounds("s-resume")
    assert [r.index for r in rounds] == [1, 2, 3]
    assert rounds[1].variables["limit"] == 3
    segments = await store.segments("s-resume")
    assert [s["content"] for s in segments if s["kind"] == "User"] == ["List the login requirements", "P-123"]
    meta = await store.get_session("s-resume")
    assert meta is not None and (meta.status, meta.rounds) == ("completed", 3)


async def test_a_continued_session_s_result_counts_the_run_s_own_rounds(make_agent: MakeAgent, store: Store) -> None:
    """``RunResult.rounds`` is what this run did; the session's total is ``session_rounds`` (issue 35)."""
    later = [
        code('project = "P-123"\nreqs = devops.search_requirements(project, "login")[:limit]'),
        code("system.finish([r['id'] for r in reqs])"),
    ]
    made = make_agent(replies=[ASK, *later], store=store)
    first = await made.agent.invoke("List the login requirements", session_id="s-count")
    second = await made.agent.invoke("P-123", session_id="s-count")
    assert (first.rounds, first.session_rounds) == (1, 1)
    assert (second.status, second.rounds, second.session_rounds) == ("completed", 2, 3)


async def test_a_second_run_on_a_busy_session_fails_cleanly(make_agent: MakeAgent, store: Store, probe: Probe) -> None:
    blueprint = BASE.replace("  - ref: devops", "  - ref: probe")
    first = make_agent(blueprint, [code("got = probe.block()\nsystem.finish(got)")], store=store)
    second = make_agent(blueprint, [code("system.finish('second')")], store=store)

    running = asyncio.create_task(first.run("block", session_id="s-busy"))
    await asyncio.wait_for(probe.entered.wait(), 30)
    events = await second.run("again", session_id="s-busy")

    assert [e.type for e in events] == ["run.started", "run.failed"]
    assert [e.sequence for e in events] == [1, 2]
    failed = events[-1]
    assert failed.error["code"] == "store.session_busy"  # type: ignore[attr-defined]
    assert failed.retryable is True  # type: ignore[attr-defined]
    assert events[0].resumed is True  # type: ignore[attr-defined]
    assert failed.error["message"].startswith("session 's-busy' is in use by another run (lock held until ")  # type: ignore[attr-defined]
    assert "); wait or use another --session, or if that run is gone, force it with " in failed.error["message"]  # type: ignore[attr-defined]
    assert second.script.requests == []
    # The busy run did not touch the session the first run is using.
    meta = await store.get_session("s-busy")
    assert meta is not None and meta.status == "active"

    probe.release.set()
    first_events = await asyncio.wait_for(running, 30)
    assert first_events[-1].type == "run.completed"
    assert first_events[-1].answer == "released"  # type: ignore[attr-defined]
    meta = await store.get_session("s-busy")
    assert meta is not None and (meta.status, meta.rounds) == ("completed", 1)


def test_run_sync_returns_the_result(make_agent: MakeAgent) -> None:
    built = make_agent(replies=[code("system.finish(6 * 7)")])
    seen: list[str] = []
    result = built.agent.run_sync("answer", session_id="s-sync", on_event=lambda e: seen.append(e.type))

    assert (result.status, result.answer, result.reason, result.rounds) == ("completed", 42, "finished", 1)
    assert result.session_id == "s-sync"
    assert seen[0] == "run.started" and seen[-1] == "run.completed"
