"""``workflow.mode: react``: function calling over the same toolkits, results fed back, text or finish ends it."""

from __future__ import annotations

import json

import pytest

from codeact.engine.store import Store

from .conftest import MakeAgent, of_type

REACT = """\
version: codeact.agent/v1
id: react-agent
model:
  provider: scripted
  model: {model}
instructions:
  system: You are a DevOps assistant.
toolkits:
  - ref: system
  - ref: devops
workflow:
  mode: react
  maxTurns: 3
"""


def _calls(*calls: tuple[str, dict[str, object]]) -> dict[str, object]:
    return {"tool_calls": [{"name": name, "arguments": args, "id": f"c{i}"} for i, (name, args) in enumerate(calls)]}


async def test_react_calls_tools_feeds_results_back_and_answers(make_agent: MakeAgent, sqlite_store: Store) -> None:
    built = make_agent(
        REACT,
        [
            _calls(
                ("devops__get_project_info", {"project_id": "P-123"}),
                ("devops__get_app_list", {"project_id": "P-123"}),
            ),
            "Checkout is owned by lin.wei and has 2 apps.",
        ],
    )
    events = await built.run("Who owns P-123?", session_id="s-react")

    last = events[-1]
    assert last.type == "run.completed"
    assert (last.answer, last.reason, last.rounds) == ("Checkout is owned by lin.wei and has 2 apps.", "answered", 2)  # type: ignore[attr-defined]
    first = built.script.requests[0]
    assert [m["role"] for m in first.messages] == ["system", "user"]
    second = built.script.requests[1].messages
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["function"]["name"] for c in second[2]["tool_calls"]] == [
        "devops__get_project_info",
        "devops__get_app_list",
    ]
    assert second[3]["tool_call_id"] == "c0"
    assert json.loads(second[3]["content"])["owner"] == "lin.wei"
    assert [a["id"] for a in json.loads(second[4]["content"])] == ["checkout-api", "checkout-web"]
    started = [(e.toolkit, e.operation) for e in of_type(events, "tool.call.started")]  # type: ignore[attr-defined]
    assert started == [("devops", "get_project_info"), ("devops", "get_app_list")]
    assert len(of_type(events, "tool.call.completed")) == 2
    rounds = await sqlite_store.rounds("s-react")
    assert [len(r.calls) for r in rounds] == [2, 0]
    assert rounds[0].calls[0]["result"]["owner"] == "lin.wei"


@pytest.mark.parametrize(
    ("reply", "status", "reason", "answer"),
    [
        pytest.param(
            _calls(("system__finish", {"answer": "all done"})), "run.completed", "finished", "all done", id="finish"
        ),
        pytest.param(
            _calls(("system__ask_user", {"question": "Which project?"})),
            "run.completed",
            "ask_user",
            "Which project?",
            id="ask-user",
        ),
    ],
)
async def test_react_control_operations_end_the_run(
    make_agent: MakeAgent, sqlite_store: Store, reply: dict[str, object], status: str, reason: str, answer: str
) -> None:
    built = make_agent(REACT, [reply])
    events = await built.run("go", session_id="s-react-control")

    last = events[-1]
    assert (last.type, last.reason, last.answer) == (status, reason, answer)  # type: ignore[attr-defined]
    assert len(built.script.requests) == 1
    meta = await sqlite_store.get_session("s-react-control")
    assert meta is not None
    assert meta.status == ("paused" if reason == "ask_user" else "completed")


async def test_react_tool_errors_are_fed_back_and_max_turns_ends_the_run(make_agent: MakeAgent) -> None:
    built = make_agent(REACT, [_calls(("devops__deploy_app", {"app_id": "nope", "version": "1"}))] * 3)
    events = await built.run("deploy")

    last = events[-1]
    assert last.type == "run.failed"
    assert last.error["code"] == "run.maxTurns"  # type: ignore[attr-defined]
    fed = built.script.requests[1].messages[-1]
    assert fed["role"] == "tool"
    assert json.loads(fed["content"]) == {"error": "tool_error", "message": "application 'nope' does not exist"}
