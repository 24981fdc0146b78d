"""What an agent is wired from: grants, the sandbox factory, the toolkit bridge, the restored history."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.agent.support import GRANT_APPROVED, EventingBridge, ModelAccessAdapter, ask_approval, grant_policy
from codeact.engine.events import MessageCompleted, SegmentCreated
from codeact.segments import Segment, SegmentHistory, SegmentKind
from codeact.segments.budget import COMPACTED_TAG
from codeact.toolkits import ApprovalDecision, ApprovalRequest, ToolkitBridge, ToolkitContext, ToolkitRegistry

if TYPE_CHECKING:
    from codeact.engine.agent.context import RunContext
    from codeact.engine.blueprint import AgentSpec
    from codeact.sandbox import RpcHandler, Sandbox

SandboxFactory = Callable[["RpcHandler", "AgentSpec"], "Sandbox"]


def grants_for(spec: AgentSpec) -> tuple[dict[str, Any], dict[str, str]]:
    """``(grants, approval policies)`` from ``toolkits[]`` and ``tools[]``; ``system`` is always granted.

    ``tools[].ref`` names a toolkit (``devops``) or one operation (``devops.deploy_app``).
    """
    grants: dict[str, Any] = {"system": "*"}
    policies: dict[str, str] = {}
    for grant in spec.toolkits:
        grants[grant.ref] = "*" if grant.operations is None else list(grant.operations)
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


def default_sandbox_factory(
    *,
    backend: Literal["subprocess", "docker"] | None = None,
    isolation: Literal["bwrap", "process"] = "bwrap",
    runtime: Literal["runc", "gvisor"] | None = None,
) -> SandboxFactory:
    """A factory building the spec's sandbox (``backend``/``runtime`` override the blueprint's choice)."""

    def _make(handler: RpcHandler, spec: AgentSpec) -> Sandbox:
        from codeact.engine.agent.sandboxes import declared_environment, limits_for, make_sandbox

        declared = spec.sandbox
        chosen = backend or declared.backend or "subprocess"
        # Built before the run by the CLI (`codeact run`, `codeact sandbox build`): here a cache hit.
        env = declared_environment(declared, chosen)
        return make_sandbox(
            chosen,
            handler=handler,
            limits=limits_for(declared),
            # Docker's default policy is full CPython: its imports widen only when packages are declared.
            imports=declared.imports if chosen == "subprocess" else (),
            env=env,
            isolation=isolation,
            runtime=runtime or declared.runtime or "runc",
            cpus=declared.limits.cpus,
        )

    return _make


def build_bridge(
    ctx: RunContext,
    *,
    registry: ToolkitRegistry,
    grants: Mapping[str, Any],
    policies: Mapping[str, str],
    approver: Any,
    interceptors: Sequence[Any],
) -> tuple[ToolkitBridge, EventingBridge]:
    """The run's toolkit bridge and the eventing handler the sandbox calls through (from the agent's wiring)."""

    def express(kind: str, data: dict[str, Any]) -> None:
        if kind == "express" and isinstance(data.get("text"), str):
            segment = ctx.history.add(SegmentKind.EXPRESS, data["text"], round_index=ctx.round)
            ctx.pending_segments.append(segment)
            ctx.emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=ctx.round)
            ctx.emit(MessageCompleted, text=data["text"], purpose="express", round=ctx.round)
        elif kind == "a2a.update":  # a remote agent's progress (toolkits.a2a), shown as it streams
            text = f"[{data.get('agent')}] {data.get('state')}: {data.get('text') or ''}".rstrip(": ")
            ctx.emit(MessageCompleted, text=text, purpose="a2a", round=ctx.round)

    async def approve(request: ApprovalRequest) -> ApprovalDecision:
        if GRANT_APPROVED.get():
            return ApprovalDecision(allow=True, reason="approved for its grant")
        return await ask_approval(
            approver, ctx.emit, request, request_id=f"approval-{request.sequence}", round_index=ctx.round
        )

    model_access = ModelAccessAdapter(lambda call: ctx.call_model(call.purpose, messages=call.messages))
    bridge = ToolkitBridge(
        registry,
        grants=grants,
        context=ToolkitContext(
            session_id=ctx.session_id,
            trace_id=_trace_id(ctx.trace) or ctx.run_id,
            run_id=ctx.run_id,
            user=ctx.user,
            model=model_access,
            emit=express,
            memory=ctx.memory.access if ctx.memory is not None else None,
        ),
        approval=approve,
        # The eventing bridge logs and reports every call, including the ones it refuses.
        record=False,
        call_events=False,
    )
    handler = EventingBridge(
        bridge,
        emit=ctx.emit,
        round_ref=lambda: ctx.round,
        policies=policies,
        approver=approver,
        interceptors=interceptors,
        on_call=lambda record: ctx.writer.call(ctx.round, record) if ctx.writer is not None else None,
        trace=lambda: ctx.trace,
    )
    return bridge, handler


def _with_system(registry: ToolkitRegistry) -> ToolkitRegistry:
    """``registry``, or a copy of it with the built-in ``system`` toolkit (every agent is granted it)."""
    if "system" in registry:
        return registry
    from codeact.toolkits.builtin.system import SystemToolkit

    own = ToolkitRegistry(bound for bound in registry)
    own.register(SystemToolkit)
    return own


def _trace_id(run_trace: Any) -> str | None:
    """The OpenTelemetry trace id of the run's span (32 hex digits), or None when tracing is off."""
    span = getattr(run_trace, "run_span", None)
    if span is None:
        return None
    trace_id = span.get_span_context().trace_id
    return f"{trace_id:032x}" if trace_id else None


def _restore_history(stored: Sequence[Mapping[str, Any]]) -> SegmentHistory:
    """The session's history from its stored segments, with recorded compactions applied again.

    A compaction summary (a ``Round`` segment tagged ``compacted``) replaced every segment of rounds
    1..its ``round_index`` when it was made; the store keeps the originals (append-only), so they are
    dropped here and the summary takes the place of the first of them, as ``segments.Compactor`` did.
    """
    kept: list[Segment] = []
    for data in stored:
        segment = Segment.model_validate(data)
        if segment.kind == SegmentKind.ROUND and COMPACTED_TAG in segment.tags:
            covered = [i for i, s in enumerate(kept) if 0 < s.round_index <= segment.round_index]
            if covered:
                kept = [s for s in kept if not 0 < s.round_index <= segment.round_index]
                kept.insert(covered[0], segment)
                continue
        kept.append(segment)
    return SegmentHistory(kept)
