"""The bundled DevOps demo end to end: answer, event stream, store record per round, replay."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from codeact.engine.agent import Agent, default_sandbox_factory
from codeact.engine.blueprint import AgentFactory, HostContext, load_path
from codeact.engine.events import Event, event_from_json
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.replay import replay_session
from codeact.engine.store import SQLiteStore, Store
from codeact.sandbox import SubprocessSandbox
from codeact.toolkits import ToolkitRegistry, bind_toolkit
from codeact.toolkits.builtin.system import SystemToolkit

from .conftest import ROOT, of_type

DEMO = ROOT / "examples" / "devops"
TASK = "Which login requirements of project P-123 are still open? Then deploy version 2.4.0 of its API."
ANSWER = (
    "Project Checkout has 2 open login requirements (Login with passkeys, Login audit log). "
    "Deployed checkout-api 2.4.0 as D-1001: succeeded."
)


def _demo_agent(registry: ToolkitRegistry, store: Store) -> tuple[Agent, ScriptedReplies]:
    script = ScriptedReplies.from_file(DEMO / "replies.yaml")
    client = ModelClient(ModelSettings(model=script.model, max_retries=0))
    bp = load_path(DEMO / "agent.yaml")
    bp = bp.model_copy(update={"model": bp.model.model_copy(update={"model": script.model})})  # type: ignore[union-attr]
    spec = AgentFactory().create(bp, HostContext(model_client=client, toolkit_registry=registry))
    agent = Agent(spec, model=client, store=store, registry=registry, stream=True)
    return agent, script


async def _run_demo(registry: ToolkitRegistry, store: Store, session_id: str) -> tuple[list[Event], ScriptedReplies]:
    agent, script = _demo_agent(registry, store)
    events = [e async for e in agent.run(TASK, session_id=session_id)]
    return events, script


def _replay_factory(handler: Any) -> SubprocessSandbox:
    return SubprocessSandbox(bridge=handler)


async def test_demo_answers_and_streams_well_formed_events(registry: ToolkitRegistry, store: Store) -> None:
    events, script = await _run_demo(registry, store, "demo-events")

    assert script.remaining == 0
    assert events[0].type == "run.started"
    assert events[0].sequence == 1
    assert events[-1].type == "run.completed"
    assert events[-1].answer == ANSWER  # type: ignore[attr-defined]
    assert events[-1].reason == "finished"  # type: ignore[attr-defined]
    assert events[-1].rounds == 5  # type: ignore[attr-defined]
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert len({e.run_id for e in events}) == 1
    assert [e.type for e in events].count("run.started") == 1
    # Every event survives its JSON form (the --json wire schema).
    for event in events:
        data = event.to_json()
        assert {"type", "run_id", "sequence", "timestamp"} <= set(data)
        assert event_from_json(data) == event
    assert [e.round for e in of_type(events, "round.started")] == [1, 2, 3, 4, 5]  # type: ignore[attr-defined]

    # Tool calls: a started/completed pair per call id, started first, in the same round.
    started = {e.call_id: e for e in of_type(events, "tool.call.started")}  # type: ignore[attr-defined]
    completed = {e.call_id: e for e in of_type(events, "tool.call.completed")}  # type: ignore[attr-defined]
    assert started.keys() == completed.keys()
    assert len(started) == 7
    for call_id, begin in started.items():
        end = completed[call_id]
        assert begin.sequence < end.sequence
        assert (begin.toolkit, begin.operation, begin.round) == (end.toolkit, end.operation, end.round)  # type: ignore[attr-defined]
    first = [e.operation for e in of_type(events, "tool.call.started") if e.round == 1]  # type: ignore[attr-defined]
    assert sorted(first) == ["get_app_list", "get_project_info"]

    # The failing round: the error is reported on the line of the MODEL's code.
    code_done = of_type(events, "code.completed")
    assert [e.status for e in code_done] == ["ok", "ok", "error", "ok", "ok"]  # type: ignore[attr-defined]
    error = code_done[2].error  # type: ignore[attr-defined]
    assert error["type"] == "ToolError"
    assert error["message"] == "application 'checkout' does not exist"
    assert error["line"] == 1
    assert error["program_line"] > 1
    failed_call = [e for e in of_type(events, "tool.call.completed") if e.round == 3]  # type: ignore[attr-defined]
    assert failed_call[0].error["name"] == "tool_error"  # type: ignore[attr-defined]

    # Streaming: the deltas of each model call add up to its message.completed text.
    for done in of_type(events, "message.completed"):
        deltas = [
            e.text  # type: ignore[attr-defined]
            for e in of_type(events, "message.delta")
            if e.round == done.round and e.purpose == done.purpose  # type: ignore[attr-defined]
        ]
        assert "".join(deltas) == done.text  # type: ignore[attr-defined]
    assert len(of_type(events, "message.completed")) == 5

    # Inline thought mode: one Thought segment per round, before its Code.
    kinds = [(e.segment["kind"], e.round) for e in of_type(events, "segment.created")]  # type: ignore[attr-defined]
    assert kinds[0] == ("User", 0)
    for n in range(1, 6):
        assert [k for k, r in kinds if r == n] == ["Thought", "Code", "Evaluation"]


async def test_demo_records_every_round_and_replays(registry: ToolkitRegistry, store: Store) -> None:
    events, _ = await _run_demo(registry, store, "demo-store")
    assert events[-1].type == "run.completed"

    meta = await store.get_session("demo-store")
    assert meta is not None
    assert (meta.status, meta.rounds, meta.blueprint_id) == ("completed", 5, "devops-demo")
    # every system operation but tasks: an agent with no sub-agents launches nothing to list
    system = [op for op in bind_toolkit(SystemToolkit).operations if op != "tasks"]
    assert meta.extra["grants"] == {"system": system, "devops": "*"}
    assert meta.extra["sandbox"]["backend"] == "subprocess"

    rounds = await store.rounds("demo-store")
    assert [r.index for r in rounds] == [1, 2, 3, 4, 5]
    assert [[(c["toolkit"], c["operation"]) for c in r.calls] for r in rounds] == [
        [("devops", "get_project_info"), ("devops", "get_app_list")],
        [("devops", "search_requirements")],
        [("devops", "deploy_app")],
        [("devops", "deploy_app"), ("devops", "get_deploy_status")],
        [("system", "finish")],
    ]
    assert all(r.code is not None and r.reply and r.prompt_hash for r in rounds)
    assert "devops.get_project_info" in rounds[0].code  # type: ignore[operator]
    assert rounds[0].stdout == "Checkout (owner lin.wei): apps ['checkout-api', 'checkout-web']\n"
    assert rounds[2].status == "error"
    assert rounds[2].error is not None and rounds[2].error["type"] == "ToolError"
    assert rounds[2].calls[0]["error"]["message"] == "application 'checkout' does not exist"
    assert rounds[3].stdout == "checkout-api 2.3.1 -> 2.4.0: succeeded (D-1001)\n"
    assert rounds[4].control == {"kind": "finish", "answer": ANSWER}
    # The variable from round 1 is still in round 4's state (used there).
    assert {"project", "apps"} <= set(rounds[0].variables)
    assert rounds[3].variables["apps"] == rounds[0].variables["apps"]
    assert {"project", "apps", "open_reqs", "api", "deployment", "status", "titles"} <= set(rounds[4].variables)
    assert await store.variables("demo-store") == rounds[4].variables
    # Segments: the user's input, then per round Thought, Code, Evaluation.
    segments = await store.segments("demo-store")
    assert [s["kind"] for s in segments] == ["User"] + ["Thought", "Code", "Evaluation"] * 5
    assert "line 1 of your code" in segments[9]["content"]

    report = await replay_session(store, "demo-store", sandbox_factory=_replay_factory, registry=registry)
    assert report.ok, report.to_json()
    assert [(r.index, r.status) for r in report.rounds] == [(i, "match") for i in range(1, 6)]


async def test_replay_reports_a_tampered_call_result(registry: ToolkitRegistry, sqlite_store: Store) -> None:
    events, _ = await _run_demo(registry, sqlite_store, "demo-tamper")
    assert events[-1].type == "run.completed"
    # Rewrite round 2's recorded search result in the SQLite file: R-4 is now done.
    record = await sqlite_store.round("demo-tamper", 2)
    assert record is not None
    calls = [dict(c) for c in record.calls]
    calls[0]["result"] = [{**r, "status": "done"} if r["id"] == "R-4" else r for r in calls[0]["result"]]
    tampered = dataclasses.replace(record, calls=tuple(calls))
    _rewrite_round(sqlite_store, tampered)

    report = await replay_session(sqlite_store, "demo-tamper", sandbox_factory=_replay_factory, registry=registry)
    assert not report.ok
    statuses = {r.index: r.status for r in report.rounds}
    assert statuses[2] == "mismatch"
    assert statuses[1] == "match"
    diffs = report.rounds[1].differences
    assert any(d.startswith("stdout: recorded ") for d in diffs), diffs
    assert "variables: 'open_reqs' differs" in diffs


def _rewrite_round(store: Store, record: Any) -> None:
    import json
    import sqlite3

    assert isinstance(store, SQLiteStore)
    with sqlite3.connect(store.path) as db:
        db.execute(
            "UPDATE rounds SET record = ? WHERE session_id = ? AND idx = ?",
            (json.dumps(record.to_json()), record.session_id, record.index),
        )


@pytest.mark.parametrize("backend", [pytest.param("subprocess", id="subprocess")])
async def test_default_sandbox_factory_builds_the_declared_backend(backend: str, registry: ToolkitRegistry) -> None:
    script = ScriptedReplies([])
    client = ModelClient(ModelSettings(model=script.model))
    bp = load_path(DEMO / "agent.yaml")
    spec = AgentFactory().create(bp, HostContext(model_client=client, toolkit_registry=registry))
    sandbox = default_sandbox_factory(backend=backend)(None, spec)  # type: ignore[arg-type]
    try:
        assert sandbox.backend == backend
        assert sandbox.policy.restricted
    finally:
        await sandbox.aclose()
