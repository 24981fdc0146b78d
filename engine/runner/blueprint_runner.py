"""``BlueprintRunner``: a blueprint served as an AgentRunner (a context in, results out); ``FlowRunner`` for flows."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from codeact.engine.errors import CodeactError
from codeact.engine.runner._input import compose_input
from codeact.engine.runner._manifest import manifest_for
from codeact.engine.runner._runtime import configured_spec, runtime_notes, runtime_toolkits
from codeact.engine.runner.attachments import AttachmentReader, Attachments
from codeact.engine.runner.entities import RunnerContext, RunnerManifest, RunnerResult
from codeact.engine.runner.flow_runner import FlowEvents, flow_manifest
from codeact.engine.runner.interactions import Interactions, approval_request, decision_from
from codeact.engine.runner.mapper import ResultMapper, streams_results
from codeact.engine.runner.proxy import (
    HOST_TOOLKIT,
    KNOWLEDGE_TOOLKIT,
    HostKnowledge,
    HostModelClient,
    HostTools,
    HostTransport,
    RunAPIProxy,
)
from codeact.engine.telemetry import attached
from codeact.sandbox.aio import wait_for
from codeact.toolkits import ApprovalDecision, ApprovalRequest, ToolkitRegistry

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, RunConfig
    from codeact.engine.agent.support import Approver
    from codeact.engine.blueprint import Blueprint
    from codeact.engine.events import Event
    from codeact.engine.flow import FlowAgent
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store

__all__ = ["BlueprintRunner", "FlowRunner", "conversation_of", "session_id_for"]

_SAFE = re.compile(r"[^A-Za-z0-9_.\-]")


def conversation_of(context: RunnerContext) -> tuple[str, str, str, str] | None:
    """What identifies a context's conversation: ``(workspace_id, bot_id, conversation_id, thread_id)``.

    The conversation is ``conversation.conversation_id`` (else ``context.conversation_id``) within its
    workspace, bot and thread (absent ones as ``""``); None when the context names no conversation.
    """
    conv = context.conversation
    conversation_id = (conv.conversation_id if conv is not None else None) or context.context.conversation_id
    if not conversation_id:
        return None
    thread = (conv.thread_id if conv is not None else None) or context.context.thread_id or ""
    if conv is None:
        return "", "", conversation_id, thread
    return conv.workspace_id or "", conv.bot_id or "", conversation_id, thread


def session_id_for(context: RunnerContext) -> str:
    """The codeact session of a context: stable per conversation, so its next message resumes it.

    The id is a hash of the conversation's identity (``conversation_of``: ``conv-<32 hex>``). A context
    without a conversation gets a session of its own run (``run-<run_id>``).
    """
    parts = conversation_of(context)
    if parts is None:
        return "run-" + (_SAFE.sub("_", context.run_id)[:120] or "anonymous")
    return "conv-" + hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


class BlueprintRunner:
    """A blueprint as a runner: ``manifest`` for discovery, ``run(context)`` for a run.

    One runner serves many runs, concurrently; each run gets its own agent (sharing the model
    client, the store and the toolkits) with its own approver and attachments.

    Args:
        agent: The agent built from the blueprint (its model client and store are shared by every run).
        show_work: Also stream the model's working replies as messages (see ``ResultMapper``).
        attachment_reader: Reads attachments a host holds (``ref``); None reads inline content only.
    """

    def __init__(
        self,
        agent: Agent,
        *,
        show_work: bool = True,
        attachment_reader: AttachmentReader | None = None,
    ) -> None:
        self.agent = agent
        self.show_work = show_work
        self.attachment_reader = attachment_reader
        self.manifest: RunnerManifest = manifest_for(
            agent.spec, toolkits=agent.grants, streaming=streams_results(agent, show_work=show_work)
        )

    @classmethod
    def from_blueprint(
        cls,
        path: str | os.PathLike[str],
        *,
        toolkits: Iterable[object] | ToolkitRegistry | None = (),
        store: str | Store | None = None,
        model: str | None = None,
        base_url: str | None = None,
        show_work: bool = True,
        **agent_options: Any,
    ) -> BlueprintRunner:
        """Build the runner of a blueprint file (as ``Agent.from_blueprint``; close it with :meth:`aclose`).

        A flow blueprint (``workflow: {mode: flow}``) gives a :class:`FlowRunner`,
        whose runs are ``codeact.engine.flow.FlowAgent`` runs.

        Args:
            path: The blueprint YAML.
            toolkits: Host toolkits (instances, classes, ``MODULE:OBJECT`` strings or a registry).
            store: ``sqlite:///PATH``, ``redis://...`` or a ``Store`` (default ``$CODEACT_STORE``).
            model: A model name overriding the blueprint's.
            base_url: An OpenAI-compatible server's base URL.
            show_work: Stream the model's working replies too.
            **agent_options: Other ``Agent.from_blueprint`` options (``sandbox``, ``isolation``, ...).
        """
        from codeact.engine.agent import Agent, BuildOptions
        from codeact.engine.blueprint import is_flow, load_path
        from codeact.engine.builder import build

        agent_options.pop("approver", None)  # approvals are interactions of each run
        blueprint = load_path(Path(path))
        if is_flow(blueprint):  # a flow: its runs are FlowAgent runs
            agent_options.pop("max_round_seconds", None)  # flows take the default cap (docs/limits.md)
        options = BuildOptions(store=store, model=model, base_url=base_url, **agent_options)
        built = build(blueprint, toolkits=toolkits, options=options)
        if isinstance(built, Agent):
            return cls(built, show_work=show_work)
        return FlowRunner(built, blueprint, show_work=show_work)

    @property
    def id(self) -> str:
        """The manifest id (the blueprint id)."""
        return self.manifest.id

    async def aclose(self) -> None:
        """Close the model client and store the runner opened."""
        await self.agent.aclose()

    async def __aenter__(self) -> BlueprintRunner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def session_id_for(self, context: RunnerContext) -> str:
        """The session a context runs in (:func:`session_id_for`)."""
        return session_id_for(context)

    # -- one run ---------------------------------------------------------------------------------
    async def run(
        self,
        context: RunnerContext,
        *,
        run_id: str,
        interactions: Interactions | None = None,
        host: HostTransport | None = None,
        config: RunConfig | None = None,
    ) -> AsyncIterator[RunnerResult]:
        """Run ``context``; yields results numbered 1, 2, ..., the last ``run.completed`` or ``run.failed``.

        ``runtime.deadline_at`` bounds the run: when it passes the run is stopped (the round in
        progress is recorded as interrupted, the sandbox killed) and the last result is
        ``run.failed`` with ``runner.timeout`` (retryable); a deadline already past fails at once,
        without running anything. Cancelling the task that iterates (or closing the iterator)
        stops the run the same way, without a last result: the caller reports ``cancelled``.

        A runner whose manifest declares platform actions (``permissions.platform_api``) gives the run's
        code the ``platform_api`` toolkit: each request it makes becomes an ``action.requested`` result.
        The context's ``runtime.locale`` and ``runtime.timezone`` are shown to the model as the run's
        Context segment, and the time zone is ``system.get_current_time()``'s default (a malformed one
        fails the run with ``runner.invalid_context``).

        Args:
            context: The run context.
            run_id: The id every result carries.
            interactions: Where approvals wait for the host's answer; None denies calls that need one.
            host: The host's run-scoped API, when codeact runs under a host: the run then uses the
                host's model (``config["model"]``, else the first granted model) through it, the
                host's tools as the ``host`` toolkit and its knowledge bases as the ``knowledge``
                toolkit; every call is checked against the run's
                resources before it leaves and bounded by the deadline.
            config: The run's tags and metadata (``RunConfig``; ``codeact serve`` takes them from the
                ``POST /v1/runs`` body): in the engine's ``run.started``, the session record and the span.
                Its ``thread_id`` must be unset: the conversation picks the session.
        """
        deadline = context.runtime.deadline_at
        delivery = context.delivery
        mapper = ResultMapper(
            run_id,
            show_work=self.show_work,
            expires_at=deadline,
            interactive=interactions is not None,
            streaming=delivery.supports_streaming,  # no chunks to a surface that cannot show them
            max_message_size=delivery.max_message_size,
        )
        if deadline is not None and deadline <= time.time():
            yield mapper.failed(
                f"the run's deadline_at ({deadline:.3f}) had passed before it started; nothing ran. "
                "Send the message again with a later deadline",
                code="runner.timeout",
            )
            return
        try:
            text, attachments, parts = compose_input(context, readable_refs=self.attachment_reader is not None)
            notes = runtime_notes(context)
            proxy = RunAPIProxy(context, host, permissions=self.manifest.permissions) if host is not None else None
            reader = self.attachment_reader
            agent = self._agent_for(context, interactions, Attachments(attachments, reader=reader), proxy)
        except CodeactError as exc:  # the context cannot be run (a host tool schema, a template)
            yield mapper.failed(f"[{exc.code}] {exc.message}", code="runner.invalid_context")
            return
        if not text and not attachments and not parts:
            yield mapper.failed(
                "the context has no input: give input.text, input.contents, attachments or an interaction answer",
                code="runner.invalid_context",
            )
            return
        if parts and isinstance(agent, FlowEvents):
            yield mapper.failed(
                "a flow runner takes text input only: send the image and file contents to a codeact blueprint's runner",
                code="runner.invalid_context",
            )
            return
        # Image and file contents travel as the message's parts: the same path as Agent.run(message).
        message: Any = {"role": "user", "content": [{"type": "text", "text": text}, *parts]} if parts else text
        if isinstance(agent, FlowEvents):  # a flow's steps take no caller context
            events = agent.run(message, session_id=session_id_for(context), config=config)
        else:  # the user's locale and time zone, shown to the model as the run's Context segment
            events = agent.run(message, session_id=session_id_for(context), config=config, context=notes or None)
        # The host's runtime.trace_id: the run's spans continue the host's trace (when tracing is on). The
        # run starts at its first step, so that step starts under the host's trace context.
        first: asyncio.Future[Event] | None = None
        carrier = _trace_carrier(context.runtime.trace_id)
        if carrier is not None:
            with attached(carrier):
                first = asyncio.ensure_future(anext(events))
        ended = False
        try:
            while not ended:
                step: Awaitable[Event] = first if first is not None else anext(events)
                first = None
                try:
                    if deadline is None:
                        event = await step
                    else:
                        remaining = deadline - time.time()
                        if remaining <= 0:
                            raise TimeoutError
                        event = await wait_for(step, remaining)
                except StopAsyncIteration:
                    break
                except CodeactError as exc:  # the input was refused before the run started (a file part)
                    yield mapper.failed(f"[{exc.code}] {exc.message}", code="runner.invalid_context")
                    return
                except TimeoutError:
                    await events.aclose()
                    yield mapper.failed(
                        f"the run's deadline_at ({deadline}) passed; the round in progress was stopped and "
                        "recorded as interrupted. Retry with a later deadline, or continue the conversation",
                        code="runner.timeout",
                    )
                    return
                for result in mapper.map(event):
                    ended = ended or result.terminal
                    yield result
            if not ended:
                yield mapper.failed("the run ended without a result (engine bug: please report it)")
        finally:
            await events.aclose()
            if interactions is not None:
                interactions.close()

    def _agent_for(
        self,
        context: RunnerContext,
        interactions: Interactions | None,
        attachments: Attachments,
        proxy: RunAPIProxy | None,
    ) -> Agent:

        base = self.agent
        registry = ToolkitRegistry(bound for bound in base.registry)
        # The attachments, the user's time zone and the platform actions the manifest declares (a queued
        # run gets the same). An approval waits in place: the run's platform_api counts the whole run.
        actions = self.manifest.permissions.platform_api
        extra = runtime_toolkits(registry, context, attachments=attachments, platform_actions=actions)
        model: ModelClient = base.model
        if proxy is not None:
            host_model = _host_model(context)
            if host_model is not None:
                model = cast("ModelClient", HostModelClient(proxy, host_model))
            if context.resources.tools:
                registry.register(HostTools(proxy, list(context.resources.tools)), replace=True)
                extra.append(HOST_TOOLKIT)
            bases = [kb for kb in context.resources.knowledge_bases if not kb.operations or "retrieve" in kb.operations]
            if bases:
                registry.register(HostKnowledge(proxy, bases), replace=True)
                extra.append(KNOWLEDGE_TOOLKIT)
        # The binding's config overrides the blueprint's variables (protocol v1; a queued run's too)
        spec = configured_spec(base.spec, context)
        actor = context.actor.actor_id if context.actor is not None else None
        return base.derive(
            spec=spec,
            model=model,
            registry=registry,
            approver=_approver(interactions, context.runtime.deadline_at) if interactions is not None else _refuse,
            user=actor or base.user,
            output_type=None,
            grants=extra,
        )


def _host_model(context: RunnerContext) -> str | None:
    """The host model a run uses: ``config["model"]`` when granted, else the first granted model."""
    granted = [m.model_id for m in context.resources.models if not m.operations or "invoke" in m.operations]
    chosen = context.config.get("model")
    if isinstance(chosen, str) and chosen:
        return chosen  # checked by the proxy on the first call ("Model '<id>' is not authorized")
    return granted[0] if granted else None


async def _refuse(request: ApprovalRequest) -> ApprovalDecision:
    """The approver of a run nobody can answer (no ``Interactions``): every such call is denied."""
    return ApprovalDecision(
        allow=False,
        reason="this run cannot wait for an approval (its host answers none); "
        f"grant {request.toolkit!r} with approval: auto to let it run",
    )


def _approver(interactions: Interactions, deadline: float | None) -> Approver:
    from codeact.engine.agent.support import APPROVAL_REQUEST_ID

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        request_id = APPROVAL_REQUEST_ID.get() or f"call-{request.sequence}"
        asked = approval_request(
            request_id,
            toolkit=request.toolkit,
            operation=request.operation,
            arguments=request.arguments,
            expires_at=deadline,
        )
        return decision_from(await interactions.wait(asked))

    return approve


class FlowRunner(BlueprintRunner):
    """A flow blueprint as a runner (built by :meth:`BlueprintRunner.from_blueprint`).

    A flow's steps run with their blueprints' own grants and take no caller context (by design,
    docs/runner.md): a run of a flow gets no ``attachments``, ``host``, ``knowledge`` or ``platform_api``
    toolkit (whatever the manifest's ``permissions`` list), its steps are not told the context's locale or
    time zone, and its approvals are not interactions (grant the steps' toolkits ``approval: auto``).

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
        self.manifest = flow_manifest(blueprint, flow, streaming=streams_results(flow, show_work=show_work))

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
        return FlowEvents(self.flow)


_TRACE_ID = re.compile(r"[0-9a-f]{32}")


def _trace_carrier(trace_id: str | None) -> dict[str, str] | None:
    """A W3C ``traceparent`` carrier continuing the host's trace (a fresh parent span id), or None.

    Only a W3C trace id is taken (32 lowercase hex digits, not all zero); anything else is ignored.
    """
    if not isinstance(trace_id, str) or not _TRACE_ID.fullmatch(trace_id) or not int(trace_id, 16):
        return None
    return {"traceparent": f"00-{trace_id}-{secrets.token_hex(8)}-01"}
