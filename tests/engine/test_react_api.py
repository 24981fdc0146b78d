"""``workflow.mode: react`` through the public API (issue 26): knowledge in its system message, its text to the host.

Each test runs ``codeact.Agent`` (or ``codeact run``) against the local OpenAI-compatible server; the
replies are written as function-calling models write them (a line of prose beside the tool calls, then
the answer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from codeact import Agent
from codeact.engine.cli import app
from codeact.engine.events import Event, MessageCompleted, SegmentCreated
from codeact.engine.runner import ResultMapper
from codeact.toolkits import operation, toolkit
from tests.engine.openai_server import OpenAIServer, Reply, ToolCallReply

pytestmark = pytest.mark.usefixtures("cli_home")

REACT = """\
version: codeact.agent/v1
id: shop-react
model: {provider: openai-compatible, model: openai/test-model}
instructions:
  system: You answer questions of the shop's customers.
toolkits:
  - ref: system
  - ref: stock
workflow: {mode: react, maxTurns: 3}
knowledge:
  - text: "Never issue a refund above 500 EUR without a manager's approval."
    kind: constraint
  - file: returns.md
"""
RETURNS = """\
# Refunds

A refund goes back to the original payment method within 5 business days.
"""
RULE = "Never issue a refund above 500 EUR without a manager's approval."
REFUND_FACT = "A refund goes back to the original payment method within 5 business days."


@toolkit(name="stock", description="The shop's stock")
class Stock:
    @operation
    async def count(self, sku: str) -> int:
        """Units of ``sku`` in stock."""
        return {"A-1": 3}.get(sku, 0)


@pytest.fixture
def blueprint(tmp_path: Path) -> Path:
    (tmp_path / "returns.md").write_text(RETURNS)
    path = tmp_path / "agent.yaml"
    path.write_text(REACT)
    return path


def _system(server: OpenAIServer, index: int = -1) -> str:
    messages = server.requests[index].body["messages"]
    assert messages[0]["role"] == "system"
    return str(messages[0]["content"])


def test_react_gets_the_knowledge_chosen_for_its_task(
    tmp_path: Path, openai_server: OpenAIServer, blueprint: Path
) -> None:
    openai_server.push("Refunds reach your card within 5 business days.", "We ship to every EU country within 2 days.")
    store = f"sqlite:///{tmp_path / 's.db'}"
    for task, session in (("How long does a refund take?", "s-refund"), ("Do you ship to Malta?", "s-ship")):
        result = CliRunner().invoke(
            app,
            ["run", str(blueprint), "--input", task, "--store", store, "--session", session,
             "--base-url", openai_server.base_url, "--toolkit", f"{__name__}:Stock", "--json"],
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr

    refund, ship = _system(openai_server, 0), _system(openai_server, 1)
    assert refund.startswith("You answer questions of the shop's customers.\n\n## Knowledge\n")
    assert f"- {RULE}" in refund and f"- {RULE}" in ship  # constraints: every task
    assert REFUND_FACT in refund and "From the agent's knowledge, relevant to this task:" in refund
    assert REFUND_FACT not in ship  # domain knowledge: only for the task it matches
    # The domain knowledge is the run's recorded Knowledge segment, not a message of the conversation.
    roles = [m["role"] for m in openai_server.requests[0].body["messages"]]
    assert roles == ["system", "user"]
    lines = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    kinds = [e["segment"]["kind"] for e in lines if e["type"] == "segment.created"]
    assert "Knowledge" not in kinds  # the shipping task matched nothing


async def test_react_text_reaches_the_host_without_show_work(
    tmp_path: Path, openai_server: OpenAIServer, blueprint: Path
) -> None:
    said = "Let me check the stock of A-1 for you."
    openai_server.push(
        Reply(text=said, tool_calls=(ToolCallReply(name="stock__count", arguments={"sku": "A-1"}, id="c1"),)),
        "There are 3 units of A-1 in stock.",
    )
    events: list[Event] = []
    async with Agent.from_blueprint(
        blueprint, toolkits=[Stock], base_url=openai_server.base_url, store=f"sqlite:///{tmp_path / 's.db'}"
    ) as agent:
        result = await agent.invoke("How many A-1 are left?", on_event=events.append)

    assert result.answer == "There are 3 units of A-1 in stock."
    express = [e.text for e in events if isinstance(e, MessageCompleted) and e.purpose == "express"]
    assert express == [said]
    segments = [e.segment for e in events if isinstance(e, SegmentCreated) and e.segment["kind"] == "Express"]
    assert [s["content"] for s in segments] == [said, "There are 3 units of A-1 in stock."]
    assert result.messages[-2:] == [
        {"role": "assistant", "content": said},
        {"role": "assistant", "content": "There are 3 units of A-1 in stock."},
    ]
    # A chat host (a runner without show_work) gets the text as a message, then the answer.
    mapper = ResultMapper("r1", show_work=False)
    results = [r for e in events for r in mapper.map(e)]
    messages: list[tuple[Any, Any]] = [
        (r.data["message"]["provider_specific_fields"]["purpose"], r.data["message"]["content"])
        for r in results
        if r.type == "message.completed"
    ]
    assert messages == [("message", said), ("answer", "There are 3 units of A-1 in stock.")]
    assert not [r for r in results if r.type == "message.delta"]


@pytest.mark.parametrize(
    "written",
    [
        pytest.param('```json\n{\n  "name": "stock__count",\n  "arguments": {"sku": "A-1"}\n}\n```', id="json-fence"),
        pytest.param('<tool_call>\n{"name": "stock__count", "arguments": {"sku": "A-1"}}\n</tool_call>', id="tags"),
    ],
)
async def test_a_tool_call_written_as_text_is_called(
    tmp_path: Path, openai_server: OpenAIServer, blueprint: Path, written: str
) -> None:
    """Qwen2.5-Coder-1.5B on llama.cpp wrote each call as text, and react took it for the answer (issue 29)."""
    openai_server.push(written, "There are 3 units of A-1 in stock.")
    async with Agent.from_blueprint(
        blueprint, toolkits=[Stock], base_url=openai_server.base_url, store=f"sqlite:///{tmp_path / 's.db'}"
    ) as agent:
        result = await agent.invoke("How many A-1 are left?")
    assert result.answer == "There are 3 units of A-1 in stock."
    second = openai_server.requests[-1].body["messages"]
    [call] = second[-2]["tool_calls"]  # sent back as the function call it was
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("stock__count", {"sku": "A-1"})
    assert second[-1] == {"role": "tool", "tool_call_id": call["id"], "content": "3"}


async def test_text_that_only_looks_like_a_call_stays_the_answer(
    tmp_path: Path, openai_server: OpenAIServer, blueprint: Path
) -> None:
    """An unknown name, or JSON with prose around it, is an answer as before."""
    unknown = '```json\n{"name": "stock__delete", "arguments": {"sku": "A-1"}}\n```'
    prose = 'Here is the call: {"name": "stock__count", "arguments": {"sku": "A-1"}}'
    openai_server.push(unknown, prose)
    async with Agent.from_blueprint(
        blueprint, toolkits=[Stock], base_url=openai_server.base_url, store=f"sqlite:///{tmp_path / 's.db'}"
    ) as agent:
        first = await agent.invoke("Delete A-1?")
        second = await agent.invoke("Count A-1?")
    assert (first.answer, second.answer) == (unknown, prose)


async def test_a_refused_call_comes_back_with_how_to_call_it(
    tmp_path: Path, openai_server: OpenAIServer, blueprint: Path
) -> None:
    """The 1.5B sent ``dna_sequence=4`` three turns running on the error alone (issue 39): the tool message
    carries the operation's signature and one correct call, as CodeAct's Evaluation does."""
    wrong = ToolCallReply(name="stock__count", arguments={"sku": 4}, id="c1")
    right = ToolCallReply(name="stock__count", arguments={"sku": "A-1"}, id="c2")
    openai_server.push(Reply(tool_calls=(wrong,)), Reply(tool_calls=(right,)), "There are 3 units of A-1 in stock.")
    async with Agent.from_blueprint(
        blueprint, toolkits=[Stock], base_url=openai_server.base_url, store=f"sqlite:///{tmp_path / 's.db'}"
    ) as agent:
        result = await agent.invoke("How many A-1 are left?")
    assert result.answer == "There are 3 units of A-1 in stock."
    refused = json.loads(openai_server.requests[1].body["messages"][-1]["content"])
    assert "invalid arguments for stock.count" in refused["message"]
    assert "stock.count(sku: str) -> int" in refused.get("how_to_call", ""), refused
    assert "A correct call" in refused["how_to_call"]
    # A call that was not refused by the argument check has no such note.
    assert openai_server.requests[2].body["messages"][-1]["content"] == "3"
