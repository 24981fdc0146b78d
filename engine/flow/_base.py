"""``FlowAgent``: what the four flow kinds share (steps, the event stream, sessions, hooks).

A flow run is a session of its own (``extra.kind == "flow"``, its steps listed in
``extra.children``); every step is a sub-agent run recorded in a child session
(``<flow session>.<n>.<agent>``) whose ``extra.flow`` names the parent session, the parent run and
the position. The flow's stream holds its own ``run.started`` / ``run.completed`` (or ``run.failed``);
each step's run becomes ``flow.step.started`` / ``flow.step.completed`` and its other events are
passed on with ``parent_run_id`` set to the flow's run.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import uuid
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, cast

from codeact.engine.agent.hooks import Hook, HookContext, Jump
from codeact.engine.agent.runs import Lifecycle, labelled
from codeact.engine.errors import CodeactError
from codeact.engine.events import (
    Event,
    EventSequence,
    MessageCompleted,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from codeact.engine.flow._build import build
from codeact.engine.flow._run import _FlowRun
from codeact.engine.flow._steps import Step, StepResult, _EndFlow, _PauseFlow, as_step, is_flow
from codeact.engine.flow.errors import FlowError
from codeact.engine.store import SessionMeta
from codeact.sandbox.aio import cancel_and_wait

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, BuildOptions, RunConfig, RunResult
    from codeact.engine.store import Store

__all__ = ["FlowAgent", "Step", "StepResult"]

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
_MERGED = frozenset({"children", "tags", "metadata"})  # a resumed flow session's: kept and merged, not replaced
_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class FlowAgent(Lifecycle):
    """Base of the flow kinds: runs sub-agents (codeact or react agents, or flows) as one agent.

    The kinds are :class:`SequentialAgent`, :class:`ParallelAgent`, :class:`RoutingAgent` and
    :class:`LoopAgent`.

    A flow has the :class:`~codeact.engine.agent.Agent` interface: ``run()`` (events), ``invoke()``,
    ``run_sync()``, ``async with`` / ``with``, and :meth:`from_blueprint`.

    Args:
        name: The flow's name (letters, digits, ``.``, ``_``, ``-``).
        agents: Its sub-agents: ``Agent`` objects, flows, or :class:`Step` (to set the output key, ...).
        description: What the flow does (shown when it is a step of a routing flow or a tool).
        store: Where the flow's session is recorded (default: the first sub-agent's store).
        hooks: ``before_agent`` / ``after_agent`` around the whole flow; ``before_model`` /
            ``after_model`` around the flow's own model calls (routing and merging).
        interrupt_before: Names of steps the flow pauses before (seed 002's ``interruptBefore``; sequential
            and conditional flows): the run ends ``paused`` (``run.completed`` reason ``interrupt_before``,
            its answer the latest result) with the flow's state in its session; a run of the same session
            goes on from that step.
    """

    kind: ClassVar[str] = "flow"
    is_flow: ClassVar[bool] = True  # how a step tells a flow from an Agent (``_steps.is_flow``)
    kinds: ClassVar[dict[str, type[FlowAgent]]] = {}
    """The flow kinds by ``kind`` (each subclass that sets its own ``kind``): what ``from_blueprint`` builds."""
    pauses: ClassVar[bool] = False
    """Whether the kind takes ``interrupt_before`` (it calls ``_FlowRun.gate`` before each step)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            FlowAgent.kinds.setdefault(cls.kind, cls)

    def __init__(
        self,
        *,
        name: str,
        agents: Sequence[Agent | FlowAgent | Step],
        description: str = "",
        store: Store | None = None,
        hooks: Sequence[Hook] = (),
        interrupt_before: Sequence[str] = (),
    ) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise FlowError(
                f"a flow's name must be letters, digits, '.', '_' or '-' (got {name!r})", code="flow.name.invalid"
            )
        self.name = name
        self.description = description
        self.steps: tuple[Step, ...] = tuple(as_step(item, name) for item in agents)
        if not self.steps:
            raise FlowError(f"flow {name!r} has no agents: pass agents=[...]", code="flow.agents.required")
        seen: dict[str, int] = {}
        for index, step in enumerate(self.steps):
            label = step.label
            if label in seen:
                raise FlowError(
                    f"flow {name!r}: agents[{seen[label]}] and agents[{index}] are both named {label!r}; "
                    "give one Step(name=...)",
                    code="flow.agent.name.duplicate",
                )
            seen[label] = index
            if step.output_key is not None and not _KEY.match(step.output_key):
                raise FlowError(
                    f"flow {name!r}: agents[{index}] output key {step.output_key!r} must be an identifier",
                    code="flow.outputKey.invalid",
                )
        if isinstance(interrupt_before, str):
            interrupt_before = [interrupt_before]
        unknown = [label for label in interrupt_before if label not in seen]
        if unknown:
            raise FlowError(
                f"flow {name!r}: interrupt_before names {', '.join(map(repr, unknown))}, not a step of this flow; "
                f"its steps are {', '.join(map(repr, seen))}",
                code="flow.interruptBefore.unknown",
            )
        if interrupt_before and not self.pauses:
            raise FlowError(
                f"{self.kind} flow {name!r} cannot pause before a step: interrupt_before applies to sequential and "
                "conditional flows (put the step in one)",
                code="flow.interruptBefore.kind",
            )
        self.interrupt_before = frozenset(interrupt_before)
        self.store: Store = store if store is not None else _first_store(self.steps)
        self.hooks = tuple(hooks)
        self.model: Any = None
        self.blueprint_hash = ""
        self._init_lifecycle()

    # -- building ---------------------------------------------------------------------------------
    @classmethod
    def from_blueprint(cls, blueprint: Any, *, options: BuildOptions | None = None, **choices: Any) -> FlowAgent:
        """Build a flow from a ``workflow: {mode: flow}`` blueprint (and its agents' blueprints).

        Takes the options of :meth:`codeact.engine.agent.Agent.from_blueprint` (``toolkits``, ``model``,
        ``store``, ``sandbox``, ...), or ``toolkits`` and one ``options`` value
        (:class:`~codeact.engine.agent.BuildOptions`); they apply to every agent of the flow. The flow owns
        the model clients and the store it opened (closed by ``aclose()`` / ``close()``).

        Raises:
            BlueprintLoadError: A file cannot be read or parsed.
            BlueprintFactoryError: The flow or one of its agents is invalid (the report is attached).
        """
        from codeact.engine.agent import BuildOptions

        toolkits = choices.pop("toolkits", ())
        chosen = options if options is not None else BuildOptions(**choices)
        return cast("FlowAgent", build(blueprint, kinds=FlowAgent.kinds, toolkits=toolkits, options=chosen))

    # -- the Agent interface ------------------------------------------------------------------------
    async def run(
        self, input: str, *, session_id: str | None = None, config: RunConfig | None = None
    ) -> AsyncGenerator[Event, None]:
        """Run the flow on ``input``; yields its events and its steps' (``parent_run_id`` set on theirs).

        The last event is the flow's ``run.completed`` or ``run.failed``.

        Args:
            input: The flow's input.
            session_id: The flow's session (``config.thread_id`` likewise; default a new one).
            config: The run's tags, metadata and user (``RunConfig``): in the flow's ``run.started`` and
                session record, and carried to every step's run (each in its own session), so the
                steps' ``run.started`` and session records carry them too.

        Raises:
            CodeactError: ``config.invalid`` when ``session_id`` and ``config.thread_id`` differ.
        """
        from codeact.engine.agent.runs import resolve_run

        config, session_id, _ = resolve_run(config, session_id, None)
        stream = self._stream(
            input,
            session_id=session_id or uuid.uuid4().hex,
            state=None,
            previous=None,
            link=None,
            export=None,
            config=config,
        )
        async with contextlib.aclosing(stream) as events:
            async for event in events:
                yield event

    async def invoke(
        self,
        input: str,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        config: RunConfig | None = None,
    ) -> RunResult:
        """Run to the end and return the result (``on_event`` sees every event; ``config`` as :meth:`run`)."""
        from codeact.engine.agent.runs import run_result

        last: Event | None = None
        session = session_id or ""
        metadata: dict[str, object] = {}
        async for event in self.run(input, session_id=session_id, config=config):
            if on_event is not None:
                on_event(event)
            if isinstance(event, RunStarted) and event.parent_run_id is None:
                session, metadata = event.session_id, dict(event.metadata)
            if event.parent_run_id is None:
                last = event
        return run_result(last, session, metadata=metadata)

    def run_sync(
        self,
        input: str,
        *,
        session_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        config: RunConfig | None = None,
    ) -> RunResult:
        """Run to the end from synchronous code (on the flow's own event loop, kept until :meth:`close`)."""
        runner = self._sync_runner("run_sync() was called inside a running event loop: use `await flow.invoke(...)`")
        return runner.run(self.invoke(input, session_id=session_id, on_event=on_event, config=config))

    def leaves(self) -> list[Agent]:
        """Every codeact/react agent in the flow's tree, in order."""
        out: list[Agent] = []
        for step in self.steps:
            out.extend(step.agent.leaves() if is_flow(step.agent) else [step.agent])
        return out

    # -- one run -----------------------------------------------------------------------------------
    async def _stream(
        self,
        input: str,
        *,
        session_id: str,
        state: dict[str, object] | None,
        previous: object,
        link: dict[str, object] | None,
        export: dict[str, object] | None,
        config: RunConfig | None = None,
    ) -> AsyncGenerator[Event, None]:
        run_id = uuid.uuid4().hex
        sequence = EventSequence(run_id)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        def emit(cls: type[Event], /, **payload: object) -> Event:
            event = sequence.emit(cls, **payload)
            queue.put_nowait(event)
            return event

        run = _FlowRun(
            flow=self,
            run_id=run_id,
            session_id=session_id,
            input=input,
            emit=emit,
            forward=queue.put_nowait,
            state={"input": input, **(state or {})},
            last=input if previous is None else previous,
            config=config,
            interrupt_before=self.interrupt_before,
        )
        task = asyncio.create_task(self._drive(run, link, export))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            await task
        finally:
            if not task.done():
                await cancel_and_wait(task, acknowledged=lambda: run.cancelled)
                if not task.cancelled():
                    task.result()

    async def _drive(self, run: _FlowRun, link: dict[str, object] | None, export: dict[str, object] | None) -> None:
        store = self.store
        labels = run.config.labels() if run.config is not None else {}
        meta = None
        with contextlib.suppress(CodeactError):
            meta = await store.get_session(run.session_id)
        run.emit(
            RunStarted,
            session_id=run.session_id,
            blueprint_id=self.name,
            model=self._model_name(),
            input=run.input,
            resumed=meta is not None,
            tags=tuple(labels.get("tags", ())),
            metadata=dict(labels.get("metadata", {})),
            trace_id=run.run_id,
        )
        try:
            extra: dict[str, Any] = {"kind": "flow", "flow": {"kind": self.kind, "name": self.name}, "children": []}
            extra = {**labelled({}, labels), **extra, "trace_id": run.run_id}
            if link is not None:
                extra["flow"].update(link)  # like a step agent's session: parent_session, parent_run, ...
            if meta is None:
                await store.create_session(
                    SessionMeta(
                        session_id=run.session_id,
                        blueprint_id=self.name,
                        blueprint_hash=self.blueprint_hash,
                        model=self._model_name(),
                        title=run.input[:80],
                        input=run.input,
                        extra=extra,
                    )
                )
            else:
                extra = {**labelled(meta.extra, labels), **{k: v for k, v in extra.items() if k not in _MERGED}}
                extra["children"] = list(meta.extra.get("children") or [])
                checkpoint = extra.pop("paused", None)
                if meta.status == "paused" and isinstance(checkpoint, dict):
                    _resume(run, checkpoint)  # interruptBefore: go on from the step it paused before
                await store.update_session(run.session_id, status="active", extra=extra)
            run.children = extra["children"]
            run.counter = itertools.count(len(run.children) + 1)
            paused: dict[str, object] | None = None
            try:
                answer = await self._around(run)
            except _EndFlow as exc:
                answer, run.reason = exc.reason, "hook"
            except _PauseFlow as exc:
                answer, run.reason = run.last, "interrupt_before"
                paused = {"step": exc.index, "agent": exc.agent, "input": run.input, "state": run.state}
                paused.update(messages=run.messages, last=run.last)
                run.notes.append(
                    f"paused before agent {exc.agent!r} (interruptBefore): run the flow again in session "
                    f"{run.session_id!r} to go on"
                )
            if export is not None:
                export.update(run.state)
            for note in run.notes:
                run.emit(MessageCompleted, text=note, purpose="note")
            extra = {**extra, "children": run.children, "notes": run.notes, "keys": sorted(run.state)}
            if paused is not None:
                extra["paused"] = paused
            await store.update_session(
                run.session_id, status="paused" if paused is not None else "completed", extra=extra
            )
            run.emit(
                RunCompleted,
                answer=answer,
                reason=run.reason,
                rounds=len(run.children),
                run_rounds=len(run.children),
            )
        except asyncio.CancelledError:
            run.cancelled = True
            with contextlib.suppress(CodeactError):
                await store.update_session(run.session_id, status="interrupted")
            raise
        except CodeactError as exc:
            with contextlib.suppress(CodeactError):
                if await store.get_session(run.session_id) is not None:
                    extra = {**extra, "children": run.children, "notes": run.notes}
                    await store.update_session(run.session_id, status="failed", extra=extra)
            run.emit(
                RunFailed,
                error=exc.info().to_dict(),
                rounds=len(run.children),
                run_rounds=len(run.children),
            )

    async def _around(self, run: _FlowRun) -> object:
        jump = await self._hooks("before_agent", run)
        if jump is not None and jump.to == "end":
            raise _EndFlow(jump.reason or "ended by a before_agent hook")
        answer = await self._execute(run)
        jump = await self._hooks("after_agent", run, reverse=True)
        if jump is not None and jump.to == "end" and jump.reason:
            run.reason = "hook"
        return answer

    async def _hooks(self, point: str, run: _FlowRun, *, reverse: bool = False, **extra: Any) -> Jump | None:
        if not self.hooks:
            return None
        context = HookContext(
            run_id=run.run_id,
            session_id=run.session_id,
            agent_id=self.name,
            round=len(run.children),
            input=run.input,
            state=run.state,
            config=run.hook_config(),
            **extra,
        )
        jump: Jump | None = None
        for hook in reversed(self.hooks) if reverse else self.hooks:
            result = await getattr(hook, point)(context)
            if result is not None and jump is None:
                jump = result
        return jump

    async def _execute(self, run: _FlowRun) -> object:  # pragma: no cover - every kind overrides it
        raise NotImplementedError

    def _model_name(self) -> str:
        if self.model is None:
            return ""
        with contextlib.suppress(Exception):
            return str(self.model.settings_for("utility").model)
        return ""


def _resume(run: _FlowRun, checkpoint: dict[str, Any]) -> None:
    """A paused run's state back in ``run``: it goes on from the step it paused before, on the same input."""
    run.input = str(checkpoint.get("input", run.input))
    run.state = dict(checkpoint.get("state") or {"input": run.input})
    run.messages = list(checkpoint.get("messages") or [])
    run.last = checkpoint.get("last")
    run.resume_at = int(checkpoint.get("step") or 0)


def _first_store(steps: Sequence[Step]) -> Store:
    agent = steps[0].agent
    return agent.store
