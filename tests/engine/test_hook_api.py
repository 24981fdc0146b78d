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
from codeact.engine.agent import ModelCall, ToolCall
from codeact.engine.events import Event, ToolCallCompleted
from codeact.toolkits import operation, toolkit
from tests.engine.openai_server import OpenAIServer

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
