"""What a flow blueprint (``workflow: {mode: flow}``) brings to an AgentRunner: its manifest and events.

``BlueprintRunner.from_blueprint`` returns a ``FlowRunner`` (``blueprint_runner.py``) for a flow
blueprint, built on these: the run is an ``codeact.engine.flow.FlowAgent`` run (same ``run(context)``
interface, same result envelopes). The results are the flow's own events and its steps' work (code,
tool calls, messages); a step's own start and end are in the record (the flow's session lists its
steps), not in the stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from codeact.engine.runner._manifest import declared_permissions
from codeact.engine.runner.entities import RunnerCapabilities, RunnerManifest, RunnerPermissions

if TYPE_CHECKING:
    from codeact.engine.agent import RunConfig
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.events import Event
    from codeact.engine.flow import FlowAgent

__all__ = ["FlowEvents", "flow_manifest"]

_STEP_LIFECYCLE = frozenset({"run.started", "run.completed", "run.failed"})


def flow_manifest(blueprint: Blueprint, flow: FlowAgent, *, streaming: bool) -> RunnerManifest:
    """The manifest of a flow blueprint's runner (id and label from the blueprint, description from ``flow:``).

    ``streaming``: whether its runs return ``message.delta`` (``mapper.streams_results``). Its permissions are
    what the blueprint declares in ``extensions.runner.permissions`` (a flow itself uses no host resource).
    """
    runner_id = blueprint.id or flow.name
    described = getattr(blueprint, "description", None) or flow.description
    return RunnerManifest(
        id=runner_id,
        name=runner_id,
        label={"en_US": blueprint.name or runner_id},
        description={"en_US": described.strip() if described and described.strip() else f"codeact flow {runner_id!r}"},
        usages=["agent"],
        capabilities=RunnerCapabilities(streaming=streaming, interrupt=True),
        permissions=declared_permissions(blueprint, RunnerPermissions()),
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


class FlowEvents:
    """The flow as the runner's per-run agent: its events, less its steps' own start and end."""

    def __init__(self, flow: FlowAgent) -> None:
        self.flow = flow

    async def run(
        self, input: str, *, session_id: str | None = None, config: RunConfig | None = None
    ) -> AsyncIterator[Event]:
        """The flow's events for one run of ``input`` (labelled with ``config``'s tags and metadata)."""
        import contextlib

        async with contextlib.aclosing(self.flow.run(input, session_id=session_id, config=config)) as events:
            async for event in events:
                if event.parent_run_id is not None and event.type in _STEP_LIFECYCLE:
                    continue
                yield event
