"""Assembling an :class:`~codeact.engine.agent.Agent` from a blueprint file.

The one path ``codeact run`` and ``Agent.from_blueprint`` share: model routes, toolkit registry,
store, factory, sandbox.
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Callable, Iterable
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

if TYPE_CHECKING:
    from codeact.engine.agent._lifecycle import Lifecycle
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.model import ModelClient, ModelSettings
    from codeact.engine.store import Store
    from codeact.toolkits import ToolkitRegistry

__all__ = [
    "API_KEY_VARIABLE",
    "assemble",
    "mcp_toolkits",
    "model_routes",
    "offered_registry",
    "provider_of",
    "responses_route",
    "scripted_relative",
    "toolkit_registry",
]

AgentT = TypeVar("AgentT", bound="Lifecycle")


def scripted_relative(model: str, base: Path | None) -> str:
    """``scripted/<file>`` in a blueprint names a file relative to the blueprint."""
    if not model.startswith("scripted/") or base is None:
        return model
    path = Path(model.removeprefix("scripted/"))
    if path.is_absolute() or model.startswith("scripted/@") or not (base / path).exists():
        return model
    return f"scripted/{(base / path).resolve()}"


def provider_of(model: str, resolved: str | None, declared: str | None) -> str:
    """The provider the factory should record: the resolved one, the model's prefix, or the blueprint's."""
    if resolved:
        return resolved
    if "/" in model:
        return model.split("/", 1)[0]
    return declared or "openai"


API_KEY_VARIABLE = "CODEACT_API_KEY"
"""The name ``--api-key`` is read under: the key lives in the model client only, never in ``os.environ``."""


def responses_route(settings: ModelSettings) -> ModelSettings:
    """The route through litellm's Responses API bridge (``openai/responses/<model>``): ``--protocol responses``.

    The prompt stays chat messages; litellm sends them to the provider's ``/v1/responses`` endpoint.
    A scripted model has no transport and is left as it is.
    """
    model = settings.model
    if model.startswith("scripted/") or "/responses/" in model or model.startswith("responses/"):
        return settings
    head, _, rest = model.partition("/")
    if rest and (settings.provider is None or head == settings.provider):
        return replace(settings, model=f"{head}/responses/{rest}")
    return replace(settings, model=f"responses/{model}", provider=settings.provider or "openai")


def model_routes(
    bp: Blueprint,
    *,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    profile: str | None,
    protocol: str | None,
    api_key: str | None = None,
) -> tuple[ModelClient, Blueprint]:
    """The model client of the run, and the blueprint rewritten to name the model that was chosen.

    The caller (``--model``, ``--provider``, ``--base-url``, ``--profile``) and profiles may pick
    another model than the blueprint's, or give one to a blueprint that names none; the factory,
    the prompt builder (FIM family) and the session record must all see the model that actually
    runs. The protocol is decided once (``--protocol`` > ``workflow.codeact.protocol`` > the
    profile's > ``chat``) and given to both the prompt builder and every model route, so a FIM
    prompt is never sent as a chat message nor a chat prompt to ``/v1/completions``.

    ``protocol="responses"`` (ai4j's ``--protocol responses``) is chat messages sent through litellm's
    Responses API route; ``api_key`` (``--api-key``) is the key of every route, held by the model
    client alone (it reaches no sandbox, record or log).

    Raises:
        ModelError: No model could be chosen, or a profile is missing or incompatible.
    """
    from codeact.engine.blueprint.models import CodeActBlock, ModelBlock, WorkflowBlock
    from codeact.engine.model import ModelClient, resolve_model_routes

    responses = protocol == "responses"
    if responses:
        protocol = "chat"
    workflow = bp.workflow or WorkflowBlock()
    codeact = workflow.codeact or CodeActBlock()
    chosen: Any = protocol or codeact.protocol
    routes = resolve_model_routes(
        model=model,
        provider=provider,
        base_url=base_url,
        profile=profile,
        protocol=chosen,
        blueprint_model=bp.model,
    )
    base = bp.source_path.parent if bp.source_path is not None else None
    code = routes.get("code") or next(iter(routes.values()))
    chosen_protocol = code.protocol
    routes = {
        p: replace(s, model=scripted_relative(s.model, base), protocol=chosen_protocol) for p, s in routes.items()
    }
    if responses:
        routes = {p: responses_route(s) for p, s in routes.items()}
    if api_key:
        routes = {p: replace(s, api_key_env=API_KEY_VARIABLE) for p, s in routes.items()}
    code = routes.get("code") or next(iter(routes.values()))
    block = bp.model or ModelBlock()
    update: dict[str, Any] = {}
    if bp.model is None or not block.model or any((model, provider, base_url, profile)):
        update["model"] = block.model_copy(
            update={"model": code.model, "provider": provider_of(code.model, code.provider, block.provider)}
        )
    # Only a codeact agent has code rounds; a react one (``mode: react``, or no mode at all: ai4j's
    # default) gets no codeact block, which the validator would warn is ignored.
    react = (workflow.mode or "").strip() != "codeact" and workflow.codeact is None
    if codeact.protocol != chosen_protocol and chosen_protocol is not None and not react:
        update["workflow"] = workflow.model_copy(
            update={"codeact": codeact.model_copy(update={"protocol": chosen_protocol})}
        )
    if update:
        bp = bp.model_copy(update=update)
    env = ChainMap({API_KEY_VARIABLE: api_key}, os.environ) if api_key else None
    client = ModelClient(routes, env=env)
    client.preload()  # litellm's seconds of import, when a route needs it, overlap the sandbox's and store's start
    return client, bp


def toolkit_registry(toolkits: Iterable[object] | ToolkitRegistry | None) -> ToolkitRegistry:
    """The installed toolkits (``system`` and entry points) plus ``toolkits``.

    Each item is a ``@toolkit`` class (instantiated with no arguments) or instance, a
    ``DynamicToolkit``, a ``BoundToolkit``, or a ``MODULE:OBJECT`` reference string; an item
    replaces an installed toolkit of the same name. A ``ToolkitRegistry`` is used as it is.

    Raises:
        ToolkitError: An item is not a toolkit or a reference cannot be loaded.
    """
    return offered_registry(toolkits)[0]


def offered_registry(toolkits: Iterable[object] | ToolkitRegistry | None) -> tuple[ToolkitRegistry, tuple[str, ...]]:
    """:func:`toolkit_registry`, and the names of the toolkits ``toolkits`` added (none for a ``ToolkitRegistry``).

    Those toolkits were given for this agent: the factory refuses one its blueprint does not grant
    (``HostContext.offered_toolkits``). A registry is the host's whole set, granted from as each
    blueprint says.
    """
    from codeact.toolkits import ToolkitRegistry, load_registry, load_toolkit_ref

    if isinstance(toolkits, ToolkitRegistry):
        return toolkits, ()
    registry = load_registry()
    names = tuple(
        registry.register(load_toolkit_ref(item) if isinstance(item, str) else item, replace=True).name
        for item in toolkits or ()
    )
    return registry, names


def mcp_toolkits(bp: Blueprint, registry: ToolkitRegistry) -> list[Any]:
    """Register the blueprint's MCP servers (``toolkits[].mcp``) and A2A agents (``toolkits[].a2a``) in ``registry``.

    Returns the MCP toolkits, to close when the run ends.

    Each server starts here: its tools are the toolkit's operations, which the prompt's stubs and
    the factory's grant check need. A server that fails to start closes the ones started before.

    Raises:
        ToolkitError: A server's entry is invalid, a named environment variable is missing, or
            the server did not start (the message says which and why).
    """
    entries = [e for e in bp.toolkits if e is not None and e.ref and (e.mcp is not None or e.a2a is not None)]
    if not entries:
        return []
    base = str(bp.source_path.parent) if bp.source_path is not None else None
    started: list[Any] = []
    try:
        for entry in entries:
            ref = (entry.ref or "").strip()
            if entry.a2a is not None:
                from codeact.toolkits.a2a import A2AToolkit

                registry.register(A2AToolkit.from_mapping(ref, entry.a2a), replace=True)
                continue
            from codeact.toolkits.mcp import McpServerConfig, McpToolkit

            toolkit = McpToolkit(McpServerConfig.from_mapping(ref, entry.mcp or {}, base_dir=base))
            started.append(toolkit)
            registry.register(toolkit, replace=True)
    except BaseException:
        for toolkit in started:
            toolkit.close()
        raise
    return started


def assemble(
    cls: Callable[..., AgentT],
    blueprint: str | PathLike[str] | Blueprint,
    *,
    toolkits: Iterable[object] | ToolkitRegistry | None,
    model: str | None,
    provider: str | None,
    base_url: str | None,
    profile: str | None,
    protocol: Literal["chat", "completion"] | None,
    store: str | Store | None,
    sandbox: Literal["subprocess", "docker"] | None,
    isolation: Literal["bwrap", "process"],
    allow_sandbox_declaration: bool,
    extra: dict[str, Any],
    max_round_seconds: float | None = None,
    strict: bool = False,
) -> AgentT:
    """Build ``cls`` from a blueprint (see ``Agent.from_blueprint``); closes what it opened on failure."""
    from codeact.engine.agent._wiring import default_sandbox_factory
    from codeact.engine.blueprint import AgentFactory, Blueprint, HostContext, load_path, print_warnings
    from codeact.engine.store import Store, open_store

    bp = blueprint if isinstance(blueprint, Blueprint) else load_path(Path(blueprint))
    if bp.workflow is not None and (bp.workflow.mode or "").strip() == "flow":
        from codeact.engine.errors import BlueprintFactoryError

        raise BlueprintFactoryError(
            f"blueprint {bp.id!r} is a flow (workflow.mode: flow): build it with "
            "engine.flow.FlowAgent.from_blueprint(...) (same options), or run it with `codeact run`",
            code="blueprint.flow.isAFlow",
        )
    registry, offered = offered_registry(toolkits)
    client, bp = model_routes(bp, model=model, provider=provider, base_url=base_url, profile=profile, protocol=protocol)
    owned: list[Any] = [client]
    try:
        owned.extend(mcp_toolkits(bp, registry))
    except BaseException:
        _close_now(owned)
        raise
    opened = store if isinstance(store, Store) else open_store(store)
    if opened is not store:
        owned.append(opened)
    try:
        spec = AgentFactory().create(
            bp,
            HostContext(
                model_client=client,
                toolkit_registry=registry,
                store=opened,
                approval_callback=extra.get("approver"),
                allow_sandbox_declaration=allow_sandbox_declaration,
                max_round_seconds=max_round_seconds,
                strict=strict,
                offered_toolkits=offered,
            ),
        )
        print_warnings(spec.warnings)  # before the run, where the author looks (stderr)
        agent = cls(
            spec,
            model=client,
            store=opened,
            registry=registry,
            sandbox_factory=default_sandbox_factory(backend=sandbox, isolation=isolation),
            **extra,
        )
    except BaseException:
        _close_now(owned)
        raise
    agent._owned = tuple(owned)
    return agent


def _close_now(resources: list[Any]) -> None:
    """Close resources that never served a run (no connection was opened yet; nothing to await on a loop)."""
    import asyncio

    async def _close() -> None:
        for resource in resources:
            closer = getattr(resource, "aclose", None) or resource.close
            await closer()

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_close())
    # Inside a running loop the resources hold no connection yet: dropping them is enough.
