"""``FlowRunner``: a flow blueprint (``workflow: {mode: flow}``) served as an AgentRunner.

``BlueprintRunner.from_blueprint`` returns one for a flow blueprint: the run is an
``codeact.engine.flow.FlowAgent`` run (same ``run(context)`` interface, same result envelopes). The
results are the flow's own events and its steps' work (code, tool calls, messages); a step's own
start and end are in the record (the flow's session lists its steps), not in the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from codeact.engine.runner.blueprint_runner import BlueprintRunner
from codeact.engine.runner.entities import RunnerCapabilities, RunnerManifest, RunnerPermissions

if TYPE_CHECKING:
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.events import Event
    from codeact.engine.flow import FlowAgent
    from codeact.engine.runner.attachments import Attachments
    from codeact.engine.runner.entities import RunnerContext
    from codeact.engine.runner.interactions import Interactions
    from codeact.engine.runner.proxy import RunAPIProxy

__all__ = ["FlowRunner", "flow_manifest"]

_STEP_LIFECYCLE = frozenset({"run.started", "run.completed", "run.failed"})


def flow_manifest(blueprint: Blueprint, flow: FlowAgent) -> RunnerManifest:
    """The manifest of a flow blueprint's runner (id and label from the blueprint, description from ``flow:``)."""
    runner_id = blueprint.id or flow.name
    described = getattr(blueprint, "description", None) or flow.description
    return RunnerManifest(
        id=runner_id,
        name=runner_id,
        label={"en_US": blueprint.name or runner_id},
        description={"en_US": described.strip() if described and described.strip() else f"codeact flow {runner_id!r}"},
        usages=["agent"],
        capabilities=RunnerCapabilities(streaming=True, interrupt=True),
        permissions=RunnerPermissions(),
        config_schema=[],
        metadata={
            "engine": "codeact",
            "kind": "flow",
            "flow_kind": flow.kind,
            "blueprint_hash": flow.blueprint_hash,
            "agents": [step.label for step in flow.steps],
            "stateful_session": True,
        },
    )


class _FlowEvents:
    """The flow as the runner's per-run agent: its events, less its steps' own start and end."""

    def __init__(self, flow: FlowAgent) -> None:
        self.flow = flow

    async def run(self, input: str, *, session_id: str | None = None) -> AsyncIterator[Event]:
        import contextlib

        async with contextlib.aclosing(self.flow.run(input, session_id=session_id)) as events:
            async for event in events:
                if event.parent_run_id is not None and event.type in _STEP_LIFECYCLE:
                    continue
                yield event


class FlowRunner(BlueprintRunner):
    """A flow blueprint as a runner (built by :meth:`BlueprintRunner.from_blueprint`).

    A flow's steps run with their blueprints' own grants: a run of a flow gets no ``attachments``,
    ``host`` or ``knowledge`` toolkit, and its approvals are not interactions (grant the steps'
    toolkits ``approval: auto``).

    Args:
        flow: The flow built from the blueprint (closed by :meth:`aclose`).
        blueprint: The loaded flow blueprint.
        show_work: Also stream the steps' working replies.
    """

    def __init__(self, flow: FlowAgent, blueprint: Blueprint, *, show_work: bool = True) -> None:
        self.flow = flow
        self.blueprint_id = blueprint.id or flow.name
        self.show_work = show_work
        self.attachment_reader = None
        self.manifest = flow_manifest(blueprint, flow)

    async def aclose(self) -> None:
        """Close what the flow opened (model clients, the store)."""
        await self.flow.aclose()

    def _agent_for(
        self,
        context: RunnerContext,
        interactions: Interactions | None,
        attachments: Attachments,
        proxy: RunAPIProxy | None,
    ) -> Any:
        return _FlowEvents(self.flow)
