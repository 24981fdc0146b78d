"""Fixtures for the flow tests: react/codeact agents over scripted models, one SQLite store per test.

``agent(name, replies)`` builds a react agent (no sandbox: fast) whose scripted replies are
``replies``; ``codeact_agent(name, replies)`` one that runs code in the real subprocess sandbox.
Each agent has its own script, so concurrent branches never take each other's replies.
"""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.agent import Agent
from codeact.engine.blueprint import AgentFactory, HostContext, load_text
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import SQLiteStore, Store
from codeact.toolkits import ToolkitRegistry, operation, toolkit

REACT = """\
version: codeact.agent/v1
id: {name}
name: {title}
model: {{provider: scripted, model: "{model}"}}
instructions:
  system: {system}
toolkits: [{{ref: system}}, {{ref: meet}}]
workflow: {{mode: react, maxTurns: 4}}
"""
CODEACT = """\
version: codeact.agent/v1
id: {name}
name: {title}
model: {{provider: scripted, model: "{model}"}}
instructions:
  system: {system}
toolkits: [{{ref: system}}, {{ref: meet}}]
workflow: {{mode: codeact, maxTurns: 4, codeact: {{thought: "off"}}}}
"""


@toolkit(name="meet", description="A rendezvous: calls wait until the expected number of callers arrived")
class Meet:
    """Branches that must overlap in time call ``meet.wait``; nothing returns until all arrived."""

    def __init__(self) -> None:
        self.expected = 2
        self.arrived = 0
        self.ready = asyncio.Event()

    @operation(timeout=20)
    async def wait(self, who: str) -> str:
        """Wait for the others.

        Args:
            who: The caller.
        """
        self.arrived += 1
        if self.arrived >= self.expected:
            self.ready.set()
        await asyncio.wait_for(self.ready.wait(), 15)
        return f"{who} met the others"


@pytest.fixture
def meet() -> Meet:
    return Meet()


@pytest.fixture
def registry(meet: Meet) -> ToolkitRegistry:
    reg = ToolkitRegistry.from_entry_points()
    reg.register(meet)
    return reg


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = SQLiteStore(tmp_path / "sessions.db")
    yield opened
    await opened.close()


MakeAgent = Callable[..., Agent]


@pytest.fixture
def agent(registry: ToolkitRegistry, store: Store) -> Callable[..., Agent]:
    """``agent(name, replies, system=..., kind="react")`` -> an Agent on its own script (``agent.script``)."""

    def build(
        name: str,
        replies: Sequence[str | Mapping[str, Any]],
        *,
        system: str = "You help.",
        title: str | None = None,
        kind: str = "react",
        on: Store | None = None,
    ) -> Agent:
        script = ScriptedReplies([textwrap.dedent(r).strip("\n") if isinstance(r, str) else r for r in replies])
        client = ModelClient(ModelSettings(model=script.model, max_retries=0))
        template = REACT if kind == "react" else CODEACT
        text = template.format(
            name=name, title=title or f"The {name} agent", model=script.model, system=_quoted(system)
        )
        spec = AgentFactory().create(load_text(text), HostContext(model_client=client, toolkit_registry=registry))
        built = Agent(spec, model=client, store=on if on is not None else store, registry=registry, stream=False)
        built.script = script  # type: ignore[attr-defined]  # keeps the script alive, for assertions
        return built

    return build


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def code(source: str) -> str:
    """A codeact reply holding ``source`` in a fenced block."""
    return "```python\n" + textwrap.dedent(source).strip("\n") + "\n```"


def types(events: Sequence[Any]) -> list[str]:
    return [e.type for e in events]
