"""``system.tasks()``: the sub-agent runs a session launched, with their state (issue 36, item 3).

Real CLI (``codeact run``), real sandbox, the local OpenAI-compatible server answering each prompt by
what it asks (the parent's and the sub-agents' requests come concurrently, so no fixed order), SQLite.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codeact.toolkits.tasks import MAX_RUNNING_TASKS
from tests.engine.cli_support import cli
from tests.engine.openai_server import OpenAIServer, Reply

pytestmark = pytest.mark.usefixtures("cli_home")

PARENT = """\
version: codeact.agent/v1
id: lead
model: {provider: openai-compatible, model: openai/test-model}
toolkits: [{ref: system}]
subagents:
  stock-checker: {path: checker.yaml, description: Checks the stock of an item.}
  price-checker: {path: checker.yaml, description: Checks the price of an item.}
workflow: {mode: codeact, maxTurns: 2, codeact: {thought: 'off'}}
"""
CHECKER = """\
version: codeact.agent/v1
id: checker
model: {provider: openai-compatible, model: openai/test-model}
toolkits: [{ref: system}]
workflow: {mode: codeact, maxTurns: 1, codeact: {thought: 'off'}}
"""

BOTH = """\
import asyncio

outcomes = await asyncio.gather(
    agents.stock_checker(task="count the tents"),
    agents.price_checker(task="price the kayaks"),
    return_exceptions=True,
)
print([str(o) for o in outcomes])
del outcomes
listing = await system.tasks()
print(listing)
system.finish(listing)
"""
WHILE_RUNNING = """\
import asyncio

job = asyncio.create_task(agents.stock_checker(task="count the canoes"))
running = []
for _ in range(200):
    running = await system.tasks(state="running")
    if running:
        break
    await asyncio.sleep(0.05)
answer = await job
system.finish({"while": running, "after": await system.tasks(), "answer": answer})
"""
LEFT_RUNNING = """\
import asyncio

asyncio.create_task(agents.stock_checker(task="count the canoes"))  # never awaited: the round ends first
await asyncio.sleep(0.2)
print("started")
"""
AGAIN = 'again = await agents.stock_checker(task="count the tents")\nsystem.finish(await system.tasks())\n'


def _code(text: str) -> str:
    return f"```python\n{text}```"


def _responder(parent: str, then: str = "") -> Any:
    """Answer the parent (its system prompt shows the ``agents`` toolkit) with its program (``then`` in its next
    rounds), a sub-agent by its task."""

    def answer(body: dict[str, Any]) -> str | Reply:
        if "class agents" in str(body["messages"][0]["content"]):
            later = then and "Output:" in json.dumps(body["messages"])
            return _code(then if later else parent)
        asked = str(body["messages"][-1]["content"])
        if "count the tents" in asked:
            return _code('system.finish("12 tents")\n')
        if "price the kayaks" in asked:
            return _code('raise RuntimeError("the price list is offline")\n')
        assert "count the canoes" in asked, asked
        return Reply(text=_code('system.finish("3 canoes")\n'), delay_s=1.5)  # still running while listed

    return answer


def _run(tmp_path: Path, server: OpenAIServer, task: str, *flags: str) -> tuple[int, str, str]:
    (tmp_path / "lead.yaml").write_text(PARENT)
    (tmp_path / "checker.yaml").write_text(CHECKER)
    return cli(
        "run", str(tmp_path / "lead.yaml"), "--input", task, "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--base-url", server.base_url, "--json", *flags,
    )  # fmt: skip


def _answer(out: str) -> Any:
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    completed = [e for e in events if e["type"] == "run.completed"][-1]  # the parent's (its sub-agents' first)
    return completed["answer"]


def _session(out: str) -> str:
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return str(next(e for e in events if e["type"] == "run.started")["session_id"])


def _shape(task: dict[str, Any]) -> tuple[object, ...]:
    return task["id"], task["kind"], task["name"], task["input"], task["state"], task["answer"], task["error"]


def test_a_parent_lists_the_sub_agents_it_ran_one_completed_one_failed(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _responder(BOTH)
    rc, out, err = _run(tmp_path, openai_server, "Check the shop.", "--session", "shop-1")
    assert rc == 0, err
    listing = _answer(out)
    assert sorted(map(_shape, listing)) == [
        (
            "shop-1.price_checker.1",
            "subagent",
            "price-checker",
            "price the kayaks",
            "failed",
            None,
            "no answer after 1 rounds (workflow.maxTurns); raise workflow.maxTurns in the blueprint or make the "
            "task smaller",
        ),
        ("shop-1.stock_checker.1", "subagent", "stock-checker", "count the tents", "completed", "12 tents", None),
    ]
    for task in listing:
        assert task["started"] <= task["ended"]  # ISO 8601 times of the same day: text order is time order
        assert task["started"].endswith("+00:00")

    # The next run of the session lists them too (read from the session's record), and numbers a new
    # sub-agent session after them.
    openai_server.responder = _responder(AGAIN)
    rc, out, err = _run(tmp_path, openai_server, "Which checks ran?", "--session", "shop-1")
    assert rc == 0, err
    again = _answer(out)
    assert again[:2] == listing
    assert _shape(again[2]) == (
        "shop-1.stock_checker.2", "subagent", "stock-checker", "count the tents", "completed", "12 tents", None
    )  # fmt: skip


def test_a_sub_agent_the_code_has_not_awaited_yet_is_listed_running(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.responder = _responder(WHILE_RUNNING)
    rc, out, err = _run(tmp_path, openai_server, "Count the canoes.", "--session", "boats-1")
    assert rc == 0, err
    answer = _answer(out)
    assert [_shape(t) for t in answer["while"]] == [
        ("boats-1.stock_checker.1", "subagent", "stock-checker", "count the canoes", "running", None, None)
    ]
    assert answer["while"][0]["ended"] is None
    assert [_shape(t) for t in answer["after"]] == [
        ("boats-1.stock_checker.1", "subagent", "stock-checker", "count the canoes", "completed", "3 canoes", None)
    ]
    assert answer["answer"] == "3 canoes"


def test_a_sub_agent_the_round_leaves_running_is_cancelled(tmp_path: Path, openai_server: OpenAIServer) -> None:
    openai_server.responder = _responder(LEFT_RUNNING, then="system.finish(await system.tasks())\n")
    rc, out, err = _run(tmp_path, openai_server, "Count the canoes.", "--session", "boats-2")
    assert rc == 0, err
    [task] = _answer(out)
    assert _shape(task) == (
        "boats-2.stock_checker.1",
        "subagent",
        "stock-checker",
        "count the canoes",
        "cancelled",
        None,
        "cancelled before it ended: its call timed out, the round that started it ended, or the run stopped",
    )


FLOOD = """\
import asyncio

outcomes = await asyncio.gather(
    *[agents.stock_checker(task="count the canoes") for _ in range(40)], return_exceptions=True
)
print(sorted({str(o) for o in outcomes}))
system.finish(await system.tasks(limit=100))
"""


def test_a_gather_of_many_launches_starts_no_more_than_the_cap(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """Hostile: code that launches 40 sub-agent runs at once starts 8 (each a run: a model, a sandbox)."""
    openai_server.responder = _responder(FLOOD)  # each sub-agent answers after 1.5 s: all 8 still run
    rc, out, err = _run(tmp_path, openai_server, "Count the canoes everywhere.", "--session", "flood-1")
    assert rc == 0, err
    listing = _answer(out)
    assert len(listing) == MAX_RUNNING_TASKS == 8
    assert {_shape(t)[2:] for t in listing} == {("stock-checker", "count the canoes", "completed", "3 canoes", None)}
    printed = [e for e in map(json.loads, filter(lambda line: line.startswith("{"), out.splitlines()))]
    stdout = "".join(e.get("stdout", "") for e in printed if e["type"] == "code.completed")
    assert (
        "8 tasks this run launched are still running, the most at once; await some (gather fewer at a time) "
        "before launching more"
    ) in stdout
    asked = [r for r in openai_server.requests if "count the canoes" in json.dumps(r.body["messages"][-1])]
    assert len(asked) == 8  # the 32 refused launches never reached the model


def test_an_agent_without_sub_agents_is_not_shown_tasks(tmp_path: Path, openai_server: OpenAIServer) -> None:
    """Every operation shown is read by the model: one that launches nothing has nothing to list."""
    (tmp_path / "checker.yaml").write_text(CHECKER)
    probe = "try:\n    await system.tasks()\n    system.finish('listed')\n"
    probe += "except Exception as exc:\n    system.finish(str(exc))\n"
    openai_server.push(_code(probe))
    rc, out, err = cli(
        "run", str(tmp_path / "checker.yaml"), "--input", "Count.", "--store", f"sqlite:///{tmp_path / 's.db'}",
        "--base-url", openai_server.base_url, "--json",
    )  # fmt: skip
    assert rc == 0, err
    assert "async def tasks(" not in json.dumps(openai_server.requests[0].body["messages"])
    assert "async def finish(" in json.dumps(openai_server.requests[0].body["messages"])
    assert "tasks" in str(_answer(out)) and _answer(out) != "listed"  # refused: not granted
