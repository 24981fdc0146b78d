"""``Agent``: runs an ``AgentSpec`` as an async stream of events (ARCHITECTURE.md section 7)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import json
import os
import uuid
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.agent._files import place_files, task_with_files, use_files
from codeact.engine.agent._input import AgentInput, RunConfig, context_text, conversation, resolve_run, run_input
from codeact.engine.agent._knowledge import knowledge_prompt_config
from codeact.engine.agent._lifecycle import Lifecycle
from codeact.engine.agent._memory import end_memory, memory_prompt_config, start_memory
from codeact.engine.agent._results import RunResult, _DriveState, _gone_reason, _result, _retryable
from codeact.engine.agent._time_limit import run_within
from codeact.engine.agent._wiring import (
    SandboxFactory,
    _restore_history,
    _with_system,
    build_bridge,
    default_sandbox_factory,
    grants_for,
)
from codeact.engine.agent.codeact import CodeActLoop
from codeact.engine.agent.context import EndRun, Outcome, RunContext
from codeact.engine.agent.hooks import Hook
from codeact.engine.agent.react import ReactLoop
from codeact.engine.agent.recovery import PendingWriter, fold_pending, mark_opened_interrupted
from codeact.engine.agent.support import Approver
from codeact.engine.errors import CodeactError
from codeact.engine.events import Event, EventSequence, RunCompleted, RunFailed, RunStarted, SegmentCreated
from codeact.engine.model.client import stop_background_tasks
from codeact.engine.model.local import default_layout
from codeact.engine.replay import sandbox_note, session_hash_seed
from codeact.engine.store import SessionMeta
from codeact.sandbox.aio import cancel_and_wait
from codeact.sandbox.runtime.codec import plain
from codeact.segments import PromptConfig, SegmentBuilder, SegmentHistory, SegmentKind
from codeact.toolkits import ToolkitRegistry

if TYPE_CHECKING:
    from codeact.engine.blueprint import AgentSpec, Blueprint, SubagentSpec
    from codeact.engine.knowledge import KnowledgeBase
    from codeact.engine.model import ModelClient
    from codeact.engine.store import Store
    from codeact.sandbox import Sandbox

__all__ = ["Agent", "RunResult", "SandboxFactory", "default_sandbox_factory", "grants_for"]


# Extra session metadata for the next session a run creates in this context (a flow step's link to its
# parent flow, engine.flow); read once by the run, so the run's own sub-agents do not inherit it.
SESSION_LINK: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "codeact_session_link", default=None
)


def _labelled(extra: Mapping[str, Any], labels: Mapping[str, Any] | None) -> dict[str, Any]:
    """A session's ``extra`` with a run's tags (added) and metadata (merged, the run's values win)."""
    out = dict(extra)
    if not labels:
        return out
    if labels.get("tags"):
        out["tags"] = list(dict.fromkeys([*out.get("tags", ()), *labels["tags"]]))
    if labels.get("metadata"):
        out["metadata"] = {**out.get("metadata", {}), **labels["metadata"]}
    return out


class Agent(Lifecycle):
    """A CodeAct (or ReAct) agent: the Python API of codeact.

    Build one from a blueprint file with :meth:`from_blueprint` (the usual way), or from an
    ``AgentSpec`` and the host's parts with the constructor. Then::

        async with Agent.from_blueprint("agent.yaml", toolkits=[DevOps()]) as agent:
            async for event in agent.run("Deploy the API"):   # events, as they happen
                ...
            result = await agent.invoke("And the web app?")   # or just the end

        with Agent.from_blueprint("agent.yaml", toolkits=[DevOps]) as agent:
            result = agent.run_sync("Deploy the API")          # as often as you like

    Args:
        spec: What the factory resolved from the blueprint.
        model: The model client (routes ``code``/``thought``/``utility``).
        store: Where sessions are recorded (SQLite or Redis).
        registry: The toolkits the blueprint's grants resolve against (``system`` is added when
            it is missing; the registry passed in is not changed).
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
        self.registry = _with_system(registry if registry is not None else ToolkitRegistry.from_entry_points())
        # Resources the agent opened itself (from_blueprint): closed by aclose().
        self._init_lifecycle()
        # run_sync() runs every call on this one loop: connections a store or model client opened
        # on it (redis.asyncio binds them to their loop) stay usable from one call to the next.
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
            from codeact.engine.agent.subagents import SUBAGENT_TOOLKIT, SubagentToolkit

            own = ToolkitRegistry()
            for name in self.registry.names():
                bound = self.registry.get(name)
                if bound is not None and name != SUBAGENT_TOOLKIT:
                    own.register(bound)
            own.register(SubagentToolkit(self._subagent, spec.subagents))
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
                # The factory rendered a codeact file's instructions; an ai4j file's are text: never again.
                "literal": True,
            },
            protocol=codeact.protocol,
            layout=codeact.layout or default_layout(spec.model.model, spec.model.provider),
            model=spec.model.model,
            fim=codeact.fim_family or "auto",
            fim_tokens=fim_tokens,
            # inline thought: the code reply is the round's only reply, so it states the next goal too
            next_goal=codeact.thought == "inline",
        )
        # The blueprint's knowledge, read, chunked and indexed once per agent; each run selects from it.
        self.knowledge: KnowledgeBase | None = None
        if spec.knowledge is not None:
            from codeact.engine.knowledge import KnowledgeBase

            self.knowledge = KnowledgeBase.from_settings(spec.knowledge)

    # -- public API ----------------------------------------------------------------------------
    @classmethod
    def from_blueprint(
        cls,
        blueprint: str | os.PathLike[str] | Blueprint,
        *,
        toolkits: Iterable[object] | ToolkitRegistry | None = (),
        model: str | None = None,
        provider: str | None = None,
        base_url: str | None = None,
        profile: str | None = None,
        protocol: Literal["chat", "completion"] | None = None,
        store: str | Store | None = None,
        sandbox: Literal["subprocess", "docker"] | None = None,
        isolation: Literal["bwrap", "process"] = "bwrap",
        allow_sandbox_declaration: bool = False,
        max_round_seconds: float | None = None,
        approver: Approver | None = None,
        hooks: Sequence[Hook] = (),
        interceptors: Sequence[Any] = (),
        stream: bool = True,
        user: str | None = None,
        strict: bool = False,
    ) -> Agent:
        """Build an agent from a blueprint file, the way ``codeact run`` does.

        The model, store and toolkits are each given once; the agent owns the model client and
        the store it opens and closes them in :meth:`aclose` (``async with``) or :meth:`close`
        (``with``). A :class:`~codeact.engine.store.Store` object passed as ``store`` stays open.

        Args:
            blueprint: Path of the blueprint YAML (``codeact.agent/v1``, ``ai4j.agent/v1`` or a
                kimi-cli agent file), or a loaded ``Blueprint``.
            toolkits: Your toolkits: ``@toolkit`` classes (instantiated with no arguments) or
                instances, ``DynamicToolkit`` objects, or ``MODULE:OBJECT`` strings. The installed
                ones (``system``, entry points) are always there; a ``ToolkitRegistry`` is used as is.
            model: A litellm model (``openai/gpt-4.1-mini``); default: the blueprint's, a profile
                or ``$CODEACT_MODEL``.
            provider: The model provider (``openai-compatible``, ...).
            base_url: Base URL of an OpenAI-compatible model server.
            profile: A profile of ``profiles.yaml`` (see docs/profiles.md).
            protocol: ``chat`` or ``completion`` (raw FIM to ``/v1/completions``).
            store: ``sqlite:///PATH``, ``redis://HOST:PORT/DB`` or a ``Store``; default
                ``$CODEACT_STORE`` or ``~/.codeact/sessions.db``.
            sandbox: ``subprocess`` or ``docker``; default: the blueprint's ``sandbox.backend``.
            isolation: ``bwrap`` (default) or ``process`` (weaker) for the subprocess sandbox.
            allow_sandbox_declaration: Accept the blueprint's ``sandbox`` block.
            max_round_seconds: The most seconds of code per round the blueprint may ask for
                (default 600); a blueprint asking more is refused.
            approver: Asked when a call needs approval; None denies such calls with a reason.
            hooks: Before/after agent and model hooks.
            interceptors: Model and tool interceptors.
            stream: Stream model replies as ``message.delta`` events.
            user: Who the agent acts for (passed to toolkits in their context).
            strict: Refuse a blueprint the validator warns about (``blueprint.validation.strict``);
                without it the warnings are printed on stderr, one line each.

        Raises:
            BlueprintLoadError: The file cannot be read or parsed.
            BlueprintFactoryError: The blueprint is invalid for this host (its report is attached).
            ModelError: No model could be chosen, or a profile is missing.
            ToolkitError: A toolkit is not a toolkit or cannot be loaded.
            StoreError: The store URL is invalid.
        """
        from codeact.engine.agent._assemble import assemble

        return assemble(
            cls,
            blueprint,
            toolkits=toolkits,
            model=model,
            provider=provider,
            base_url=base_url,
            profile=profile,
            protocol=protocol,
            store=store,
            sandbox=sandbox,
            isolation=isolation,
            allow_sandbox_declaration=allow_sandbox_declaration,
            max_round_seconds=max_round_seconds,
            strict=strict,
            extra={
                "approver": approver,
                "hooks": hooks,
                "interceptors": interceptors,
                "stream": stream,
                "user": user,
            },
        )

    async def run(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> AsyncGenerator[Event, None]:
        """Run the agent on ``input``; yields events, the last being ``run.completed`` or ``run.failed``.

        To stop early, iterate inside ``contextlib.aclosing(agent.run(...))``: closing the iterator
        cancels the run: the round in progress is recorded as ``interrupted`` with the toolkit calls it
        completed, and the session's status becomes ``interrupted``. An iterator that is merely dropped
        is only closed when the garbage collector finalizes it, and the run goes on until then.

        Args:
            input: The task: a string, a message ``{"role": "user", "content": ...}`` or a list of
                messages (the last user message is the task, the others history the model sees).
            session_id: Continue this session (history and variables restored), or start it
                (default: a new session for every call).
            user: Who this run is for (memory scope, toolkit context); default the agent's ``user``.
            config: The run's thread id (the session), tags, metadata and user
                (:class:`~codeact.engine.agent.RunConfig`); tags and metadata go into ``run.started``,
                the session record and the run's span.
            context: Where the user is (page, URL, environment...): JSON values by name, shown to
                the model as the run's Context segment (one ``key: value`` line each, cut at 4,000
                characters with a note saying so) and recorded with the session.

        Raises:
            CodeactError: ``input.invalid``, ``input.file_name``, ``input.image_url``, ``input.too_large``,
                ``input.files_unsupported``, ``config.invalid`` or ``context.invalid`` (before any event).
        """
        read = run_input(input)
        config, session_id, user = resolve_run(config, session_id, user)
        run_id = uuid.uuid4().hex
        sequence = EventSequence(run_id)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        def emit(cls: type[Event], /, **payload: Any) -> Event:
            event = sequence.emit(cls, **payload)
            queue.put_nowait(event)
            return event

        task_text = task_with_files(read.task, read.files, kind=self.spec.kind)
        state = _DriveState(
            history=read.history, labels=config.labels(), context=context_text(context), files=read.files
        )
        task = asyncio.create_task(
            self._drive(task_text, session_id or uuid.uuid4().hex, run_id, emit, state, user=user)
        )
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                # No round starts after this, even if something inside the run swallowed the cancel
                # (Python 3.11's asyncio.wait_for does, as its call completes): the cancel is repeated
                # until the run takes it, then its clean-up (recording the round) runs undisturbed.
                state.stop()
                await cancel_and_wait(task, acknowledged=lambda: state.cancelled)
                if not task.cancelled():
                    task.result()  # an error of the run's clean-up surfaces as before

    @property
    def streams_deltas(self) -> bool:
        """Whether this agent's runs emit ``message.delta`` events (a runner manifest's ``streaming``).

        It is the switch a run's model calls obey (``RunContext.stream``): both loops make every model
        call through ``RunContext.call_model``, which streams it (react's tool-calling turns too, their
        tool calls assembled from the stream), so it is the ``stream`` option. A sub-agent does not stream.
        """
        return self.stream

    def _subagent(self, sub: SubagentSpec) -> Agent:
        """A sub-agent of this agent: its own spec, this agent's model, store, toolkits and approver (no streaming)."""
        return Agent(
            sub.spec,
            model=self.model,
            store=self.store,
            registry=self.registry,
            sandbox_factory=self.sandbox_factory,
            approver=self.approver,
            hooks=self.hooks,
            interceptors=self.interceptors,
            stream=False,
            user=self.user,
        )

    async def invoke(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end and return the result (``on_event`` sees every event).

        Without ``session_id`` every call starts a new session; pass the ``session_id`` of a result
        to continue it (its history and variables).
        """
        last: Event | None = None
        session = session_id or ""
        async for event in self.run(input, session_id=session_id, user=user, config=config, context=context):
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunStarted):
                session = event.session_id
            last = event
        result = _result(last, session)
        with contextlib.suppress(CodeactError):  # the store went away: the result without the state
            variables = await self.state(session) if session else {}
            segments = await self.store.segments(session) if session else []
            answer = result.answer if result.status != "failed" else None
            result = dataclasses.replace(result, variables=variables, messages=conversation(segments, answer))
        return result

    async def state(self, session_id: str) -> dict[str, Any]:
        """The session's variables, decoded to plain JSON (an unknown session has none)."""
        return {name: plain(value) for name, value in (await self.store.variables(session_id)).items()}

    async def update_state(
        self, session_id: str, *, variables: Mapping[str, Any] | None = None, remove: Iterable[str] = ()
    ) -> dict[str, Any]:
        """Set (and remove) variables of a session between runs; the next run's code sees them.

        The change is recorded as a round of its own (status ``host_edit``, no code), so the
        session's record says who changed what and replay starts the next round from the same
        variables. Returns the session's variables after the change (plain JSON).

        Raises:
            CodeactError: ``state.unknown_session``, ``state.value`` (a value the codec cannot keep),
                or the store's busy error while a run holds the session.
        """
        import time

        from codeact.engine.store import RoundRecord
        from codeact.sandbox.runtime.codec import Unencodable, encode

        meta = await self.store.get_session(session_id)
        if meta is None:
            raise CodeactError(
                f"no session {session_id!r} in the store: run the agent first", code="state.unknown_session"
            )
        changes: dict[str, Any] = {}
        for name, value in (variables or {}).items():
            if not str(name).isidentifier():
                raise CodeactError(f"variable name {name!r} is not a Python identifier", code="state.value")
            try:
                changes[str(name)] = encode(value)
            except Unencodable as exc:
                raise CodeactError(f"variable {name!r} cannot be kept: {exc}", code="state.value") from exc
        removed = [str(n) for n in remove]
        async with self.store.lock(session_id) as lock:
            current = await self.store.variables(session_id)
            after = {k: v for k, v in current.items() if k not in removed}
            after.update(changes)
            done = (await self.store.get_session(session_id) or meta).rounds
            edit = {"set": sorted(changes), "removed": sorted(n for n in removed if n in current)}
            record = RoundRecord(
                session_id=session_id,
                index=done + 1,
                started_at=time.time(),
                duration_s=0.0,
                prompt_hash="",
                reply="",
                status="host_edit",
                control={"kind": "host_edit", **edit},
                variables=after,
            )
            await self.store.append_round(record, segments=(), variables=after, fence=lock.token)
        return {name: plain(value) for name, value in after.items()}

    def run_sync(
        self,
        input: AgentInput,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        """Run to the end from synchronous code and return the result; call it as often as you like.

        Every call runs on the agent's own event loop (kept until :meth:`close`), so a store or
        model client that holds connections bound to a loop (Redis) works from one call to the
        next. Use :meth:`invoke` from async code.

        Raises:
            CodeactError: Called while an event loop is running (use ``await agent.invoke(...)``).
        """
        runner = self._sync_runner(
            "Agent.run_sync() was called inside a running event loop: use `await agent.invoke(...)` "
            "(or iterate `agent.run(...)`) in async code"
        )
        return runner.run(
            self._invoke_on_own_loop(
                input, session_id=session_id, on_event=on_event, user=user, config=config, context=context
            )
        )

    async def _invoke_on_own_loop(
        self,
        input: AgentInput,
        *,
        session_id: str | None,
        on_event: Callable[[Event], None] | None,
        user: str | None = None,
        config: RunConfig | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> RunResult:
        try:
            return await self.invoke(
                input, session_id=session_id, on_event=on_event, user=user, config=config, context=context
            )
        finally:
            # Nothing of the model client's stays pending on the loop between calls (or when it is dropped).
            await stop_background_tasks()

    # -- one run ---------------------------------------------------------------------------------
    async def _drive(
        self,
        input: str,
        session_id: str,
        run_id: str,
        emit: Callable[..., Event],
        state: _DriveState,
        *,
        user: str | None = None,
    ) -> None:
        # The run's spans (engine.telemetry): a no-op object unless tracing is on.
        from codeact.engine.telemetry._state import NULL_TRACE, start_run

        spec = self.spec
        options = spec.blueprint.extensions.get("telemetry") if spec.blueprint is not None else None
        run_trace = start_run(
            run_id=run_id,
            session_id=session_id,
            agent_id=spec.id,
            model=spec.model.model,
            kind=spec.kind,
            options=options if isinstance(options, dict) else None,
        )
        span = getattr(run_trace, "run_span", None)
        if span is not None and state.labels:
            if state.labels.get("tags"):
                span.set_attribute("codeact.tags", list(state.labels["tags"]))
            for key, value in state.labels.get("metadata", {}).items():
                text = value if isinstance(value, str | int | float | bool) else json.dumps(value, ensure_ascii=False)
                span.set_attribute(f"codeact.metadata.{key}", text)
        if run_trace is NULL_TRACE:
            await self._drive_run(input, session_id, run_id, emit, run_trace, state, user=user)
            return

        def traced(cls: type[Event], /, **payload: Any) -> Event:
            event = emit(cls, **payload)
            if isinstance(event, RunCompleted):
                status = "paused" if event.reason == "ask_user" else "completed"
                run_trace.end(status=status, reason=event.reason, rounds=event.rounds)
            elif isinstance(event, RunFailed):
                run_trace.end(status="failed", error=event.error, rounds=event.rounds)
            return event

        try:
            await self._drive_run(input, session_id, run_id, traced, run_trace, state, user=user)
        finally:
            run_trace.end(status="interrupted")  # a cancelled run (the span ends once)

    async def _drive_run(
        self,
        input: str,
        session_id: str,
        run_id: str,
        emit: Callable[..., Event],
        run_trace: Any,
        state: _DriveState,
        *,
        user: str | None = None,
    ) -> None:
        # Invariants of the stream: run.started first, run.completed/run.failed last, even when the
        # run fails before it could open the session (busy, store down).
        link, _ = SESSION_LINK.get(), SESSION_LINK.set(None)  # this task's context only

        def tracked(cls: type[Event], /, **payload: Any) -> Event:
            if cls is RunStarted:
                state.started = True
            return emit(cls, **payload)

        try:
            async with self.store.lock(session_id) as lock:
                try:
                    # A run that died mid-round left its completed calls behind: record them first.
                    await fold_pending(self.store, session_id, fence=lock.token, reason=_gone_reason(lock))
                    ctx = state.ctx = await self._open_session(
                        input,
                        session_id,
                        run_id,
                        tracked,
                        link=link,
                        before=state.history,
                        labels=state.labels,
                        context=state.context,
                    )
                    ctx.stopping = state.stopping
                    ctx.trace = run_trace
                    ctx.fence = lock.token
                    ctx.user = user if user is not None else self.user
                    ctx.writer = PendingWriter(self.store, session_id)
                    use_files(ctx, state.files)
                    outcome = await run_within(self.spec.run_seconds, self._run_loop(ctx), ctx)
                    await end_memory(ctx, outcome)
                    await ctx.after_agent()
                    if ctx.writer is not None:  # (closed already when the run's time limit stopped it)
                        await ctx.writer.flush(timeout=2.0)  # the last round's "clear" (a few ms)
                    await self.store.update_session(session_id, status=outcome.status)
                except asyncio.CancelledError:
                    # Ctrl-C or a cancel: keep what the round in progress did, then stop.
                    state.cancelled = True
                    if state.ctx is not None:
                        await state.ctx.record_interrupted(reason="Ctrl-C or a cancel stopped the run")
                    else:
                        await mark_opened_interrupted(self.store, session_id)
                    raise
                except CodeactError as exc:
                    if exc.code == "store.unavailable":
                        pass  # the store is down: the session reads `interrupted` once it is back (repair_status)
                    elif exc.code != "store.lock_lost":  # a fenced-out run must not touch the new owner's session
                        # Only the run holding the lock may mark the session failed (never a busy one).
                        with contextlib.suppress(CodeactError):
                            if await self.store.get_session(session_id) is not None:
                                await self.store.update_session(session_id, status="failed")
                    raise
                finally:
                    if state.ctx is not None and state.ctx.writer is not None:
                        await state.ctx.writer.aclose()
                        state.ctx.writer = None
                    if state.ctx is not None and state.ctx.memory is not None:
                        await state.ctx.memory.close()
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
                self._emit_started(emit, session_id, input, resumed=meta is not None, labels=state.labels)
            emit(
                RunFailed,
                error={"code": exc.code, "message": exc.message},
                retryable=_retryable(exc),
                rounds=state.ctx.recorded if state.ctx is not None else 0,
            )

    def _emit_started(
        self,
        emit: Callable[..., Event],
        session_id: str,
        input: str,
        *,
        resumed: bool,
        labels: Mapping[str, Any] | None = None,
    ) -> None:
        spec = self.spec
        labels = labels or {}
        emit(
            RunStarted,
            session_id=session_id,
            blueprint_id=spec.id,
            model=spec.model.model,
            input=input,
            resumed=resumed,
            tags=tuple(labels.get("tags", ())),
            metadata=dict(labels.get("metadata", {})),
        )

    async def _open_session(
        self,
        input: str,
        session_id: str,
        run_id: str,
        emit: Callable[..., Event],
        *,
        link: Mapping[str, Any] | None = None,
        before: Sequence[tuple[str, str]] = (),
        labels: Mapping[str, Any] | None = None,
        context: str | None = None,
    ) -> RunContext:
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
                    extra={"kind": spec.kind, "grants": self.grants, **(link or {}), **_labelled({}, labels)},
                )
            )
            history, variables, done = SegmentHistory(), {}, 0
        else:
            await self.store.check_session(session_id)  # an unreadable entry refuses the resume, naming it
            history = _restore_history(await self.store.segments(session_id))
            variables, done = await self.store.variables(session_id), meta.rounds
            if labels:
                await self.store.update_session(session_id, status="active", extra=_labelled(meta.extra, labels))
            else:
                await self.store.update_session(session_id, status="active")
        self._emit_started(emit, session_id, input, resumed=meta is not None, labels=labels)
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
            stream=self.streams_deltas,
            round=done,
            first_round=done + 1,
            recorded=done,
        )
        for kind, text in before:  # the input's history messages (Agent.run of a list of messages)
            earlier = history.add(kind, text, round_index=done, tags=("input",))
            ctx.pending_segments.append(earlier)
            emit(SegmentCreated, segment=earlier.model_dump(mode="json"), round=done)
        if context is not None:  # the caller's context (Agent.run(context=...), --context)
            segment = history.add(SegmentKind.CONTEXT, context, round_index=done, tags=("caller",))
            ctx.pending_segments.append(segment)
            emit(SegmentCreated, segment=segment.model_dump(mode="json"), round=done)
        user = history.add(SegmentKind.USER, input, round_index=done)
        ctx.pending_segments.append(user)
        emit(SegmentCreated, segment=user.model_dump(mode="json"), round=done)
        return ctx

    async def _note_sandbox(self, session_id: str, sandbox: Sandbox) -> None:
        # Replay rebuilds the same sandbox (backend, policy) from this note.
        meta = await self.store.get_session(session_id)
        extra = dict(meta.extra) if meta is not None else {}
        sandbox.hash_seed = session_hash_seed(extra.get("sandbox"))  # the session's, kept on resume
        extra["sandbox"] = sandbox_note(sandbox, deadline_s=self.spec.codeact.round_seconds)
        from codeact.engine.agent.sandboxes import env_note

        declared_env = env_note(self.spec.sandbox)
        if declared_env is not None:
            extra["sandbox"]["env"] = declared_env
        await self.store.update_session(session_id, extra=extra)

    async def _run_loop(self, ctx: RunContext) -> Outcome:
        await start_memory(ctx, self.store, user=ctx.user, base_url=getattr(self.model, "base_url", None))
        bridge, handler = build_bridge(
            ctx,
            registry=self.registry,
            grants=self.grants,
            policies=self.policies,
            approver=self.approver,
            interceptors=self.interceptors,
        )
        ctx.bridge, ctx.handler = bridge, handler
        try:
            await ctx.before_agent()
            if self.spec.kind == "react":
                return await ReactLoop(ctx, handler).run()
            sandbox = self.sandbox_factory(handler, self.spec)
            ctx.sandbox = sandbox
            place_files(sandbox, ctx.input_files)
            await self._note_sandbox(ctx.session_id, sandbox)
            try:
                config = await memory_prompt_config(ctx, self.prompt_config)
                config = knowledge_prompt_config(ctx, self.knowledge, config)
                builder = SegmentBuilder(config, stubs=bridge.stubs())
                return await CodeActLoop(ctx, builder, sandbox).run()
            finally:
                await sandbox.aclose()
        except EndRun as exc:
            return Outcome(status="completed", reason="hook", answer=exc.reason)
