"""Building a flow from a ``workflow: {mode: flow}`` blueprint (``FlowAgent.from_blueprint``, ``codeact run``).

The whole tree is validated first (``codeact validate`` shows the same report); each agent blueprint
gets its own model client (its own ``model`` block, or the caller's ``model``/``base_url``/...
override for all), and every agent shares the store, toolkits, sandbox factory and approver.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.flow._steps import Flow, LoopMode, Step, as_text

if TYPE_CHECKING:
    from codeact.engine.agent import Agent
    from codeact.engine.agent.hooks import Hook
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = ["build", "flow_hash", "is_flow_blueprint"]


def is_flow_blueprint(bp: Blueprint) -> bool:
    """True for ``workflow.mode: flow``."""
    return bp.workflow is not None and (bp.workflow.mode or "").strip() == "flow"


def build(
    blueprint: str | PathLike[str] | Blueprint,
    *,
    kinds: Mapping[str, Callable[..., Any]],
    toolkits: Iterable[object] | ToolkitRegistry | None = (),
    model: str | None = None,
    provider: str | None = None,
    base_url: str | None = None,
    profile: str | None = None,
    protocol: Literal["chat", "completion"] | None = None,
    store: str | Store | None = None,
    sandbox: Literal["subprocess", "docker"] | None = None,
    isolation: Literal["bwrap", "process"] = "bwrap",
    runtime: Literal["runc", "gvisor"] | None = None,
    allow_sandbox_declaration: bool = False,
    approver: Any = None,
    hooks: Sequence[Hook] = (),
    interceptors: Sequence[Any] = (),
    stream: bool = True,
    user: str | None = None,
    strict: bool = False,
) -> Any:
    """Build the flow of a blueprint; see :meth:`codeact.engine.flow.FlowAgent.from_blueprint`.

    ``kinds`` maps ``flow.kind`` to its class (``FlowAgent.kinds``): the builder is below the flow
    classes and never imports them.
    """
    from codeact.engine.agent._assemble import _close_now, toolkit_registry
    from codeact.engine.agent.agent import default_sandbox_factory
    from codeact.engine.blueprint import Blueprint, load_path, print_warnings, strict_error, validate_blueprint
    from codeact.engine.errors import BlueprintFactoryError
    from codeact.engine.store import Store, open_store

    bp = blueprint if isinstance(blueprint, Blueprint) else load_path(Path(blueprint))
    if not is_flow_blueprint(bp):
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
    refused = strict_error(report) if strict else None
    if refused is not None:
        raise refused
    print_warnings(report.warnings)  # the flow's and its agents' (the validator follows flow.agents)
    registry = toolkit_registry(toolkits)
    opened = store if isinstance(store, Store) else open_store(store)
    owned: list[Any] = [] if opened is store else [opened]
    shared = _Shared(
        registry=registry,
        store=opened,
        routes={"model": model, "provider": provider, "base_url": base_url, "profile": profile, "protocol": protocol},
        sandbox_factory=default_sandbox_factory(backend=sandbox, isolation=isolation, runtime=runtime),
        allow=allow_sandbox_declaration,
        approver=approver,
        hooks=tuple(hooks),
        interceptors=tuple(interceptors),
        stream=stream,
        user=user,
        clients=owned,
        kinds=kinds,
    )
    try:
        flow = _flow(bp, shared)
    except BaseException:
        _close_now(owned)
        raise
    flow._owned = tuple(owned)
    return flow


class _Shared:
    def __init__(self, **values: Any) -> None:
        self.registry: ToolkitRegistry = values["registry"]
        self.store: Store = values["store"]
        self.routes: dict[str, Any] = values["routes"]
        self.sandbox_factory: Any = values["sandbox_factory"]
        self.allow: bool = values["allow"]
        self.approver: Any = values["approver"]
        self.hooks: tuple[Any, ...] = values["hooks"]
        self.interceptors: tuple[Any, ...] = values["interceptors"]
        self.stream: bool = values["stream"]
        self.user: str | None = values["user"]
        self.clients: list[Any] = values["clients"]
        self.kinds: Mapping[str, Callable[..., Any]] = values["kinds"]

    def client(self, bp: Blueprint) -> tuple[ModelClient, Blueprint]:
        from codeact.engine.agent._assemble import model_routes

        client, bp = model_routes(bp, **self.routes)
        self.clients.append(client)
        return client, bp


def _flow(bp: Blueprint, shared: _Shared) -> Any:
    from codeact.engine.blueprint._flow import agent_name
    from codeact.engine.errors import BlueprintFactoryError

    block = bp.flow
    assert block is not None  # noqa: S101 - validated
    steps: list[Step] = []
    for index, entry in enumerate(block.agents):
        assert entry is not None  # noqa: S101 - validated
        child = bp.flow_blueprints[index]
        label = agent_name(entry.name, child, index)
        try:
            agent: Agent | Flow = _flow(child, shared) if is_flow_blueprint(child) else _agent(child, shared)
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
    flow: Any
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
    flow.hooks = shared.hooks
    return flow


def flow_hash(bp: Blueprint) -> str:
    """sha256 of the flow blueprint with each agent entered by its own hash, not its file path.

    Like ``blueprint_hash`` for sub-agents: the hash does not depend on where the files live.
    """
    import hashlib
    import json

    from codeact.engine.blueprint import blueprint_hash

    data = bp.model_dump(mode="json", by_alias=True)
    agents = (data.get("flow") or {}).get("agents") or []
    for index, entry in enumerate(agents):
        child = bp.flow_blueprints.get(index)
        if isinstance(entry, dict) and child is not None:
            entry["path"] = flow_hash(child) if is_flow_blueprint(child) else blueprint_hash(child)
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _predicate(condition: Any) -> Any:
    if condition.contains is not None:
        needle = condition.contains
        return lambda result: needle in _text(result)
    if condition.equals is not None:
        expected = condition.equals
        return lambda result: _text(result).strip() == expected.strip()
    pattern = re.compile(condition.matches or "")
    return lambda result: pattern.search(_text(result)) is not None


def _text(value: Any) -> str:
    return as_text(value)


def _agent(bp: Blueprint, shared: _Shared) -> Agent:
    from codeact.engine.agent import Agent
    from codeact.engine.blueprint import AgentFactory, HostContext

    client, bp = shared.client(bp)
    spec = AgentFactory().create(
        bp,
        HostContext(
            model_client=client,
            toolkit_registry=shared.registry,
            store=shared.store,
            approval_callback=shared.approver,
            allow_sandbox_declaration=shared.allow,
        ),
    )
    return Agent(
        spec,
        model=client,
        store=shared.store,
        registry=shared.registry,
        sandbox_factory=shared.sandbox_factory,
        approver=shared.approver,
        hooks=shared.hooks,
        interceptors=shared.interceptors,
        stream=shared.stream,
        user=shared.user,
    )
