"""Fixtures for the agent runtime tests: toolkits, stores (SQLite file and real Redis), an agent builder.

``make_agent(blueprint_yaml, replies, ...)`` builds an :class:`~codeact.engine.agent.Agent` the way the CLI
does (loader -> factory -> agent) over a scripted model, the real subprocess sandbox (bubblewrap)
and the test's store. ``{model}`` in the YAML is replaced by the scripted model's name.
"""

from __future__ import annotations

import asyncio
import textwrap
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from codeact.engine.agent import Agent, SandboxFactory
from codeact.engine.blueprint import AgentFactory, HostContext, load_text
from codeact.engine.events import Event
from codeact.engine.model import ModelClient, ModelSettings, ScriptedReplies
from codeact.engine.store import SQLiteStore, Store
from codeact.toolkits import ToolkitRegistry, load_toolkit_ref, operation, toolkit

ROOT = Path(__file__).resolve().parents[3]
DEVOPS_REF = f"{ROOT / 'examples' / 'devops' / 'toolkit.py'}:DevOps"

BASE = """\
version: codeact.agent/v1
extend: codeact-base
id: test-agent
model:
  provider: scripted
  model: {model}
toolkits:
  - ref: system
  - ref: devops
workflow:
  maxTurns: 6
  codeact:
    thought: "off"
"""


@toolkit(name="probe", description="Test probe: records calls, fails or blocks on request")
class Probe:
    """A toolkit whose calls a test can observe and control."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    @operation
    async def record(self, value: Any) -> str:
        """Remember ``value``.

        Args:
            value: Anything.
        """
        self.calls.append(("record", value))
        return f"recorded {value!r}"

    @operation
    async def fail(self, message: str) -> str:
        """Always fails with ``message``.

        Args:
            message: The error message.
        """
        self.calls.append(("fail", message))
        raise ValueError(message)

    @operation(timeout=60)
    async def block(self) -> str:
        """Waits until the test releases it."""
        self.calls.append(("block", None))
        self.entered.set()
        await self.release.wait()
        return "released"


@pytest.fixture
def probe() -> Probe:
    """The probe toolkit instance registered in ``registry``."""
    return Probe()


@pytest.fixture
def registry(probe: Probe) -> ToolkitRegistry:
    """``system`` (entry points), the example DevOps toolkit and the probe."""
    reg = ToolkitRegistry.from_entry_points()
    reg.register(load_toolkit_ref(DEVOPS_REF))
    reg.register(probe)
    return reg


async def drop_prefix(url: str, prefix: str) -> None:
    """Delete every key under ``prefix`` (test clean-up)."""
    import redis.asyncio

    client = redis.asyncio.Redis.from_url(url)
    try:
        keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=500)]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()  # type: ignore[attr-defined]


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    """A SQLite store in a fresh file."""
    store = SQLiteStore(tmp_path / "sessions.db")
    yield store
    await store.close()


@pytest.fixture
async def redis_store(redis_url: str) -> AsyncIterator[Store]:
    """A store on the real Redis under a prefix of its own (removed afterwards)."""
    from codeact.engine.store import open_store

    prefix = f"codeact-agent-test-{uuid.uuid4().hex[:12]}"
    store = open_store(f"{redis_url}?prefix={prefix}")
    yield store
    await store.close()
    await drop_prefix(redis_url, prefix)


@pytest.fixture(params=[pytest.param("sqlite", id="sqlite"), pytest.param("redis", id="redis")])
def store(request: pytest.FixtureRequest) -> Store:
    """Both store backends."""
    value: Store = request.getfixturevalue(f"{request.param}_store")
    return value


@dataclass
class Built:
    """An agent and the script it runs on."""

    agent: Agent
    script: ScriptedReplies
    events: list[Event] = field(default_factory=list)

    async def run(self, text: str, *, session_id: str | None = None) -> list[Event]:
        """Run to the end; returns (and keeps) the events."""
        events: list[Event] = []
        async for event in self.agent.run(text, session_id=session_id):
            events.append(event)
        self.events = events
        return events


MakeAgent = Callable[..., Built]


@pytest.fixture
def make_agent(registry: ToolkitRegistry, sqlite_store: Store) -> MakeAgent:
    """Build an agent from blueprint YAML (``{model}`` substituted) and scripted replies."""
    keep: list[ScriptedReplies] = []

    def build(
        blueprint: str = BASE,
        replies: Sequence[str | Mapping[str, Any]] = (),
        *,
        store: Store | None = None,
        allow_sandbox_declaration: bool = False,
        model: ModelClient | None = None,
        script: ScriptedReplies | None = None,
        sandbox_factory: SandboxFactory | None = None,
        **kwargs: Any,
    ) -> Built:
        script = script if script is not None else ScriptedReplies([_dedent(r) for r in replies])
        keep.append(script)
        client = model or ModelClient(ModelSettings(model=script.model, max_retries=0))
        bp = load_text(textwrap.dedent(blueprint).replace("{model}", script.model), base_dir=ROOT)
        spec = AgentFactory().create(
            bp,
            HostContext(
                model_client=client,
                toolkit_registry=registry,
                allow_sandbox_declaration=allow_sandbox_declaration,
            ),
        )
        kwargs.setdefault("stream", False)
        agent = Agent(
            spec,
            model=client,
            store=store if store is not None else sqlite_store,
            registry=registry,
            sandbox_factory=sandbox_factory,
            **kwargs,
        )
        return Built(agent=agent, script=script)

    return build


def _dedent(reply: str | Mapping[str, Any]) -> str | Mapping[str, Any]:
    if isinstance(reply, str):
        return textwrap.dedent(reply).strip("\n")
    if isinstance(reply.get("text"), str):
        return {**reply, "text": textwrap.dedent(reply["text"]).strip("\n")}
    return reply


def code(source: str) -> str:
    """A reply holding ``source`` in a fenced Python block."""
    return "```python\n" + textwrap.dedent(source).strip("\n") + "\n```"


def of_type(events: Sequence[Event], kind: str) -> list[Event]:
    """The events of one ``type``."""
    return [e for e in events if e.type == kind]


def segments_of(events: Sequence[Event], kind: str) -> list[dict[str, Any]]:
    """The ``segment.created`` payloads of one segment kind."""
    return [e.segment for e in events if e.type == "segment.created" and e.segment["kind"] == kind]  # type: ignore[attr-defined]


def sent_text(request: Any) -> str:
    """Everything a scripted request carried, as one string."""
    return "\n".join(str(m.get("content", "")) for m in request.messages)
