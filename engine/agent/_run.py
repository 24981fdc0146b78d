"""One run, top to bottom: from ``Agent.run``'s input to ``run.completed`` or ``run.failed``.

``Agent.run`` (``agent.py``) hands a run its :class:`~codeact.engine.agent._wiring.Wiring` (what the
agent is built from) and its input; everything else one run does happens here, in this order, on one
object, the run's :class:`~codeact.engine.agent.context.RunContext`:

1. :func:`stream`, all ``Agent.run`` calls: first :func:`start_run`, the input read (``_input.py``) into a
   new ``RunContext``, before any event;
2. then the run goes on in a task of its own and its events are yielded as they come; closing the
   stream cancels the run (the round in progress is recorded as ``interrupted``).
3. ``_traced``: the run's spans (``engine.telemetry``; a no-op unless tracing is on).
4. ``_locked``: the session lock; the toolkit calls a dead run left behind are folded into an
   ``interrupted`` round first (``recovery.py``); a cancel or an error sets the session's status.
5. ``_open_session``: a new session, or the stored one resumed (its history and variables);
   ``run.started``; the input's segments (history messages, the caller's context, the task).
6. ``_loop``, within ``workflow.runSeconds`` (``_within``): the run's memory, its toolkit bridge
   (``engine.calls.call_bridge``: the bridge with the engine's call wrappers), the ``before_agent`` hooks, then
   react's turns (``react.py``), or the sandbox, the prompt (memory, knowledge) and the CodeAct rounds
   (``codeact.py``).
7. ``_end``: memory's summary and experience, the ``after_agent`` hooks, the last pending write, the
   session's status; then ``run.completed`` or ``run.failed``, the last event.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import operator
import uuid
from collections.abc import AsyncGenerator, Coroutine, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.agent._files import image_parts, place_files, task_with_files
from codeact.engine.agent._input import AgentInput, RunConfig, context_text, labelled, resolve_run, run_input
from codeact.engine.agent._wiring import layout_for
from codeact.engine.agent.codeact import CodeActLoop
from codeact.engine.agent.context import EndRun, Outcome, RunContext, RunDeps
from codeact.engine.agent.launched import SessionTasks
from codeact.engine.agent.react import ReactLoop
from codeact.engine.agent.recovery import CallJournal, fold_pending, mark_opened_interrupted
from codeact.engine.agent.runs import SESSION_LINK
from codeact.engine.agent.support import ModelAccessAdapter
from codeact.engine.calls import Resumed, call_bridge
from codeact.engine.errors import CodeactError, ErrorInfo
from codeact.engine.events import Event, MessageCompleted, RunCompleted, RunFailed, RunStarted
from codeact.engine.replay import sandbox_note, session_hash_seed
from codeact.engine.store import SessionMeta
from codeact.sandbox.aio import cancel_and_wait
from codeact.segments import PromptConfig, Segment, SegmentBuilder, SegmentHistory, SegmentKind
from codeact.segments.budget import COMPACTED_TAG
from codeact.toolkits import DEFAULT_BUDGETS, ToolkitBridge, ToolkitContext
from codeact.toolkits.tasks import TaskBoard

if TYPE_CHECKING:
    from codeact.engine.agent._wiring import Wiring
    from codeact.engine.store import SessionLock
    from codeact.sandbox import Sandbox

__all__ = ["KNOWLEDGE_TAG", "start_run", "stream"]

KNOWLEDGE_TAG = "knowledge"

_DEFAULT_WINDOW = 32_768
_log = logging.getLogger("codeact.memory")


# -- 1, 2: the run's state, its task and its events ---------------------------------------------------
def start_run(
    wiring: Wiring,
    input: AgentInput,
    *,
    session_id: str | None,
    user: str | None,
    config: RunConfig | None,
    context: Mapping[str, object] | None,
) -> RunContext:
    """The state of a new run of ``input`` (nothing runs yet).

    Raises:
        CodeactError: ``input.invalid``, ``input.file_name``, ``input.image_url``, ``input.too_large``,
            ``input.files_unsupported``, ``config.invalid`` or ``context.invalid``.
    """
    read = run_input(input)
    config, session_id, user = resolve_run(config, session_id, user)
    deps = RunDeps(
        spec=wiring.spec,
        run_id=uuid.uuid4().hex,
        session_id=session_id or uuid.uuid4().hex,
        input=task_with_files(read.task, read.files, kind=wiring.spec.kind),
        model=wiring.model,
        store=wiring.store,
        hooks=wiring.hooks,
        interceptors=wiring.interceptors,
        stream=wiring.stream,
        user=user if user is not None else wiring.user,
        inputs=read.history,
        labels=config.labels(),
        config=config,
        output=wiring.output,
        caller_context=context_text(context),
        input_files=read.files,
    )
    return RunContext(deps)


async def stream(
    wiring: Wiring,
    input: AgentInput,
    *,
    session_id: str | None,
    user: str | None,
    config: RunConfig | None,
    context: Mapping[str, object] | None,
) -> AsyncGenerator[Event, None]:
    """Start the run (:func:`start_run`), run it in a task of its own and yield its events.

    Closing the generator cancels the run. An input :func:`start_run` refuses raises before any event.
    """
    ctx = start_run(wiring, input, session_id=session_id, user=user, config=config, context=context)
    task = asyncio.create_task(_traced(ctx, wiring))
    task.add_done_callback(lambda _t: ctx.emitter.events.put_nowait(None))
    try:
        while (event := await ctx.emitter.events.get()) is not None:
            yield event
        await task
    finally:
        if not task.done():
            # No round starts after this, even if something inside the run swallowed the cancel
            # (Python 3.11's asyncio.wait_for does, as its call completes): the cancel is repeated
            # until the run takes it, then its clean-up (recording the round) runs undisturbed.
            ctx.state.stopping = True
            await cancel_and_wait(task, acknowledged=lambda: ctx.state.cancelled)
            if not task.cancelled():
                task.result()  # an error of the run's clean-up surfaces as before


# -- 3: the run's spans -----------------------------------------------------------------------------
async def _traced(ctx: RunContext, wiring: Wiring) -> None:
    from codeact.engine.telemetry import start_run as start_trace

    spec = ctx.deps.spec
    options = spec.blueprint.extensions.get("telemetry") if spec.blueprint is not None else None
    trace = start_trace(
        run_id=ctx.deps.run_id,
        session_id=ctx.session_id,
        agent_id=spec.id,
        model=spec.model.model,
        kind=spec.kind,
        options=options if isinstance(options, dict) else None,
    )
    ctx.deps = replace(ctx.deps, trace=trace)
    span = getattr(ctx.deps.trace, "run_span", None)
    if span is not None and ctx.deps.labels:
        if ctx.deps.labels.get("tags"):
            span.set_attribute("codeact.tags", list(ctx.deps.labels["tags"]))
        for key, value in ctx.deps.labels.get("metadata", {}).items():
            text = value if isinstance(value, str | int | float | bool) else json.dumps(value, ensure_ascii=False)
            span.set_attribute(f"codeact.metadata.{key}", text)
    try:
        await _locked(ctx, wiring)
    finally:
        ctx.deps.trace.end(status="interrupted")  # a cancelled run (the span ends once)


def _run_rounds(ctx: RunContext) -> int:
    """The rounds this run recorded (a continued session's earlier rounds not counted)."""
    return max(0, ctx.state.recorded - ctx.state.first_round + 1)


def _completed(ctx: RunContext, outcome: Outcome) -> None:
    ctx.emit(
        RunCompleted,
        answer=outcome.answer,
        reason=outcome.reason,
        rounds=ctx.state.recorded,
        run_rounds=_run_rounds(ctx),
    )
    status = "paused" if outcome.reason == "ask_user" else "completed"
    ctx.deps.trace.end(status=status, reason=outcome.reason, rounds=ctx.state.recorded)


def _failed(ctx: RunContext, info: ErrorInfo, *, retryable: bool = False) -> None:
    error = info.to_dict()  # run.failed's {"code", "message"}
    ctx.emit(RunFailed, error=error, retryable=retryable, rounds=ctx.state.recorded, run_rounds=_run_rounds(ctx))
    ctx.deps.trace.end(status="failed", error=error, rounds=ctx.state.recorded)


# -- 4: the session lock, and what a cancel or an error leaves behind -------------------------------------
_RETRYABLE_STORE_CODES = frozenset({"store.unavailable", "store.busy", "store.session_busy"})


async def _locked(ctx: RunContext, wiring: Wiring) -> None:
    # Invariants of the stream: run.started first, run.completed/run.failed last, even when the
    # run fails before it could open the session (busy, store down).
    link, _ = SESSION_LINK.get(), SESSION_LINK.set(None)  # this task's context only
    store, session_id = ctx.deps.store, ctx.session_id
    try:
        async with store.lock(session_id) as lock:
            try:
                # A run that died mid-round left its completed calls behind: record them first.
                await fold_pending(store, session_id, fence=lock.token, reason=_gone_reason(lock))
                await _open_session(ctx, wiring, link)
                ctx.recorder.fence = lock.token
                ctx.recorder.writer = CallJournal(store, session_id)
                if (images := image_parts(ctx.deps.model, ctx.deps.spec, ctx.deps.input_files)) is not None:
                    ctx.deps = replace(ctx.deps, interceptors=(*ctx.deps.interceptors, images))
                outcome = await _within(ctx.deps.spec.run_seconds, _loop(ctx, wiring), ctx)
                await _end(ctx, outcome)
            except asyncio.CancelledError:
                # Ctrl-C or a cancel: keep what the round in progress did, then stop.
                ctx.state.cancelled = True
                if ctx.state.started:
                    await ctx.recorder.record_interrupted(reason="Ctrl-C or a cancel stopped the run")
                else:
                    await mark_opened_interrupted(store, session_id)
                raise
            except CodeactError as exc:
                if exc.code == "store.unavailable":
                    pass  # the store is down: the session reads `interrupted` once it is back (repair_status)
                elif exc.code != "store.lock_lost":  # a fenced-out run must not touch the new owner's session
                    # Only the run holding the lock may mark the session failed (never a busy one).
                    with contextlib.suppress(CodeactError):
                        await _fail_session(ctx)
                raise
            finally:
                if ctx.recorder.writer is not None:
                    await ctx.recorder.writer.aclose()
                    ctx.recorder.writer = None
                if ctx.deps.memory is not None:
                    await ctx.deps.memory.close()
        if outcome.status == "failed":
            _failed(ctx, outcome.error or ErrorInfo(code="run.failed", message=outcome.reason))
        else:
            _completed(ctx, outcome)
    except CodeactError as exc:
        if not ctx.state.started:
            meta = None
            with contextlib.suppress(CodeactError):
                meta = await store.get_session(session_id)
            _emit_started(ctx, resumed=meta is not None)
        _failed(ctx, exc.info(), retryable=_retryable(exc))


async def _fail_session(ctx: RunContext) -> None:
    """Mark the session failed, or remove it when this run created it and left it empty.

    Empty: the run failed before its first round recorded anything, no code ran and no toolkit call is
    journaled (a refused key, an unknown model), so ``sessions list`` and the console show no empty
    failed session.
    """
    store, session_id = ctx.deps.store, ctx.session_id
    if ctx.state.created_session and ctx.state.recorded == 0 and ctx.state.current_code is None:
        if ctx.recorder.writer is not None:
            await ctx.recorder.writer.aclose()  # started/completed entries are durable before their call goes on
            ctx.recorder.writer = None
        if not await store.pending(session_id):
            await store.delete_session(session_id)
            return
    if await store.get_session(session_id) is not None:
        await store.update_session(session_id, status="failed")


def _gone_reason(lock: SessionLock) -> str:
    """Why the session's previous run stopped mid-round, as far as the lock tells."""
    if lock.took_over is not None:
        return f"its run's process {lock.took_over.owner} died"
    return "its run stopped before recording it: the host process died, the store became unavailable, or the run failed"


def _retryable(exc: CodeactError) -> bool:
    """Model errors say so themselves; a store outage or a busy session may pass too."""
    flag = getattr(exc, "retryable", None)
    if isinstance(flag, bool):
        return flag
    return exc.code in _RETRYABLE_STORE_CODES


# -- 5: the session, new or resumed, and the input's segments -----------------------------------------
async def _open_session(ctx: RunContext, wiring: Wiring, link: Mapping[str, object] | None) -> None:
    spec, store, session_id = ctx.deps.spec, ctx.deps.store, ctx.session_id
    meta = await store.get_session(session_id)
    if meta is None:
        ctx.state.created_session = True
        await store.create_session(
            SessionMeta(
                session_id=session_id,
                blueprint_id=spec.id,
                blueprint_hash=spec.blueprint_hash,
                model=spec.model.model,
                title=ctx.deps.input[:80],
                input=ctx.deps.input,
                extra={
                    "kind": spec.kind,
                    "grants": wiring.grants,
                    **(link or {}),
                    **labelled({}, ctx.deps.labels),
                    "trace_id": _run_trace_id(ctx),
                },
            )
        )
    else:
        await store.check_session(session_id)  # an unreadable entry refuses the resume, naming it
        ctx.state.history = _restore_history(await store.segments(session_id))
        ctx.state.variables = dict(await store.variables(session_id))
        ctx.state.round = ctx.state.recorded = meta.rounds
        ctx.state.first_round = meta.rounds + 1
        last = await store.round(session_id, meta.rounds) if meta.rounds else None
        if last is not None and last.status == "interrupted":
            ctx.state.resumes_round = last.index  # the first round's calls keep the interrupted round's ids
            ctx.state.resumed_calls = tuple(last.calls)  # and those it completed are answered from its record
        extra = {**labelled(meta.extra, ctx.deps.labels), "trace_id": _run_trace_id(ctx)}
        await store.update_session(session_id, status="active", extra=extra)
    _emit_started(ctx, resumed=meta is not None)
    for kind, text in ctx.deps.inputs:  # the input's history messages (Agent.run of a list of messages)
        ctx.add_segment(kind, text, tags=("input",))
    if ctx.deps.caller_context is not None:  # the caller's context (Agent.run(context=...), --context)
        ctx.add_segment(SegmentKind.CONTEXT, ctx.deps.caller_context, tags=("caller",))
    if ctx.deps.output is not None:  # the answer's shape (Agent(output_type=...), outputSchema)
        ctx.add_segment(SegmentKind.CONTEXT, ctx.deps.output.intro(), tags=("output",))
    ctx.add_segment(SegmentKind.USER, ctx.deps.input)


def _emit_started(ctx: RunContext, *, resumed: bool) -> None:
    ctx.state.started = True
    spec = ctx.deps.spec
    chat = spec.kind == "codeact" and spec.codeact.protocol == "chat"
    layout = layout_for(spec) if chat else None
    ctx.emit(
        RunStarted,
        session_id=ctx.session_id,
        blueprint_id=ctx.deps.spec.id,
        model=ctx.deps.spec.model.model,
        input=ctx.deps.input,
        resumed=resumed,
        tags=tuple(ctx.deps.labels.get("tags", ())),
        metadata=dict(ctx.deps.labels.get("metadata", {})),
        trace_id=_run_trace_id(ctx),
        layout=layout.layout if layout is not None else "",
        layout_reason=layout.reason if layout is not None else "",
    )


def _restore_history(stored: Sequence[Mapping[str, object]]) -> SegmentHistory:
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


# -- 6: the run's wiring, then its loop -------------------------------------------------------------------
async def _within(seconds: float | None, loop: Coroutine[object, object, Outcome], ctx: RunContext) -> Outcome:
    """Await the run's ``loop`` for at most ``seconds`` (``workflow.runSeconds``; None: no limit).

    The round's own limit (seconds of code, host time not counted) is the sandbox's business; this one is
    wall-clock time over everything the run does: model calls, rounds, toolkit calls, approvals and
    sub-agents. When the time is up the loop is cancelled (the round in progress is recorded as
    ``interrupted`` with the toolkit calls it completed) and the run fails with ``run.time_limit``.
    """
    if seconds is None:
        return await loop
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await loop
    except TimeoutError:
        if not scope.expired():
            raise  # a TimeoutError of the run's own, not the limit
    reason = f"the run passed its time limit of {seconds:g} s (workflow.runSeconds)"
    await ctx.recorder.record_interrupted(reason=reason)
    message = f"{reason}; the round in progress was stopped. Raise workflow.runSeconds, or continue the session"
    return Outcome(status="failed", reason="time_limit", error=ErrorInfo(code="run.time_limit", message=message))


async def _loop(ctx: RunContext, wiring: Wiring) -> Outcome:
    await _open_memory(ctx, base_url=getattr(wiring.model, "base_url", None))
    bridge, handler = _bridge(ctx, wiring)
    ctx.deps = replace(ctx.deps, bridge=bridge, handler=handler)
    try:
        await ctx.caller.before_agent()
        if ctx.deps.spec.kind == "react":
            return await ReactLoop(ctx, handler, knowledge=_react_knowledge(ctx, wiring)).run()
        sandbox = wiring.sandbox_factory(handler, ctx.deps.spec)
        place_files(sandbox, ctx.deps.input_files)
        await _note_sandbox(ctx, sandbox)
        try:
            config = await _memory_prompt(ctx, wiring.prompt_config)
            config = _knowledge_prompt(ctx, wiring, config)
            builder = SegmentBuilder(config, stubs=bridge.stubs())
            return await CodeActLoop(ctx, builder, sandbox).run()
        finally:
            await sandbox.aclose()
    except EndRun as exc:
        return Outcome(status="completed", reason="hook", answer=exc.reason)


def _bridge(ctx: RunContext, wiring: Wiring) -> tuple[ToolkitBridge, ToolkitBridge]:
    """The run's toolkit bridge (with the engine's call wrappers, ``engine.calls``), twice: bridge and handler."""

    def express(kind: str, data: dict[str, Any]) -> None:
        if kind == "express" and isinstance(data.get("text"), str):
            ctx.add_segment(SegmentKind.EXPRESS, data["text"])
            ctx.emit(MessageCompleted, text=data["text"], purpose="express", round=ctx.state.round)
        elif kind == "a2a.update":  # a remote agent's progress (toolkits.a2a), shown as it streams
            text = f"[{data.get('agent')}] {data.get('state')}: {data.get('text') or ''}".rstrip(": ")
            ctx.emit(MessageCompleted, text=text, purpose="a2a", round=ctx.state.round)

    model_access = ModelAccessAdapter(lambda call: ctx.caller.call_model(call.purpose, messages=call.messages))
    bridge = call_bridge(
        wiring.registry,
        grants=wiring.grants,
        context=ToolkitContext(
            session_id=ctx.session_id,
            trace_id=_run_trace_id(ctx),
            run_id=ctx.deps.run_id,
            user=ctx.deps.user,
            model=model_access,
            emit=express,
            memory=ctx.deps.memory.access if ctx.deps.memory is not None else None,
            tasks=TaskBoard(SessionTasks(ctx.deps.store, ctx.session_id)),  # system.tasks(), kept in the session
        ),
        budgets=ctx.deps.spec.codeact.budgets or DEFAULT_BUDGETS,  # workflow.codeact.budgets under the host's caps
        # What a call reads of the run, as bound methods and attribute getters: a call's own path never
        # runs the run's code (engine/agent); the run's state and deps are read when the call arrives.
        emit=ctx.emitter.emit,
        round_ref=functools.partial(getattr, ctx.state, "round"),
        policies=wiring.policies,
        approver=wiring.approver,
        interceptors=wiring.interceptors,
        trace=functools.partial(operator.attrgetter("deps.trace"), ctx),
        # each call's start and end are durable before it goes on (engine.calls)
        journal=functools.partial(operator.attrgetter("recorder.writer"), ctx),
        resumes=_resumed(ctx),
    )
    return bridge, bridge


def _resumed(ctx: RunContext) -> Resumed | None:
    """The interrupted round the run resumes, for its call pipeline (None: it resumes none)."""
    state = ctx.state
    if not state.resumes_round:
        return None

    def answered(record: Mapping[str, object]) -> None:
        state.from_record.append({"round": state.resumes_round, **record})

    return Resumed(
        interrupted=state.resumes_round, first_round=state.first_round, calls=state.resumed_calls, answered=answered
    )


def _run_trace_id(ctx: RunContext) -> str:
    """The run's trace id: its span's OpenTelemetry trace id (32 hex digits) when tracing is on, else the run id.

    The run id is a fresh 32-hex-digit id too, so logs, ``run.started``, the session record and the
    toolkits' ``ToolkitContext.trace_id`` correlate the same way with tracing off.
    """
    span = getattr(ctx.deps.trace, "run_span", None)
    trace_id = span.get_span_context().trace_id if span is not None else 0
    return f"{trace_id:032x}" if trace_id else ctx.deps.run_id


async def _note_sandbox(ctx: RunContext, sandbox: Sandbox) -> None:
    """Note the sandbox in the session's metadata: replay rebuilds the same one (backend, policy) from it."""
    from codeact.engine.agent.sandboxes import env_note

    meta = await ctx.deps.store.get_session(ctx.session_id)
    extra = dict(meta.extra) if meta is not None else {}
    sandbox.hash_seed = session_hash_seed(extra.get("sandbox"))  # the session's, kept on resume
    extra["sandbox"] = sandbox_note(sandbox, deadline_s=ctx.deps.spec.codeact.round_seconds)
    declared_env = env_note(ctx.deps.spec.sandbox)
    if declared_env is not None:
        extra["sandbox"]["env"] = declared_env
    await ctx.deps.store.update_session(ctx.session_id, extra=extra)


async def _open_memory(ctx: RunContext, *, base_url: str | None) -> None:
    """Open the run's memory (``ctx.deps.memory``; stays None when the blueprint enables none)."""
    if ctx.deps.spec.session.memory is None or not ctx.deps.spec.session.memory.enabled:
        return
    from codeact.engine.memory import open_run_memory

    memory = await open_run_memory(
        ctx.deps.spec, ctx.deps.store, session_id=ctx.session_id, user=ctx.deps.user, embedding_base=base_url
    )
    ctx.deps = replace(ctx.deps, memory=memory)


async def _memory_prompt(ctx: RunContext, config: PromptConfig) -> PromptConfig:
    """Before the first code round: the Context segment and the Experience section from memory."""
    memory = ctx.deps.memory
    if memory is None:
        return config
    from codeact.engine.memory import memory_budget

    compact = ctx.deps.spec.session.compact
    ratio = (compact.context_ratio or 0.75) if compact is not None and compact.enabled else None
    window = ctx.deps.spec.model.context_window or ctx.deps.model.context_window(purpose="code") or _DEFAULT_WINDOW
    budget = memory_budget(memory.config, window=window, compact_ratio=ratio)

    def count(text: str) -> int:
        return ctx.deps.model.count_tokens(text, purpose="code")

    found = await memory.prepare(ctx.deps.input, budget=budget, count=count)
    if found.context:
        last = ctx.state.history.last(SegmentKind.CONTEXT)
        if last is None or last.content != found.context:
            ctx.add_segment(SegmentKind.CONTEXT, found.context, tags=("memory",))
    if not found.experiences:
        return config
    return config.model_copy(update={"experiences": (*config.experiences, *found.experiences)})


def _knowledge_prompt(ctx: RunContext, wiring: Wiring, config: PromptConfig) -> PromptConfig:
    """Before the first code round: the blueprint's knowledge chosen for the task (docs/knowledge.md).

    Constraint chunks go into the system prompt's Knowledge section (the same for every task, so the
    system prompt stays cacheable), the matching domain chunks into one Knowledge segment of the task's
    round (recorded with the session, and the same in every round's prompt).
    """
    constraints, _ = _select_knowledge(ctx, wiring)
    if not constraints:
        return config
    return config.model_copy(update={"knowledge": (*config.knowledge, *constraints)})


def _react_knowledge(ctx: RunContext, wiring: Wiring) -> str:
    """React's knowledge: the same selection as codeact's, as text for the end of its system message.

    The constraints as the Knowledge section codeact's system prompt has, then the domain chunks as
    codeact's Knowledge segment says them (that segment is recorded with the session here too).
    """
    constraints, domain = _select_knowledge(ctx, wiring)
    parts = [prompts.render("system_knowledge.j2", knowledge=constraints).strip()] if constraints else []
    if domain is not None:
        parts.append(domain)
    return "\n\n".join(parts)


def _select_knowledge(ctx: RunContext, wiring: Wiring) -> tuple[list[str], str | None]:
    """The task's knowledge: ``(constraint items, domain text or None)``; the domain text is added as a segment."""
    if wiring.knowledge is None:
        return [], None
    selection = wiring.knowledge.select(ctx.deps.input)
    text = None
    if selection.domain:
        sources = sorted({chunk.source for chunk, _ in selection.domain})
        text = prompts.render("knowledge_domain.j2", text=selection.domain_text()).removesuffix("\n")
        ctx.add_segment(SegmentKind.KNOWLEDGE, text, tags=(KNOWLEDGE_TAG, *sources))
    return [c.render() for c in selection.constraints], text


# -- 7: the end of the run ----------------------------------------------------------------------------------
async def _end(ctx: RunContext, outcome: Outcome) -> None:
    await _close_memory(ctx, outcome)
    await ctx.caller.after_agent()
    if ctx.recorder.writer is not None:  # (closed already when the run's time limit stopped it)
        await ctx.recorder.writer.flush(timeout=2.0)  # the last round's "clear" (a few ms)
    await ctx.deps.store.update_session(ctx.session_id, status=outcome.status)


async def _close_memory(ctx: RunContext, outcome: Outcome) -> None:
    """When the run ends: distill and store its summary and experience (never fails the run)."""
    memory = ctx.deps.memory
    if memory is None:
        return

    async def distill(prompt: str) -> Any:
        reply = await ctx.caller.call_model("utility", messages=({"role": "user", "content": prompt},))
        return reply.text

    try:
        rounds = [r for r in await ctx.deps.store.rounds(ctx.session_id) if r.index >= ctx.state.first_round]
        codes: dict[int, str] = {}
        for segment in ctx.state.history.segments:
            if segment.kind == SegmentKind.CODE and segment.round_index >= ctx.state.first_round:
                codes[segment.round_index] = segment.content
        await memory.finish(
            task=ctx.deps.input,
            status=outcome.status,
            reason=outcome.reason,
            answer=outcome.answer,
            rounds=rounds,
            codes=codes,
            run_id=ctx.deps.run_id,
            distill=distill,
        )
    except (CodeactError, EndRun, OSError) as exc:
        _log.warning("memory: the run's summary/experience was not stored: %s", exc)
