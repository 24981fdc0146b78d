"""Flow agents (seed ``002``): sequential, conditional, parallel, routing and loop compositions of agents.

Build them from Python::

    from codeact.engine.flow import ParallelAgent, SequentialAgent, Step

    flow = SequentialAgent(
        name="release",
        agents=[Step(agent=writer, output_key="draft"), ParallelAgent(name="checks", agents=[lint, review])],
    )
    result = await flow.invoke("Release notes for 2.4.0")

or from a blueprint with ``workflow: {mode: flow}`` and a ``flow:`` block
(:meth:`FlowAgent.from_blueprint`, ``codeact run``). See docs/flow.md.
"""

from __future__ import annotations

from codeact.engine.flow._base import FlowAgent, Step, StepResult
from codeact.engine.flow.errors import FlowError
from codeact.engine.flow.kinds import (
    LOOP_CAP,
    MAX_PARALLEL,
    MIN_PARALLEL,
    ROUTING_RETRIES,
    ConditionalAgent,
    LoopAgent,
    LoopMode,
    MergeStrategy,
    ParallelAgent,
    RoutingAgent,
    SequentialAgent,
    merge_results,
    parse_routes,
)
from codeact.engine.flow.sessions import FlowNode, FlowReplayReport, flow_tree, replay_flow
from codeact.engine.flow.tool import AgentTool, AgentToolkit

Flow = FlowAgent
"""An alias: ``Flow.from_blueprint("flow.yaml")``."""

__all__ = [
    "LOOP_CAP",
    "MAX_PARALLEL",
    "MIN_PARALLEL",
    "ROUTING_RETRIES",
    "AgentTool",
    "AgentToolkit",
    "ConditionalAgent",
    "Flow",
    "FlowAgent",
    "FlowError",
    "FlowNode",
    "FlowReplayReport",
    "LoopAgent",
    "LoopMode",
    "MergeStrategy",
    "ParallelAgent",
    "RoutingAgent",
    "SequentialAgent",
    "Step",
    "StepResult",
    "flow_tree",
    "merge_results",
    "parse_routes",
    "replay_flow",
]
