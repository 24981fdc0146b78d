"""What an agent's runs are wired from, assembled once per agent, above the loops.

:class:`~codeact.engine.agent.Agent` builds its parts here when it is made (the registry with
``system`` and the sub-agents, the grants and approval policies, the prompt config, the knowledge
base); each run takes a :class:`Wiring`, a snapshot of those parts, and builds its own bridge,
memory and sandbox from it (``_run.py``). Nothing here knows a run.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codeact.engine.agent.support import Approver, grant_policy
from codeact.engine.model.local import LayoutChoice, choose_layout
from codeact.segments import PromptConfig
from codeact.toolkits import ToolkitRegistry, bind_toolkit

if TYPE_CHECKING:
    from codeact.engine.agent.hooks import Hook
    from codeact.engine.agent.output import OutputSchema
    from codeact.engine.blueprint import AgentSpec, SubagentSpec
    from codeact.engine.knowledge import KnowledgeBase
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store
    from codeact.sandbox import RpcHandler, Sandbox

__all__ = [
    "SandboxFactory",
    "Wiring",
    "grants_for",
    "knowledge_for",
    "layout_for",
    "prompt_config_for",
    "registry_for",
]

SandboxFactory = Callable[["RpcHandler", "AgentSpec"], "Sandbox"]


@dataclass(frozen=True, kw_only=True)
class Wiring:
    """The parts one run of an agent is wired from (the agent's, as they are when the run starts)."""

    spec: AgentSpec
    model: ModelClient
    store: Store
    registry: ToolkitRegistry
    grants: dict[str, Any]
    policies: dict[str, str]
    sandbox_factory: SandboxFactory
    approver: Approver | None
    hooks: Sequence[Hook]
    interceptors: Sequence[Any]
    stream: bool
    user: str | None
    prompt_config: PromptConfig
    knowledge: KnowledgeBase | None
    output: OutputSchema | None = None  # what the final answer must match (engine/agent/output.py)


@functools.cache
def _system_without_tasks() -> tuple[str, ...]:
    from codeact.toolkits.builtin.system import SystemToolkit

    return tuple(op for op in bind_toolkit(SystemToolkit).operations if op != "tasks")


def grants_for(spec: AgentSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """``(grants, approval policies)`` from ``toolkits[]`` and ``tools[]``; ``system`` is always granted.

    ``tools[].ref`` names a toolkit (``devops``) or one operation (``devops.deploy_app``). ``system.tasks``
    is in the default grant only for an agent with sub-agents: one that launches none has nothing to list,
    and every operation shown is read by the model (a 1.5B's devops run and cipher-03 changed with it).
    """
    every_system: Any = "*" if spec.subagents else list(_system_without_tasks())
    grants: dict[str, Any] = {"system": every_system}
    policies: dict[str, str] = {}
    for grant in spec.toolkits:
        every = every_system if grant.ref == "system" else "*"
        grants[grant.ref] = every if grant.operations is None else list(grant.operations)
        policies[grant.ref] = grant_policy(grant.approval)
    for tool in spec.tools:
        toolkit, _, op = tool.ref.partition(".")
        current = grants.get(toolkit)
        if not op:
            grants[toolkit] = "*"
        elif current != "*":
            grants[toolkit] = [*(current or []), op]
        if tool.approval is not None:
            policies[toolkit] = grant_policy(tool.approval)
    return grants, policies


def registry_for(
    registry: ToolkitRegistry,
    spec: AgentSpec,
    grants: dict[str, Any],
    spawn: Callable[[SubagentSpec], Any],
) -> ToolkitRegistry:
    """The registry an agent's runs resolve grants against: ``registry`` with ``system``, and the sub-agents.

    Sub-agents are the operations of an ``agents`` toolkit only this agent is granted (added to
    ``grants``; ``spawn`` builds one); the host's registry is copied, never changed.
    """
    if "system" not in registry:
        from codeact.toolkits.builtin.system import SystemToolkit

        registry = ToolkitRegistry(bound for bound in registry)
        registry.register(SystemToolkit)
    if not spec.subagents:
        return registry
    from codeact.engine.agent.subagents import SUBAGENT_TOOLKIT, SubagentToolkit

    own = ToolkitRegistry()
    for name in registry.names():
        bound = registry.get(name)
        if bound is not None and name != SUBAGENT_TOOLKIT:
            own.register(bound)
    own.register(SubagentToolkit(spawn, spec.subagents))
    grants[SUBAGENT_TOOLKIT] = "*"
    return own


def layout_for(spec: AgentSpec) -> LayoutChoice:
    """The chat code prompt's layout: the blueprint's ``workflow.codeact.layout``, else the code model's own."""
    if spec.codeact.layout is not None:
        return LayoutChoice(layout=spec.codeact.layout, reason="workflow.codeact.layout")
    model = spec.model_for("code")
    return choose_layout(model.model, model.provider)


def prompt_config_for(spec: AgentSpec) -> PromptConfig:
    """The prompt builder's configuration of the spec (instructions, protocol, layout, FIM family)."""
    codeact = spec.codeact
    fim_tokens = None
    if codeact.fim_markers is not None:
        m = codeact.fim_markers
        fim_tokens = {"family": "custom", "prefix": m.prefix, "suffix": m.suffix, "middle": m.middle}
    variables = {k: v for k, v in spec.variables.items() if isinstance(v, str | int | float | bool)}
    return PromptConfig.from_blueprint(
        instructions={
            "system": spec.instructions.system,
            "developer": spec.instructions.developer,
            "variables": variables,
            # The factory rendered a codeact file's instructions; an ai4j file's are text: never again.
            "literal": True,
        },
        protocol=codeact.protocol,
        layout=layout_for(spec).layout,
        model=spec.model.model,
        fim=codeact.fim_family or "auto",
        fim_tokens=fim_tokens,
        # inline thought: the code reply is the round's only reply, so it states the next goal too
        next_goal=codeact.thought == "inline",
        restate_task=codeact.restate_task if codeact.restate_task is not None else codeact.thought != "inline",
        **_prompt_block(spec),
    )


def _prompt_block(spec: AgentSpec) -> dict[str, Any]:
    """The blueprint's ``prompt:`` block (platform, sections, templates, overrides) as prompt-config fields."""
    block = spec.blueprint.prompt
    if block is None:
        return {}
    fields: dict[str, Any] = {"templates": dict(block.templates), "overrides": dict(block.overrides)}
    if block.platform is not None:
        fields["platform"] = block.platform
    if block.sections is not None:
        fields["sections"] = tuple(block.sections)
    return fields


def knowledge_for(spec: AgentSpec) -> KnowledgeBase | None:
    """The blueprint's knowledge, read, chunked and indexed once per agent (each run selects from it)."""
    if spec.knowledge is None:
        return None
    from codeact.engine.knowledge import KnowledgeBase

    return KnowledgeBase.from_settings(spec.knowledge)
