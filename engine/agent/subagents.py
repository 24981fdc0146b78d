"""Sub-agents as a toolkit (seed ``002``'s AgentTool): ``await agents.reviewer(task="...")``.

A blueprint's ``subagents: {name: {path, description}}`` become the operations of a dynamic
toolkit named ``agents``, granted to the parent. Calling one runs the sub-agent to the end in a
session of its own (``<parent session>.<name>.<n>``, recorded in the same store, so it can be
inspected and replayed) and returns its answer; a failed sub-agent run is a tool error the
parent's code can catch. Sub-agents share the host's model client, store, toolkits, sandbox
factory, approver, hooks and interceptors.

The sub-agent's whole run happens inside one toolkit call of the parent's round; the parent's round
clock is paused while it runs (time waiting on the host is not the code's time), and the call is bounded
by its own timeout (600 s) instead.

Each run is a task the parent launched (``ToolkitContext.tasks``, kind ``subagent``, its id the sub-agent's
session): ``system.tasks()`` lists it ``running`` while it runs, then how it ended. The ``n`` of its session
is the session's next free one (the run's board starts from what earlier runs of the session launched), so a
resumed or continued parent never runs a new task in an old sub-agent's session.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext
from codeact.toolkits.tasks import TaskBoard, run_child

if TYPE_CHECKING:
    from codeact.engine.agent._results import RunResult
    from codeact.engine.blueprint import SubagentSpec

__all__ = ["SUBAGENT_TOOLKIT", "SubagentToolkit"]

SUBAGENT_TOOLKIT = "agents"
_SUBAGENT_TIMEOUT_S = 600.0
_IDENT = re.compile(r"[^0-9A-Za-z_]")


class _Child(Protocol):
    """A sub-agent as this toolkit runs it (an ``codeact.engine.agent.Agent``)."""

    async def invoke(self, input: str, *, session_id: str | None = None) -> RunResult:
        """Run to the end."""
        ...


def operation_name(name: str) -> str:
    """A sub-agent's name as a Python identifier (``code-reviewer`` -> ``code_reviewer``)."""
    ident = _IDENT.sub("_", name)
    return ident if ident and not ident[0].isdigit() else f"agent_{ident}"


class SubagentToolkit(DynamicToolkit):
    """The ``agents`` toolkit of one parent agent."""

    name = SUBAGENT_TOOLKIT
    description = "Sub-agents: each operation hands a task to a specialised agent and returns its answer"

    def __init__(self, spawn: Callable[[SubagentSpec], _Child], subagents: tuple[SubagentSpec, ...]) -> None:
        self._spawn = spawn  # the parent's Agent._subagent: a sub-agent sharing its model, store and toolkits
        self._subagents = {operation_name(s.name): s for s in subagents}
        self._board = TaskBoard()  # a host that keeps no record of launched tasks (a bare bridge): numbers only

    def operations(self) -> list[OperationSpec]:
        """One operation per sub-agent, taking the task text."""
        return [
            OperationSpec.from_json_schema(
                op,
                description=sub.description or f"Run the {sub.name!r} sub-agent on a task.",
                schema={
                    "type": "object",
                    "properties": {"task": {"type": "string", "description": "What the sub-agent should do."}},
                    "required": ["task"],
                },
                returns="Any",
                returns_description=(
                    "The sub-agent's final answer, exactly the value it passed to system.finish(): "
                    "a str, or a dict or list when it finished with data."
                ),
                timeout=_SUBAGENT_TIMEOUT_S,
            )
            for op, sub in self._subagents.items()
        ]

    async def execute(self, operation: str, params: dict[str, object], context: ToolkitContext) -> object:
        """Run the sub-agent to the end and return its answer."""
        sub = self._subagents[operation]
        child = self._spawn(sub)
        task = str(params["task"])
        return await run_child(
            context,
            self._board,
            lambda session: child.invoke(task, session_id=session),
            kind="subagent",
            name=sub.name,
            operation=operation,
            text=task,
            label=f"sub-agent {sub.name!r}",
            paused="asked the user a question it cannot answer",
        )
