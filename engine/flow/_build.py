"""Building a flow from a ``workflow: {mode: flow}`` blueprint (``FlowAgent.from_blueprint``, ``codeact run``).

The whole tree is validated first (``codeact validate`` shows the same report); each agent blueprint
gets its own model client (its own ``model`` block, or the caller's ``model``/``base_url``/...
override for all), and every agent shares the store, toolkits, sandbox factory and approver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from os import PathLike
from typing import TYPE_CHECKING, Any, Protocol

from codeact.engine.flow._steps import Flow, LoopMode, Step, as_text

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, BuildOptions
    from codeact.engine.agent.hooks import Hook
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.blueprint.models import LoopCondition
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = ["build", "flow_hash"]


class Built(Flow, Protocol):
    """What the builder sets on a flow it made (``FlowAgent``: the builder never imports the kinds)."""

    blueprint_hash: str
    hooks: tuple[Hook, ...]

    def own(self, resources: Iterable[object]) -> None:
        """Take what the build opened (closed with the flow)."""
        ...


def build(
    blueprint: str | PathLike[str] | Blueprint,
    *,
    kinds: Mapping[str, Callable[..., Built]],
    toolkits: Iterable[object] | ToolkitRegistry | None = (),
    options: BuildOptions,
) -> Built:
    """Build the flow of a blueprint; see :meth:`codeact.engine.flow.FlowAgent.from_blueprint`.

    ``kinds`` maps ``flow.kind`` to its class (``FlowAgent.kinds``): the builder is below the flow
    classes and never imports them. Every agent of the flow is assembled as ``Agent.from_blueprint``
    assembles one (``codeact.engine.agent.assemble_spec``), on the flow's registry, store and ``options``
    (a flow takes the default round cap, and its agents' warnings were printed with the flow's).
    """
    from codeact.engine.agent import close_now, load_blueprint, open_owned, toolkit_registry
    from codeact.engine.blueprint import is_flow, print_warnings, strict_error, validate_blueprint
    from codeact.engine.errors import BlueprintFactoryError

    bp = load_blueprint(blueprint)
    if not is_flow(bp):
        raise BlueprintFactoryError(
            f"blueprint {bp.id!r} is not a flow (workflow.mode is not flow); build it with Agent.from_blueprint",
            code="blueprint.flow.notAFlow",
        )
    report = validate_blueprint(bp)
    if not report.valid:
        count = len(report.errors)
        raise BlueprintFactoryError(
            f"Flow blueprint validation failed with {count} error{'s' if count != 1 else ''}; "
            "fix the issues listed (codeact validate FILE shows them).",
            code="blueprint.validation.failed",
            report=report,
        )
    refused = strict_error(report) if options.strict else None
    if refused is not None:
        raise refused
    print_warnings(report.warnings)  # the flow's and its agents' (the validator follows flow.agents)
    registry = toolkit_registry(toolkits)
    owned: list[object] = []
    store = open_owned(options.store, owned)
    nodes = replace(options, store=store, strict=False, max_round_seconds=None, output_type=None)
    shared = _Shared(registry=registry, options=nodes, store=store, owned=owned, kinds=kinds)
    try:
        flow = _flow(bp, shared)
    except BaseException:
        close_now(owned)
        raise
    flow.own(owned)
    return flow


@dataclass(frozen=True, kw_only=True)
class _Shared:
    """What every node of one flow is built with."""

    registry: ToolkitRegistry
    options: BuildOptions
    store: Store
    owned: list[object]  # the flow's store (when it opened it) and each agent's model client
    kinds: Mapping[str, Callable[..., Built]]

    def client(self, bp: Blueprint) -> tuple[ModelClient, Blueprint]:
        from codeact.engine.agent import model_routes

        client, bp = model_routes(bp, self.options)
        self.owned.append(client)
        return client, bp


def _flow(bp: Blueprint, shared: _Shared) -> Built:
    from codeact.engine.blueprint import agent_name, is_flow
    from codeact.engine.errors import BlueprintFactoryError

    block = bp.flow
    assert block is not None  # noqa: S101 - validated
    steps: list[Step] = []
    for index, entry in enumerate(block.agents):
        assert entry is not None  # noqa: S101 - validated
        child = bp.flow_blueprints[index]
        label = agent_name(entry.name, child, index)
        try:
            agent: Agent | Flow = _flow(child, shared) if is_flow(child) else _agent(child, shared)
        except BlueprintFactoryError as exc:
            raise BlueprintFactoryError(
                f"flow agent {label!r} (flow.agents[{index}]): {exc.message}", code=exc.code, report=exc.report
            ) from None
        steps.append(
            Step(
                agent=agent,
                name=label,
                description=(entry.description or "").strip() or None,
                output_key=(entry.output_key or "").strip() or None,
                include_contents=entry.include_contents is not False,
                return_reasoning_contents=entry.return_reasoning_contents is True,
                when=(entry.when or "").strip() or None,
            )
        )
    name = (bp.id or "flow").strip()
    description = (block.description or bp.name or "").strip()
    common: dict[str, Any] = {"name": name, "agents": steps, "description": description, "store": shared.store}
    kind = (block.kind or "").strip()
    flow: Built
    kinds = shared.kinds
    if kind == "parallel":
        flow = kinds["parallel"](
            **common,
            merge_strategy=(block.merge_strategy or "map").strip(),
            merge_output_key=(block.merge_output_key or "merged_results").strip(),
            separator=block.separator if block.separator is not None else "\n\n",
            max_concurrency=block.max_concurrency,
        )
    elif kind == "routing":
        client, _ = shared.client(bp)
        flow = kinds["routing"](
            **common, model=client, instruction=(block.instruction or "").strip(), max_concurrency=block.max_concurrency
        )
    elif kind == "loop":
        loop = block.loop
        assert loop is not None  # noqa: S101 - validated
        cap = loop.max_iterations or 1000
        if loop.count:
            mode = LoopMode.count(loop.count)
        elif loop.condition is not None:
            mode = LoopMode.condition(_predicate(loop.condition), max_iterations=cap)
        else:
            mode = LoopMode.array(max_iterations=cap)
        flow = kinds["loop"](**common, mode=mode)
    else:
        pause = [name.strip() for name in block.interrupt_before if name]
        flow = kinds[kind if kind == "conditional" else "sequential"](**common, interrupt_before=pause)
    flow.blueprint_hash = flow_hash(bp)
    flow.hooks = tuple(shared.options.hooks)
    return flow


def flow_hash(bp: Blueprint) -> str:
    """sha256 of the flow blueprint with each agent entered by its own hash, not its file path.

    Like ``blueprint_hash`` for sub-agents: the hash does not depend on where the files live.
    """
    import hashlib
    import json

    from codeact.engine.blueprint import blueprint_hash, is_flow

    data = bp.model_dump(mode="json", by_alias=True)
    agents = (data.get("flow") or {}).get("agents") or []
    for index, entry in enumerate(agents):
        child = bp.flow_blueprints.get(index)
        if isinstance(entry, dict) and child is not None:
            entry["path"] = flow_hash(child) if is_flow(child) else blueprint_hash(child)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _predicate(condition: LoopCondition) -> Callable[[object], bool]:
    if condition.contains is not None:
        needle = condition.contains
        return lambda result: needle in _text(result)
    if condition.equals is not None:
        expected = condition.equals
        return lambda result: _text(result).strip() == expected.strip()
    pattern = re.compile(condition.matches or "")
    return lambda result: pattern.search(_text(result)) is not None


def _text(value: object) -> str:
    return as_text(value)


def _agent(bp: Blueprint, shared: _Shared) -> Agent:
    from codeact.engine.agent import Agent, assemble_spec

    client, bp = shared.client(bp)
    return assemble_spec(
        Agent, bp, model=client, registry=shared.registry, store=shared.store, options=shared.options, warn=False
    )
