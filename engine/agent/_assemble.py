"""Assembling an :class:`~codeact.engine.agent.Agent` from a blueprint, with one :class:`BuildOptions` value.

The one path every entry point shares (``Agent.from_blueprint``, a flow's agents, ``codeact.engine.build``
and so ``codeact run/serve/worker/eval``, the runner, a queued run): model routes, toolkit registry, MCP
servers, store, factory, sandbox. What it opened the agent owns (:meth:`Lifecycle.own`) and closes.
"""

from __future__ import annotations

import os
from collections import ChainMap
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast

if TYPE_CHECKING:
    from codeact.engine.agent._lifecycle import Lifecycle
    from codeact.engine.agent.hooks import Hook, ModelInterceptor, ToolInterceptor
    from codeact.engine.agent.support import Approver
    from codeact.engine.blueprint import AgentSpec, Blueprint
    from codeact.engine.model import ModelClient, ModelSettings
    from codeact.engine.store import Store
    from codeact.toolkits import CallBudgets, ToolkitRegistry
    from codeact.toolkits.mcp import McpToolkit

__all__ = [
    "API_KEY_VARIABLE",
    "BuildOptions",
    "assemble",
    "assemble_spec",
    "load_blueprint",
    "mcp_toolkits",
    "model_routes",
    "offered_registry",
    "provider_of",
    "responses_route",
    "scripted_relative",
    "toolkit_registry",
]

AgentT = TypeVar("AgentT", bound="Lifecycle")


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """What a host chooses when it builds an agent or a flow from a blueprint: one value, every entry point.

    The model route (``model`` ... ``api_key``) overrides the blueprint's; the sandbox choice overrides its
    ``sandbox.backend``/``runtime``; the limits are caps a blueprint may ask for less than, never more.

    Attributes:
        model: A litellm model (``openai/gpt-4.1-mini``); default the blueprint's, a profile or ``$CODEACT_MODEL``.
        provider: The model provider (``openai-compatible``, ...).
        base_url: Base URL of an OpenAI-compatible model server.
        profile: A profile of ``profiles.yaml``.
        protocol: ``chat``, ``completion`` (raw FIM) or ``responses`` (litellm's Responses API route).
        api_key: The key of every model route, held by the model client alone (never recorded).
        store: ``sqlite:///PATH``, ``redis://...`` or a ``Store`` (left open: its owner closes it).
        sandbox: ``subprocess`` or ``docker``; default the blueprint's ``sandbox.backend``.
        isolation: ``bwrap`` or ``process`` (weaker) for the subprocess sandbox.
        runtime: ``runc`` or ``gvisor`` for the Docker sandbox; default the blueprint's.
        allow_sandbox_declaration: Accept the blueprint's ``sandbox`` block.
        max_round_seconds: The most seconds of code per round a blueprint may ask for (default 600).
        call_budgets: The host's caps on toolkit calls and bridge bytes per round and per run
            (``toolkits.CallBudgets``; None: ``toolkits.DEFAULT_BUDGETS``).
        strict: Refuse a blueprint the validator warns about (``blueprint.validation.strict``).
        approver: Asked when a call needs approval; None denies such calls with a reason.
        hooks: Before/after agent and model hooks.
        interceptors: Model and tool interceptors (first registered is outermost).
        stream: Stream model replies as ``message.delta`` events.
        user: Who the agent acts for (memory scope, toolkit context).
        output_type: What the final answer must be (a JSON Schema dict or a pydantic model class).
    """

    model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    profile: str | None = None
    protocol: Literal["chat", "completion", "responses"] | None = None
    api_key: str | None = None
    store: str | Store | None = None
    sandbox: Literal["subprocess", "docker"] | None = None
    isolation: Literal["bwrap", "process"] = "bwrap"
    runtime: Literal["runc", "gvisor"] | None = None
    allow_sandbox_declaration: bool = False
    max_round_seconds: float | None = None
    call_budgets: CallBudgets | None = None
    strict: bool = False
    approver: Approver | None = None
    hooks: Sequence[Hook] = ()
    interceptors: Sequence[ModelInterceptor | ToolInterceptor] = ()
    stream: bool = True
    user: str | None = None
    output_type: object = None

    @property
    def overrides_model(self) -> bool:
        """Whether the caller named a model route (the blueprint's ``model`` block is then rewritten)."""
        return any((self.model, self.provider, self.base_url, self.profile))


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


def model_routes(bp: Blueprint, options: BuildOptions) -> tuple[ModelClient, Blueprint]:
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

    responses = options.protocol == "responses"
    # ``responses`` is chat messages on another route: the prompt is built for chat.
    protocol: Literal["chat", "completion"] | None = "completion" if options.protocol == "completion" else None
    if responses or options.protocol == "chat":
        protocol = "chat"
    workflow = bp.workflow or WorkflowBlock()
    codeact = workflow.codeact or CodeActBlock()
    routes = resolve_model_routes(
        model=options.model,
        provider=options.provider,
        base_url=options.base_url,
        profile=options.profile,
        protocol=protocol or cast("Literal['chat', 'completion'] | None", codeact.protocol),
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
    api_key = options.api_key
    if api_key:
        routes = {p: replace(s, api_key_env=API_KEY_VARIABLE) for p, s in routes.items()}
    code = routes.get("code") or next(iter(routes.values()))
    block = bp.model or ModelBlock()
    update: dict[str, object] = {}
    if bp.model is None or not block.model or options.overrides_model:
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


def mcp_toolkits(bp: Blueprint, registry: ToolkitRegistry) -> list[McpToolkit]:
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
    started: list[McpToolkit] = []
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


def load_blueprint(blueprint: str | PathLike[str] | Blueprint) -> Blueprint:
    """``blueprint`` as it is, or loaded from its path.

    Raises:
        BlueprintLoadError: The file cannot be read or parsed.
    """
    from codeact.engine.blueprint import Blueprint, load_path

    return blueprint if isinstance(blueprint, Blueprint) else load_path(Path(blueprint))


def assemble(
    cls: Callable[..., AgentT],
    blueprint: str | PathLike[str] | Blueprint,
    *,
    toolkits: Iterable[object] | ToolkitRegistry | None,
    options: BuildOptions,
) -> AgentT:
    """Build ``cls`` from an agent blueprint (see ``Agent.from_blueprint``); closes what it opened on failure.

    Raises:
        BlueprintLoadError: The file cannot be read or parsed.
        BlueprintFactoryError: The blueprint is a flow, or invalid for this host (its report is attached).
        ModelError: No model could be chosen, or a profile is missing.
        ToolkitError: A toolkit cannot be loaded, or an MCP server did not start.
        StoreError: The store URL is invalid.
    """
    from codeact.engine.blueprint import is_flow

    bp = load_blueprint(blueprint)
    if is_flow(bp):
        from codeact.engine.errors import BlueprintFactoryError

        raise BlueprintFactoryError(
            f"blueprint {bp.id!r} is a flow (workflow.mode: flow): build it with "
            "engine.flow.FlowAgent.from_blueprint(...) (same options), or run it with `codeact run`",
            code="blueprint.flow.isAFlow",
        )
    registry, offered = offered_registry(toolkits)
    client, bp = model_routes(bp, options)
    owned: list[object] = [client]
    try:
        owned.extend(mcp_toolkits(bp, registry))
        store = open_owned(options.store, owned)
        agent = assemble_spec(cls, bp, model=client, registry=registry, store=store, options=options, offered=offered)
    except BaseException:
        close_now(owned)
        raise
    agent.own(owned)
    return agent


def open_owned(store: str | Store | None, owned: list[object]) -> Store:
    """The store ``store`` names (opened, and added to ``owned``), or the ``Store`` object given (left open).

    Raises:
        StoreError: The store URL is invalid.
    """
    from codeact.engine.store import Store, open_store

    if isinstance(store, Store):
        return store
    opened = open_store(store)
    owned.append(opened)
    return opened


def assemble_spec(
    cls: Callable[..., AgentT],
    bp: Blueprint,
    *,
    model: ModelClient,
    registry: ToolkitRegistry,
    store: Store,
    options: BuildOptions,
    offered: tuple[str, ...] = (),
    warn: bool = True,
) -> AgentT:
    """The factory's spec of ``bp`` for this host, and ``cls`` built on it (an agent of a flow too).

    ``warn`` prints the spec's warnings on stderr (a flow printed its agents' already).
    """
    from codeact.engine.agent.sandboxes import default_sandbox_factory
    from codeact.engine.blueprint import AgentFactory, HostContext, print_warnings

    spec: AgentSpec = AgentFactory().create(
        bp,
        HostContext(
            model_client=model,
            toolkit_registry=registry,
            store=store,
            approval_callback=options.approver,
            allow_sandbox_declaration=options.allow_sandbox_declaration,
            max_round_seconds=options.max_round_seconds,
            call_budgets=options.call_budgets,
            strict=options.strict,
            offered_toolkits=offered,
        ),
    )
    if warn:
        print_warnings(spec.warnings)  # before the run, where the author looks (stderr)
    return cls(
        spec,
        model=model,
        store=store,
        registry=registry,
        sandbox_factory=default_sandbox_factory(
            backend=options.sandbox, isolation=options.isolation, runtime=options.runtime
        ),
        approver=options.approver,
        hooks=options.hooks,
        interceptors=options.interceptors,
        stream=options.stream,
        user=options.user,
        output_type=options.output_type,
    )


def close_now(resources: Sequence[object]) -> None:
    """Close resources that never served a run (no connection was opened yet; nothing to await on a loop)."""
    import asyncio

    from codeact.engine.agent._lifecycle import close_resource

    async def _close() -> None:
        for resource in resources:
            await close_resource(resource)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        asyncio.run(_close())
    # Inside a running loop the resources hold no connection yet: dropping them is enough.
