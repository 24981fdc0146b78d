"""``Agent``: runs an ``AgentSpec`` as an async stream of events (ARCHITECTURE.md section 7)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from engine.agent.codeact import CodeActLoop
from engine.agent.context import EndRun, Outcome, RunContext
from engine.agent.hooks import Hook
from engine.agent.react import ReactLoop
from engine.agent.support import (
    GRANT_APPROVED,
    Approver,
    EventingBridge,
    ModelAccessAdapter,
    ask_approval,
    grant_policy,
)
from engine.errors import CodeactError
from engine.events import Event, EventSequence, MessageCompleted, RunCompleted, RunFailed, RunStarted, SegmentCreated
from engine.replay import sandbox_note
from engine.store import SessionMeta
from segments import PromptConfig, Segment, SegmentBuilder, SegmentHistory, SegmentKind
from segments.budget import COMPACTED_TAG
from toolkits import ApprovalDecision, ApprovalRequest, ToolkitBridge, ToolkitContext, ToolkitRegistry

if TYPE_CHECKING:
    from engine.blueprint import AgentSpec
    from engine.model import ModelClient
    from engine.store import Store
    from sandbox import RpcHandler, Sandbox

__all__ = ["Agent", "RunResult", "SandboxFactory", "default_sandbox_factory", "grants_for"]

SandboxFactory = Callable[["RpcHandler", "AgentSpec"], "Sandbox"]


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """How a run ended (the last event, as a value).

    Attributes:
        run_id: The run.
        session_id: The session (pass it as ``session_id`` to continue).
        status: ``completed``, ``paused`` (waiting for the user) or ``failed``.
        answer: The final answer, or the question when paused.
        reason: Why it ended (``finished``, ``ask_user``, ``max_turns``, ``stuck``, ...).
        rounds: Rounds recorded in the session so far.
        error: ``{"code", "message"}`` when failed.
    """

    run_id: str
    session_id: str
    status: Literal["completed", "paused", "failed"]
    answer: Any = None
    reason: str = ""
    rounds: int = 0
    error: dict[str, Any] | None = None


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
    *, backend: Literal["subprocess", "docker"] | None = None, isolation: Literal["bwrap", "process"] = "bwrap"
) -> SandboxFactory:
    """A factory building the spec's sandbox (``backend`` overrides the blueprint's choice)."""

    def _make(handler: RpcHandler, spec: AgentSpec) -> Sandbox:
        from engine.agent.sandboxes import declared_environment, limits_for, make_sandbox

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
            cpus=declared.limits.cpus,
        )

    return _make


class Agent:
    """A CodeAct (or ReAct) agent built from an ``AgentSpec`` and the host's parts.

    Args:
        spec: What the factory resolved from the blueprint.
        model: The model client (routes ``code``/``thought``/``utility``).
        store: Where sessions are recorded (SQLite or Redis).
        registry: The toolkits the blueprint's grants resolve against (``system`` is added).
        sandbox_factory: Builds the sandbox of a run from the bridge handler and the spec.
        approver: Asked when a call needs approval; None denies such calls with a reason.
        hooks: Before/after agent and model hooks.
        interceptors: Model and tool interceptors (first registered is outermost).
        stream: Stream model replies as ``message.delta`` events.
        user: Who the agent acts for (passed to toolkits in their context).
    """

    def __init__(
        self,
        spec: AgentSpec,
        *,
        model: ModelClient,
        store: Store,
        registry: ToolkitRegistry | None = None,
        sandbox_factory: SandboxFactory | None = None,
        approver: Approver | None = None,
        hooks: Sequence[Hook] = (),
        interceptors: Sequence[Any] = (),
        stream: bool = True,
        user: str | None = None,
    ) -> None:
        self.spec = spec
        self.model = model
        self.store = store
        self.registry = registry if registry is not None else ToolkitRegistry.from_entry_points()
        self.sandbox_factory = sandbox_factory or default_sandbox_factory()
        self.approver = approver
        self.hooks = tuple(hooks)
        self.interceptors = tuple(interceptors)
        self.stream = stream
        self.user = user
        self.grants, self.policies = grants_for(spec)
        if spec.subagents:
            # Sub-agents are the operations of an ``agents`` toolkit only this agent is granted;
            # the host's registry is copied, not changed.
            from engine.agent.subagents import SUBAGENT_TOOLKIT, SubagentToolkit

            own = ToolkitRegistry()
            for name in self.registry.names():
                bound = self.registry.get(name)
                if bound is not None and name != SUBAGENT_TOOLKIT:
                    own.register(bound)
            own.register(SubagentToolkit(self, spec.subagents))
            self.registry = own
            self.grants[SUBAGENT_TOOLKIT] = "*"
        codeact = spec.codeact
        fim_tokens = None
        if codeact.fim_markers is not None:
            m = codeact.fim_markers
            fim_tokens = {"family": "custom", "prefix": m.prefix, "suffix": m.suffix, "middle": m.middle}
        variables = {k: v for k, v in spec.variables.items() if isinstance(v, str | int | float | bool)}
        self.prompt_config = PromptConfig.from_blueprint(
            instructions={
                "system": spec.instructions.system,
                "developer": spec.instructions.developer,
                "variables": variables,
            },
            protocol=codeact.protocol,
            model=spec.model.model,
            fim=codeact.fim_family or "auto",
            fim_tokens=fim_tokens,
        )

    # -- public API ----------------------------------------------------------------------------
    async def run(self, input: str, *, session_id: str | None = None) -> AsyncGenerator[Event, None]:
        """Run the agent on ``input``; yields events, the last being ``run.completed`` or ``run.failed``.

        To stop early, iterate inside ``contextlib.aclosing(agent.run(...))``: closing the iterator
        cancels the run (the round in progress is not recorded). An iterator that is merely dropped
        is only closed when the garbage collector finalizes it, and the run goes on until then.

        Args:
            input: The user's message.
            session_id: Continue this session (history and variables restored), or start it.
        """
        run_id = uuid.uuid4().hex
        sequence = EventSequence(run_id)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        def emit(cls: type[Event], /, **payload: Any) -> Event:
            event = sequence.emit(cls, **payload)
            queue.put_nowait(event)
            return event

        task = asyncio.create_task(self._drive(input, session_id or uuid.uuid4().hex, run_id, emit))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def invoke(
        self, input: str, *, session_id: str | None = None, on_event: Callable[[Event], None] | None = None
    ) -> RunResult:
        """Run to the end and return the result (``on_event`` sees every event)."""
        last: Event | None = None
        session = session_id or ""
        async for event in self.run(input, session_id=session_id):
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunStarted):
                session = event.session_id
            last = event
        return _result(last, session)

    def run_sync(
        self, input: str, *, session_id: str | None = None, on_event: Callable[[Event], None] | None = None
    ) -> RunResult:
        """Synchronous convenience wrapper around :meth:`invoke`."""
        return asyncio.run(self.invoke(input, session_id=session_id, on_event=on_event))

    # -- one run ---------------------------------------------------------------------------------
    async def _drive(self, input: str, session_id: str, run_id: str, emit: Callable[..., Event]) -> None:
        # Invariants of the stream: run.started first, run.completed/run.failed last, even when the
        # run fails before it could open the session (busy, store down).
        state = _DriveState()

        def tracked(cls: type[Event], /, **payload: Any) -> Event:
            if cls is RunStarted:
                state.started = True
            return emit(cls, **payload)

        try:
            async with self.store.lock(session_id):
                try:
                    ctx = state.ctx = await self._open_session(input, session_id, run_id, tracked)
                    outcome = await self._run_loop(ctx)
                    await ctx.after_agent()
                    await self.store.update_session(session_id, status=outcome.status)
                except CodeactError:
                    # Only the run holding the lock may mark the session failed (never a busy one).
                    with contextlib.suppress(CodeactError):
                        if await self.store.get_session(session_id) is not None:
                            await self.store.update_session(session_id, status="failed")
                    raise
            if outcome.status == "failed":
                error = outcome.error or {"code": "run.failed", "message": outcome.reason}
                emit(RunFailed, error=error, rounds=ctx.recorded)
            else:
                emit(RunCompleted, answer=outcome.answer, reason=outcome.reason, rounds=ctx.recorded)
        except CodeactError as exc:
            if not state.started:
                meta = None
                with contextlib.suppress(CodeactError):
                    meta = await self.store.get_session(session_id)
                self._emit_started(emit, session_id, input, resumed=meta is not None)
            emit(
                RunFailed,
                error={"code": exc.code, "message": exc.message},
                retryable=_retryable(exc),
                rounds=state.ctx.recorded if state.ctx is not None else 0,
            )

    def _emit_started(self, emit: Callable[..., Event], session_id: str, input: str, *, resumed: bool) -> None:
        spec = self.spec
        emit(
            RunStarted,
            session_id=session_id,
            blueprint_id=spec.id,
            model=spec.model.model,
            input=input,
            resumed=resumed,
        )

    async def _open_session(self, input: str, session_id: str, run_id: str, emit: Callable[..., Event]) -> RunContext:
        spec = self.spec
        meta = await self.store.get_session(session_id)
        if meta is None:
            await self.store.create_session(
                SessionMeta(
                    session_id=session_id,
                    blueprint_id=spec.id,
                    blueprint_hash=spec.blueprint_hash,
                    model=spec.model.model,
                    title=input[:80],
                    input=input,
                    extra={"kind": spec.kind, "grants": self.grants},
                )
            )
            history, variables, done = SegmentHistory(), {}, 0
        else:
            history = _restore_history(await self.store.segments(session_id))
            variables, done = await self.store.variables(session_id), meta.rounds
            await self.store.update_session(session_id, status="active")
        self._emit_started(emit, session_id, input, resumed=meta is not None)
        ctx = RunContext(
            spec=spec,
            run_id=run_id,
            session_id=session_id,
            input=input,
            model=self.model,
            store=self.store,
            history=history,
            variables=dict(variables),
            emit=emit,
            hooks=self.hooks,
            interceptors=self.interceptors,
            stream=self.stream,
            round=done,
            first_round=done + 1,
            recorded=done,
        )
        user = history.add(SegmentKind.USER, input, round_index=done)
        ctx.pending_segments.append(user)
        emit(SegmentCreated, segment=user.model_dump(mode="json"), round=done)
        return ctx

    def _bridge(self, ctx: RunContext) -> tuple[ToolkitBridge, EventingBridge]:
        def express(kind: str, data: dict[str, Any]) -> None:
            if kind == "express" and isinstance(data.get("text"), str):
                segment = ctx.history.add(SegmentKind.EXPRESS, data["text"], round_index=ctx.round)
                ctx.pending_segments.append(segment)
                ctx.emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=ctx.round)
                ctx.emit(MessageCompleted, text=data["text"], purpose="express", round=ctx.round)

        async def approve(request: ApprovalRequest) -> ApprovalDecision:
            if GRANT_APPROVED.get():
                return ApprovalDecision(allow=True, reason="approved for its grant")
            return await ask_approval(
                self.approver, ctx.emit, request, request_id=f"approval-{request.sequence}", round_index=ctx.round
            )

        model_access = ModelAccessAdapter(lambda call: ctx.call_model(call.purpose, messages=call.messages))
        bridge = ToolkitBridge(
            self.registry,
            grants=self.grants,
            context=ToolkitContext(
                session_id=ctx.session_id, run_id=ctx.run_id, user=self.user, model=model_access, emit=express
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
            policies=self.policies,
            approver=self.approver,
            interceptors=self.interceptors,
        )
        return bridge, handler

    async def _note_sandbox(self, session_id: str, sandbox: Sandbox) -> None:
        # Replay rebuilds the same sandbox (backend, policy) from this note.
        meta = await self.store.get_session(session_id)
        extra = dict(meta.extra) if meta is not None else {}
        extra["sandbox"] = sandbox_note(sandbox, deadline_s=self.spec.sandbox.limits.timeout_seconds)
        from engine.agent.sandboxes import env_note

        declared_env = env_note(self.spec.sandbox)
        if declared_env is not None:
            extra["sandbox"]["env"] = declared_env
        await self.store.update_session(session_id, extra=extra)

    async def _run_loop(self, ctx: RunContext) -> Outcome:
        bridge, handler = self._bridge(ctx)
        ctx.bridge, ctx.handler = bridge, handler
        try:
            await ctx.before_agent()
            if self.spec.kind == "react":
                return await ReactLoop(ctx, handler).run()
            sandbox = self.sandbox_factory(handler, self.spec)
            ctx.sandbox = sandbox
            await self._note_sandbox(ctx.session_id, sandbox)
            try:
                builder = SegmentBuilder(self.prompt_config, stubs=bridge.stubs())
                return await CodeActLoop(ctx, builder, sandbox).run()
            finally:
                await sandbox.aclose()
        except EndRun as exc:
            return Outcome(status="completed", reason="hook", answer=exc.reason)


_RETRYABLE_STORE_CODES = frozenset({"store.unavailable", "store.session_busy"})


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


def _retryable(exc: CodeactError) -> bool:
    """Model errors say so themselves; a store outage or a busy session may pass too."""
    flag = getattr(exc, "retryable", None)
    if isinstance(flag, bool):
        return flag
    return exc.code in _RETRYABLE_STORE_CODES


@dataclass
class _DriveState:
    started: bool = False
    ctx: RunContext | None = None


def _result(last: Event | None, session_id: str) -> RunResult:
    if isinstance(last, RunCompleted):
        status: Literal["completed", "paused"] = "paused" if last.reason == "ask_user" else "completed"
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status=status,
            answer=last.answer,
            reason=last.reason,
            rounds=last.rounds,
        )
    if isinstance(last, RunFailed):
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status="failed",
            reason=str(last.error.get("code", "")),
            rounds=last.rounds,
            error=dict(last.error),
        )
    raise CodeactError("the run ended without run.completed or run.failed (engine bug: please report it)")
