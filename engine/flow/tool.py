"""Agents as tools (seed ``002``'s ``AgentTool``): an agent or a flow exposed as a toolkit operation.

``AgentTool(agent)`` describes one operation: its name and description come from the agent (a
flow's ``name``/``description``, an agent blueprint's ``id``/``name``), and it takes one ``input``
string, or the agent's declared ``input_schema`` (then the arguments are given to the agent as
JSON). :class:`AgentToolkit` groups such tools in a toolkit another agent is granted::

    registry.register(AgentToolkit([AgentTool(writer), AgentTool(review_flow)]))
    # in the model's code:  draft = await agents.writer(input="Release notes for 2.4.0")

Each call runs the agent to the end in a session of its own (``<caller session>.<tool>.<n>``, the caller
session's next free ``n``); a failed run is a tool error the caller's code can catch. Each call is a task the
caller launched (``ToolkitContext.tasks``, kind ``subagent`` or ``flow``), listed by ``system.tasks()``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codeact.engine.flow._base import FlowAgent
from codeact.engine.flow.errors import FlowError
from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext
from codeact.toolkits.tasks import TaskBoard, run_child

if TYPE_CHECKING:
    from codeact.engine.agent import Agent

__all__ = ["AgentTool", "AgentToolkit"]

_IDENT = re.compile(r"[^0-9A-Za-z_]")
_TIMEOUT_S = 600.0
_INPUT_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "What the agent should do."}},
    "required": ["input"],
}


def _identifier(name: str) -> str:
    ident = _IDENT.sub("_", name)
    return ident if ident and not ident[0].isdigit() else f"agent_{ident}"


class AgentTool:
    """One agent (or flow) as one operation.

    Args:
        agent: An :class:`~codeact.engine.agent.Agent` or a flow.
        name: The operation name (default: the agent's name as an identifier).
        description: What it does (default: the agent's description or name).
        input_schema: A JSON schema of the arguments object; default one ``input`` string.
    """

    def __init__(
        self,
        agent: Agent | FlowAgent,
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> None:
        self.agent = agent
        if isinstance(agent, FlowAgent):
            default_name, default_description = agent.name, agent.description
        else:
            default_name, default_description = agent.spec.id, agent.spec.name or ""
        self.name = _identifier(name or default_name)
        self.description = description or default_description or f"Run the {default_name!r} agent on a task."
        if input_schema is not None and (
            input_schema.get("type") != "object" or not isinstance(input_schema.get("properties"), Mapping)
        ):
            raise FlowError(
                f"AgentTool {self.name!r}: input_schema must be a JSON schema of an object with properties",
                code="flow.tool.schema.invalid",
            )
        self.input_schema: Mapping[str, Any] = input_schema if input_schema is not None else _INPUT_SCHEMA

    def spec(self) -> OperationSpec:
        """The operation as the bridge and the model see it."""
        return OperationSpec.from_json_schema(
            self.name,
            description=self.description,
            schema=self.input_schema,
            returns="Any",
            returns_description="The agent's final answer (a str, or data when it finished with data).",
            timeout=_TIMEOUT_S,
        )

    def input_text(self, params: Mapping[str, Any]) -> str:
        """The agent's input for a call: the ``input`` string, or the arguments as JSON."""
        if self.input_schema is _INPUT_SCHEMA:
            return str(params["input"])
        return json.dumps(dict(params), ensure_ascii=False, default=str)


class AgentToolkit(DynamicToolkit):
    """A toolkit of :class:`AgentTool` operations (agents and flows other agents may call).

    Args:
        tools: ``AgentTool`` objects, or agents/flows (wrapped with the defaults).
        name: The toolkit's name (default ``agents``; a blueprint with ``subagents:`` uses that
            name for its own sub-agents, so pick another one there).
        description: One line for the model.
    """

    def __init__(
        self,
        tools: Sequence[AgentTool | Agent | FlowAgent],
        *,
        name: str = "agents",
        description: str = "Agents: each operation hands a task to an agent and returns its answer",
    ) -> None:
        self.name = name
        self.description = description
        self._tools: dict[str, AgentTool] = {}
        for item in tools:
            tool = item if isinstance(item, AgentTool) else AgentTool(item)
            if tool.name in self._tools:
                raise FlowError(f"AgentToolkit {name!r}: two tools are named {tool.name!r}", code="flow.tool.duplicate")
            self._tools[tool.name] = tool
        self._board = TaskBoard()  # a host that keeps no record of launched tasks (a bare bridge): numbers only

    def operations(self) -> list[OperationSpec]:
        """One operation per agent."""
        return [tool.spec() for tool in self._tools.values()]

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        """Run the agent to the end and return its answer; a failed run raises."""
        tool = self._tools[operation]
        text = tool.input_text(params)
        return await run_child(
            context,
            self._board,
            lambda session: tool.agent.invoke(text, session_id=session),
            kind="flow" if isinstance(tool.agent, FlowAgent) else "subagent",
            name=tool.name,
            operation=operation,
            text=text,
            label=f"agent {tool.name!r}",
            paused="asked a question it cannot ask from a tool",
        )
