"""Hooks and interceptors through the public API (issue 26): names in traces and errors, tools a hook injects.

Every test runs ``codeact.Agent`` against the local OpenAI-compatible server with a real subprocess
sandbox and a SQLite store; the replies are written as models write them (prose, then a code block).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeact import Agent
from codeact.engine import telemetry
from codeact.engine.agent import Hook, HookContext, HookResult, ModelCall, ToolCall
from codeact.engine.events import Event, ToolCallCompleted
from codeact.engine.replay import replay_session
from codeact.toolkits import operation, toolkit
from tests.engine.openai_server import OpenAIServer, Reply, ToolCallReply

pytestmark = pytest.mark.usefixtures("cli_home")

BLUEPRINT = """\
version: codeact.agent/v1
extend: codeact-base
id: shop
toolkits:
  - ref: system
  - ref: stock
workflow:
  maxTurns: 3
  codeact:
    thought: inline
"""


@toolkit(name="stock", description="The shop's stock")
class Stock:
    @operation
    async def count(self, sku: str) -> int:
        """Units of ``sku`` in stock."""
        return {"A-1": 3, "B-2": 7}.get(sku, 0)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    telemetry.configure(exporter=exporter)
    try:
        yield exporter
    finally:
        telemetry.reset()


def make_agent(tmp_path: Path, server: OpenAIServer, text: str = BLUEPRINT, **kwargs: Any) -> Agent:
    path = tmp_path / "agent.yaml"
    path.write_text(text)
    return Agent.from_blueprint(
        path,
        toolkits=[Stock],
        base_url=server.base_url,
        model="openai/test",
        store=f"sqlite:///{tmp_path / 's.db'}",
        **kwargs,
    )


class Audit:
    """A model interceptor with a name of its own."""

    name = "audit"

    def __init__(self) -> None:
        self.purposes: list[str] = []

    async def intercept_model(self, request: ModelCall, call_next: Callable[[ModelCall], Awaitable[Any]]) -> Any:
        self.purposes.append(request.purpose)
        return await call_next(request)


class NoB2:
    """A tool interceptor without a name: its class name labels it."""

    async def intercept_tool(self, request: ToolCall, call_next: Callable[[ToolCall], Awaitable[Any]]) -> Any:
        if request.arguments.get("sku") == "B-2":
            raise PermissionError("B-2 is reserved stock")
        return await call_next(request)


async def test_interceptor_names_label_spans_and_the_refusals_they_raise(
    tmp_path: Path, openai_server: OpenAIServer, spans: InMemorySpanExporter
) -> None:
    openai_server.push(
        "Thought: I count both SKUs.\n```python\na1 = stock.count('A-1')\ntry:\n    b2 = stock.count('B-2')\n"
        "except Exception as exc:\n    b2 = str(exc)\nsystem.finish(f'A-1: {a1}; B-2: {b2}')\n```"
    )
    events: list[Event] = []
    audit = Audit()
    async with make_agent(tmp_path, openai_server, interceptors=[audit, NoB2()]) as agent:
        result = await agent.invoke("How many A-1 and B-2?", on_event=events.append)

    assert result.answer == "A-1: 3; B-2: B-2 is reserved stock"
    assert audit.purposes == ["code"]
    refused = [e for e in events if isinstance(e, ToolCallCompleted) and e.error is not None]
    assert [(e.operation, e.error["name"], e.error["message"], e.error["data"]) for e in refused] == [
        ("count", "tool_error", "B-2 is reserved stock", {"type": "PermissionError", "interceptor": "NoB2"})
    ]
    finished = spans.get_finished_spans()
    model = [s for s in finished if s.attributes and s.attributes.get("codeact.model.purpose") == "code"]
    assert [s.attributes["codeact.interceptors"] for s in model] == [("audit",)]  # type: ignore[index]
    tools = {
        (s.attributes["codeact.toolkit"], s.attributes.get("codeact.interceptor.failed")): s.attributes[
            "codeact.interceptors"
        ]
        for s in finished
        if s.attributes and "codeact.toolkit" in s.attributes
    }
    assert tools == {("stock", None): ("NoB2",), ("stock", "NoB2"): ("NoB2",), ("system", None): ("NoB2",)}


class Redactor:
    """A model interceptor with a bug: it raises itself (not an error of the model call)."""

    async def intercept_model(self, request: ModelCall, call_next: Callable[[ModelCall], Awaitable[Any]]) -> Any:
        secrets: dict[str, str] = {}
        return await call_next(request.__class__(purpose=request.purpose, prompt=secrets["api_key"]))


async def test_a_model_interceptor_that_raises_fails_the_run_naming_it(
    tmp_path: Path, openai_server: OpenAIServer, spans: InMemorySpanExporter
) -> None:
    async with make_agent(tmp_path, openai_server, interceptors=[Audit(), Redactor()]) as agent:
        result = await agent.invoke("How many A-1?")

    assert result.status == "failed" and result.error is not None
    assert result.error == {
        "code": "interceptor.failed",
        "message": "model interceptor 'Redactor' raised KeyError: 'api_key'; fix it, or leave it out of the "
        "agent's interceptors",
    }
    assert openai_server.requests == []  # the model was never called
    model = [s for s in spans.get_finished_spans() if s.attributes and "codeact.model.purpose" in s.attributes]
    assert [(s.attributes["codeact.interceptors"], s.attributes["codeact.interceptor.failed"]) for s in model] == [  # type: ignore[index]
        (("audit", "Redactor"), "Redactor")
    ]


@toolkit(name="rates", description="Exchange rates of the day")
class Rates:
    @operation
    async def eur_to_usd(self, amount: float) -> float:
        """``amount`` euros in US dollars at today's rate."""
        return round(amount * 1.1, 2)


class Currency(Hook):
    """Gives the agent the exchange rates from its second model call on."""

    name = "currency"

    def __init__(self, tool: object = Rates) -> None:
        self.tool = tool

    async def before_model(self, ctx: HookContext) -> HookResult | None:
        if ctx.round != 2:
            return None
        return HookResult(inject_tools=[self.tool])


def sent(server: OpenAIServer, index: int) -> str:
    """Everything the model was sent in request ``index``, as one text."""
    return "\n".join(str(m.get("content")) for m in server.requests[index].body["messages"])


async def test_a_hook_injects_a_tool_the_next_model_call_sees_and_the_code_calls(
    tmp_path: Path, openai_server: OpenAIServer
) -> None:
    openai_server.push(
        "Thought: first the price in euros.\n```python\nprice = 12.5 * 2\nprint(price)\n```",
        "Thought: now I can convert it with the rates toolkit.\n```python\nusd = await rates.eur_to_usd(price)\n"
        "system.finish(f'{usd} USD')\n```",
        # The next run of the session: the tool was the first run's only.
        "Thought: is the converter still there?\n```python\ntry:\n    rates\n    there = True\nexcept NameError:\n"
        "    there = False\nsystem.finish(there)\n```",
    )
    async with make_agent(tmp_path, openai_server, hooks=[Currency()]) as agent:
        result = await agent.invoke("What do two items of 12.50 EUR cost in USD?")
        again = await agent.invoke("Can you still convert?", session_id=result.session_id)
        rounds = await agent.store.rounds(result.session_id)
        report = await replay_session(agent.store, result.session_id)

    assert result.answer == "27.5 USD"
    assert "eur_to_usd" not in sent(openai_server, 0)  # round 1: the stubs of system and stock only
    assert "class rates" in sent(openai_server, 1) and "async def eur_to_usd(self, amount: float) -> float" in sent(
        openai_server, 1
    )
    assert "class rates" not in sent(openai_server, 2)  # the next run: not injected again
    assert again.answer is False
    assert [r.edits for r in rounds] == [
        {},
        {
            "set": {},
            "removed": [],
            "by": ["currency.before_model"],
            "tools": {
                "rates": {
                    "description": "Exchange rates of the day",
                    "operations": {"eur_to_usd": {"params": ["amount"], "required": ["amount"]}},
                }
            },
        },
        {},
    ]
    assert [(c["toolkit"], c["operation"], c["result"]) for c in rounds[1].calls][:1] == [("rates", "eur_to_usd", 27.5)]
    assert report.ok, report.to_json()


async def test_react_gets_an_injected_tool_in_its_function_schemas(tmp_path: Path, openai_server: OpenAIServer) -> None:
    react = BLUEPRINT.replace("  maxTurns: 3\n  codeact:\n    thought: inline\n", "  mode: react\n  maxTurns: 3\n")
    openai_server.push(
        Reply(
            text="Let me price it first.", tool_calls=(ToolCallReply(name="stock__count", arguments={"sku": "A-1"}),)
        ),
        Reply(text="", tool_calls=(ToolCallReply(name="rates__eur_to_usd", arguments={"amount": 25}),)),
        "Two items cost 27.5 USD.",
    )
    async with make_agent(tmp_path, openai_server, react, hooks=[Currency()]) as agent:
        result = await agent.invoke("What do two items of 12.50 EUR cost in USD?")
    names = [[t["function"]["name"] for t in r.body.get("tools", ())] for r in openai_server.requests]
    assert "rates__eur_to_usd" not in names[0] and "rates__eur_to_usd" in names[1]
    assert result.answer == "Two items cost 27.5 USD."
    tool_reply = [m for m in openai_server.requests[2].body["messages"] if m["role"] == "tool"][-1]
    assert tool_reply["content"] == "27.5"


def eur_to_usd(amount: float) -> float:
    """A plain function: not a tool until it is an operation of a toolkit."""
    return amount * 1.1


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        pytest.param(
            eur_to_usd,
            "hook 'currency' (before_model) injected the function 'eur_to_usd', which is not a tool: tools are "
            "injected as toolkits, as the agent takes them; make it an @operation method of a @toolkit(name=...) "
            "class and inject the class (or an instance)",
            id="function",
        ),
        pytest.param(
            Stock,
            "hook 'currency' (before_model) injected a toolkit: this session already has a toolkit named 'stock' "
            f"({__name__}.Stock); cannot add {__name__}.Stock under the same name: rename it "
            "(@toolkit(name=...))",
            id="name-taken",
        ),
    ],
)
async def test_injecting_what_is_not_a_new_tool_fails_the_run_naming_the_hook(
    tmp_path: Path, openai_server: OpenAIServer, tool: object, message: str
) -> None:
    openai_server.push("Thought: a first step.\n```python\nprice = 25\n```")
    async with make_agent(tmp_path, openai_server, hooks=[Currency(tool)]) as agent:
        result = await agent.invoke("What do two items of 12.50 EUR cost in USD?")
    assert result.error == {"code": "hook.inject", "message": message}
