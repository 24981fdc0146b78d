"""One run of a flow: its state, its results so far, and running a step (a sub-agent's run)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.agent.runs import PAUSE_REASONS
from codeact.engine.errors import CodeactError
from codeact.engine.events import (
    Event,
    FlowStepCompleted,
    FlowStepStarted,
    MessageCompleted,
    RunCompleted,
    RunFailed,
    RunStarted,
)
from codeact.engine.flow._steps import (
    Flow,
    Step,
    StepResult,
    _PauseFlow,
    _with_state,
    as_text,
    child_session_id,
    is_flow,
)
from codeact.engine.flow.errors import FlowError

if TYPE_CHECKING:
    from codeact.engine.agent import RunConfig

__all__ = ["run_concurrently"]


@dataclass
class _FlowRun:
    """One run of a flow: its state, its results so far and its streams."""

    flow: Flow
    run_id: str
    session_id: str
    input: str
    emit: Callable[..., Event]
    forward: Callable[[Event], None]
    state: dict[str, object]
    last: object
    messages: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    children: list[dict[str, object]] = field(default_factory=list)
    reason: str = "finished"
    counter: Any = None
    cancelled: bool = False  # the run took its cancel and is marking the session interrupted
    config: RunConfig | None = None  # the run's tags, metadata and user, carried to every step
    # interruptBefore: the steps the flow pauses before, and the step a resumed run goes on from (it
    # does not pause there again; 0: not a resumed run).
    interrupt_before: frozenset[str] = frozenset()
    resume_at: int = 0

    def step_config(self) -> RunConfig | None:
        """The run's config for a step's run: its tags, metadata and user (the step has a session of its own)."""
        if self.config is None:
            return None
        from codeact.engine.agent import RunConfig

        return RunConfig(tags=self.config.tags, metadata=self.config.metadata, user=self.config.user)

    def hook_config(self) -> RunConfig:
        """The run's config as the flow's hooks see it: ``thread_id`` is the flow's session."""
        from codeact.engine.agent import RunConfig

        config = self.config if self.config is not None else RunConfig()
        return replace(config, thread_id=self.session_id)

    def gate(self, step: Step, index: int) -> None:
        """Pause before ``step`` (the flow's ``index``-th) when it is listed in ``interruptBefore``.

        A run resumed at that step goes on (it paused there already).
        """
        if step.label in self.interrupt_before and index != self.resume_at:
            raise _PauseFlow(index, step.label)

    def compose(self, step: Step, input: str | None = None) -> str:
        """What a step is asked: the input (the flow's by default) and, with includeContents, the results so far."""
        text = self.input if input is None else input
        if not step.include_contents or not self.messages:
            return text
        return prompts.render("flow_step_input.j2", input=text, messages=self.messages).strip("\n")

    def keep(self, step: Step, result: StepResult) -> None:
        """Write a step's result under its key and into the flow's messages; it becomes the previous result."""
        self.state[step.key] = result.answer
        texts = list(result.messages) if step.return_reasoning_contents else []
        answer = as_text(result.answer) if result.answer is not None else ""
        if not texts or texts[-1] != answer:
            texts.append(answer)
        self.messages.extend({"agent": result.agent, "text": text} for text in texts if text)
        self.last = result.answer

    async def step(self, step: Step, position: str, text: str) -> StepResult:
        """Run one sub-agent to the end (events passed on); a failed or paused run raises ``FlowError``."""
        number = next(self.counter)
        name = step.label
        session_id = child_session_id(self.session_id, number, name)
        started = time.time()
        # Listed when it starts (the tree shows the steps in the order they began), filled in at the end.
        entry: dict[str, object] = {"session_id": session_id, "agent": name, "position": position, "status": "active"}
        self.children.append(entry)
        run_id, status, answer, error, resumed = "", "failed", None, None, False
        texts: list[str] = []
        agent = step.agent
        exported: dict[str, object] = {}
        if is_flow(agent):
            events = agent._stream(
                text,
                session_id=session_id,
                state=dict(self.state),
                previous=self.last,
                link=self._link(position, name),
                export=exported,
                config=self.step_config(),
            )
        else:
            from codeact.engine.agent.runs import SESSION_LINK

            # The step's session records its parent when it is created (no extra write).
            SESSION_LINK.set({"flow": self._link(position, name)})
            events = _with_state(agent, self.state).run(text, session_id=session_id, config=self.step_config())
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if event.parent_run_id is not None:
                    self.forward(event)  # a nested flow's step: already linked to its own parent
                    continue
                if isinstance(event, RunStarted):
                    run_id, resumed = event.run_id, event.resumed
                    self.forward(
                        FlowStepStarted(
                            run_id=event.run_id,
                            sequence=event.sequence,
                            timestamp=event.timestamp,
                            parent_run_id=self.run_id,
                            agent=name,
                            position=position,
                            session_id=session_id,
                            input=text,
                        )
                    )
                    continue
                if isinstance(event, RunCompleted | RunFailed):
                    if isinstance(event, RunCompleted):
                        status = "paused" if event.reason in PAUSE_REASONS else "completed"
                        answer = event.answer
                    else:
                        error = dict(event.error)
                    self.forward(
                        FlowStepCompleted(
                            run_id=event.run_id,
                            sequence=event.sequence,
                            timestamp=event.timestamp,
                            parent_run_id=self.run_id,
                            agent=name,
                            position=position,
                            session_id=session_id,
                            status=status,
                            answer=answer,
                            output_key=step.key,
                            error=error,
                        )
                    )
                    continue
                if isinstance(event, MessageCompleted) and event.text and event.purpose != "note":
                    texts.append(event.text)
                self.forward(replace(event, parent_run_id=self.run_id))
        result = StepResult(
            agent=name,
            position=position,
            session_id=session_id,
            run_id=run_id,
            status=status,
            answer=answer,
            messages=tuple(texts),
            error=error,
            started_at=started,
            ended_at=time.time(),
        )
        entry.update(run_id=run_id, status=status, started_at=result.started_at, ended_at=result.ended_at)
        # A nested flow's output keys become this flow's too (its step's own key is written by keep()).
        self.state.update({key: value for key, value in exported.items() if key != "input"})
        if not is_flow(agent) and resumed:
            await self._link_child(session_id, position, name)  # an existing session kept its old metadata
        if status == "failed":
            message = (error or {}).get("message", "it failed")
            raise FlowError(
                f"flow {self.flow.name!r}: agent {name!r} ({position}) failed: {message} "
                f"(see `codeact sessions show {session_id}`)",
                code="flow.step.failed",
            )
        if status == "paused" and is_flow(agent):
            raise FlowError(
                f"flow {self.flow.name!r}: its step {name!r} ({position}) is a flow that paused; only the outermost "
                "flow can pause and resume: move interruptBefore to it",
                code="flow.step.paused",
            )
        if status == "paused":
            raise FlowError(
                f"flow {self.flow.name!r}: agent {name!r} ({position}) asked the user a question, which a flow "
                f"cannot answer: {as_text(answer)}; give it what it needs in the flow's input or instructions",
                code="flow.step.paused",
            )
        return result

    def _link(self, position: str, name: str) -> dict[str, object]:
        return {
            "parent_session": self.session_id,
            "parent_run": self.run_id,
            "position": position,
            "agent": name,
        }

    async def _link_child(self, session_id: str, position: str, name: str) -> None:
        store = self.flow.store
        with contextlib.suppress(CodeactError):
            meta = await store.get_session(session_id)
            if meta is not None:
                await store.update_session(session_id, extra={**meta.extra, "flow": self._link(position, name)})


async def run_concurrently(calls: Sequence[Callable[[], object]], *, limit: int | None) -> list[StepResult]:
    """Run ``calls`` (coroutine factories) at most ``limit`` at a time; the first failure cancels the rest."""
    semaphore = asyncio.Semaphore(limit) if limit else None

    async def one(call: Callable[[], Any]) -> StepResult:
        if semaphore is None:
            return await call()  # type: ignore[no-any-return]
        async with semaphore:
            return await call()  # type: ignore[no-any-return]

    tasks = [asyncio.create_task(one(call)) for call in calls]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
    return [task.result() for task in tasks]
