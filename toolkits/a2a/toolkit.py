"""Remote A2A agents as the operations of one toolkit (like sub-agents, over the network).

A blueprint entry ``{ref: agents, a2a: {agents: {reviewer: "http://host:9999"}}}`` fetches each
agent card when the toolkit is registered (its name and description become the operation's
docstring); calling ``await agents.reviewer(task="...")`` sends the task as a streaming A2A
message, forwards the agent's status updates to the host as ``a2a.update`` events, and returns the
final answer (the text of its artifacts, or data when it sent data). A failed, rejected or
cancelled task is a tool error in the code.
"""

from __future__ import annotations

import difflib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from codeact.toolkits.context import ToolkitContext
from codeact.toolkits.dynamic import DynamicToolkit
from codeact.toolkits.errors import ToolkitLoadError
from codeact.toolkits.spec import OperationSpec

__all__ = ["A2AToolkit", "a2a_problems"]

DEFAULT_TIMEOUT = 300.0
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def a2a_problems(data: object) -> list[str]:
    """What is wrong with a blueprint's ``a2a:`` mapping (empty when valid)."""
    if not isinstance(data, Mapping):
        return ["a2a must be a map: {agents: {NAME: URL of the agent card's server}}"]
    problems: list[str] = []
    agents = data.get("agents")
    if not isinstance(agents, Mapping) or not agents:
        problems.append('a2a.agents must map operation names to agent URLs, e.g. {reviewer: "http://127.0.0.1:9999"}')
        agents = {}
    for name, url in agents.items():
        if not isinstance(name, str) or not _NAME.match(name) or name.startswith("_"):
            problems.append(f"a2a.agents: {name!r} is not a Python identifier (it is the operation's name)")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            problems.append(f"a2a.agents.{name} must be an http:// or https:// URL, got {url!r}")
        elif parts.username or parts.password:
            problems.append(f"a2a.agents.{name}: the URL must not carry credentials")
    timeout = data.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
        problems.append(f"a2a.timeout must be a positive number of seconds, got {timeout!r}")
    for key in data:
        if key not in ("agents", "timeout"):
            close = difflib.get_close_matches(str(key), ["agents", "timeout"], n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"a2a.{key} is not a known field{hint}; known fields: agents, timeout")
    return problems


class A2AToolkit(DynamicToolkit):
    """Remote A2A agents, one operation each.

    Args:
        name: The toolkit's name in the sandbox.
        agents: ``{operation: base URL}`` (the agent card is at ``URL/.well-known/agent-card.json``).
        timeout: Seconds per task (the operation's timeout).
    """

    description = "Remote agents (A2A): each operation hands a task to an agent and returns its answer"

    def __init__(self, name: str, agents: Mapping[str, str], *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.name = name
        self._urls = dict(agents)
        self._timeout = timeout
        self._cards: dict[str, Any] = {}

    @classmethod
    def from_mapping(cls, name: str, data: Mapping[str, Any]) -> A2AToolkit:
        """Build from a blueprint's ``a2a:`` mapping.

        Raises:
            ToolkitLoadError: the mapping is invalid.
        """
        problems = a2a_problems(data)
        if problems:
            raise ToolkitLoadError(f"toolkit {name!r}: " + "; ".join(problems))
        return cls(name, data["agents"], timeout=float(data.get("timeout") or DEFAULT_TIMEOUT))

    def operations(self) -> list[OperationSpec]:
        """One operation per agent, described by its card (fetched now).

        Raises:
            ToolkitLoadError: a card cannot be fetched or read.
        """
        specs = []
        for op, url in self._urls.items():
            card = self._cards.get(op) or self._fetch_card(op, url)
            self._cards[op] = card
            skills = "; ".join(f"{s.name}: {s.description}" for s in card.skills or [])
            description = f"The remote agent {card.name!r}: {card.description}" + (
                f" Skills: {skills}." if skills else ""
            )
            specs.append(
                OperationSpec.from_json_schema(
                    op,
                    description=description,
                    schema={
                        "type": "object",
                        "properties": {"task": {"type": "string", "description": "What the agent should do."}},
                        "required": ["task"],
                    },
                    returns="Any",
                    returns_description="The agent's answer: a str, or a dict or list when it answered with data.",
                    timeout=self._timeout,
                )
            )
        return specs

    def _fetch_card(self, op: str, url: str) -> Any:
        import httpx
        from a2a.types import AgentCard
        from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH

        where = url.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH
        try:
            response = httpx.get(where, timeout=30)
            response.raise_for_status()
            return AgentCard.model_validate(response.json())
        except Exception as exc:
            raise ToolkitLoadError(
                f"toolkit {self.name!r}: the agent card of {op!r} at {where} could not be read "
                f"({type(exc).__name__}: {exc}); check the URL in a2a.agents and that the agent is running"
            ) from None

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> object:
        """Send the task, forward status updates as ``a2a.update`` events, return the final answer."""
        import httpx
        from a2a.client import ClientConfig, ClientFactory
        from a2a.types import Message, Part, Role, TaskState, TaskStatusUpdateEvent, TextPart

        card = self._cards[operation]
        message = Message(
            role=Role.user, parts=[Part(root=TextPart(text=str(params["task"])))], message_id=uuid.uuid4().hex
        )
        last: Any = None
        async with httpx.AsyncClient(timeout=self._timeout) as http:
            client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
            async for event in client.send_message(message):
                if isinstance(event, Message):
                    return _parts_value(event.parts)
                task, update = event
                last = task
                if isinstance(update, TaskStatusUpdateEvent):
                    status = update.status
                    text = _parts_value(status.message.parts) if status.message is not None else ""
                    context.event(
                        "a2a.update",
                        {"agent": operation, "task_id": task.id, "state": str(status.state.value), "text": text},
                    )
        if last is None:
            raise RuntimeError(f"the remote agent {operation!r} answered nothing")
        state = last.status.state
        if state != TaskState.completed:
            detail = _parts_value(last.status.message.parts) if last.status.message is not None else ""
            raise RuntimeError(f"the remote agent {operation!r} ended its task as {state.value}: {detail}".rstrip(": "))
        values = [_parts_value(a.parts) for a in last.artifacts or []]
        if not values:
            return ""
        return values[0] if len(values) == 1 else values


def _parts_value(parts: Any) -> Any:
    """A2A parts -> a Python value: text joined, a single data part as its data."""
    texts: list[str] = []
    data: list[object] = []
    for part in parts or []:
        root = getattr(part, "root", part)
        kind = getattr(root, "kind", "")
        if kind == "text":
            texts.append(root.text)
        elif kind == "data":
            data.append(root.data)
        elif kind == "file":
            data.append(json.loads(root.file.model_dump_json()))
    if data and not texts:
        return data[0] if len(data) == 1 else data
    return "\n".join(texts)
