"""The run manager: runs live as asyncio tasks of the server, apart from the HTTP requests that start them.

1. ``start`` creates the run's task and returns at once; the task iterates the runner's result stream
   and appends each envelope to the run's buffer. A client that disconnects only stops reading: the
   run goes on, and its events stay in the buffer.
2. ``events(run_id, after=N)`` yields the buffered envelopes with ``sequence > N`` and then the live
   ones, each exactly once and in order, until the run's last envelope (``run.completed`` or
   ``run.failed``). SSE's ``Last-Event-ID`` is that ``N``, so a client re-attaches without a loss or
   a duplicate.
3. ``cancel`` cancels the task (the runner kills the sandbox and leaves the session resumable) and
   closes the stream with ``run.failed`` code ``cancelled``; a runner that raises closes it with
   ``runner.error``. Every stream therefore ends with exactly one terminal envelope.
4. Finished runs are kept (for ``GET /v1/runs/{id}`` and late re-attaches) up to ``keep`` runs and
   ``keep_s`` seconds, then forgotten.

This module does not speak HTTP (``codeact.engine.service._app`` does) and imports no web framework, so the
queue's ``QueueRunManager`` can offer the same methods over Redis.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from codeact.engine.errors import ErrorInfo
from codeact.engine.service._log import log_event
from codeact.engine.service.contract import (
    continuation_run_id,
    interaction_submission,
    question_answer,
    with_budget,
)
from codeact.engine.service.errors import ServiceError, served_runner

if TYPE_CHECKING:
    from codeact.engine.agent import RunConfig
    from codeact.engine.runner import AuthorizationRegistry, BlueprintRunner, Interactions, RunnerContext, RunnerResult
    from codeact.engine.runner.proxy import RateLimit

__all__ = ["TERMINAL_TYPES", "RunInfo", "RunManager", "RunStatus", "Runs"]

RunStatus = Literal["running", "waiting", "completed", "failed", "cancelled"]
TERMINAL_TYPES = frozenset({"run.completed", "run.failed"})
_CANCEL_WAIT_S = 15.0


@dataclass(frozen=True, kw_only=True)
class RunInfo:
    """A snapshot of one run.

    Attributes:
        run_id: The run's id (the context's ``run_id``).
        runner_id: The runner it runs.
        session_id: The codeact session it reads and writes (from the conversation id).
        status: ``running``; ``waiting`` while an interaction is pending; then ``completed``,
            ``failed`` or ``cancelled``.
        pending: The open interaction requests, as sent in their ``action.requested`` envelopes.
        started_at: Unix time the run started.
        finished_at: Unix time of its last envelope, or None while it runs.
        events: The sequence number of the last envelope so far.
        error: ``{"code", "message", "retryable"}`` of a failed or cancelled run, else None.
        continued_by: For a run that ended with a question (``finish_reason`` ``ask_user``), the run
            its answer started; until then the question is in ``pending``.
        tags: The run's tags (``POST /v1/runs`` body ``tags``; a continuation keeps its run's).
        metadata: The run's metadata (body ``metadata``), likewise.
    """

    run_id: str
    runner_id: str
    session_id: str
    status: RunStatus
    pending: tuple[dict[str, object], ...] = ()
    started_at: float
    finished_at: float | None = None
    events: int = 0
    error: dict[str, object] | None = None
    continued_by: str | None = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, object] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """True once the run's last envelope is in."""
        return self.status in ("completed", "failed", "cancelled")

    def to_json(self) -> dict[str, object]:
        """A JSON object of every field."""
        return {
            "run_id": self.run_id,
            "runner_id": self.runner_id,
            "session_id": self.session_id,
            "status": self.status,
            "pending": list(self.pending),
            # unix seconds to the millisecond: the time format of the stream's envelopes and the JSON logs
            "started_at": int(self.started_at * 1000) / 1000,  # truncated like `at`, never after it
            "finished_at": int(self.finished_at * 1000) / 1000 if self.finished_at is not None else None,
            "events": self.events,
            "error": self.error,
            "continued_by": self.continued_by,
            "tags": list(self.tags),
            "metadata": dict(self.metadata),
        }


@dataclass(eq=False, kw_only=True)
class _Run:
    run_id: str
    runner_id: str
    session_id: str
    interactions: Interactions
    context: RunnerContext | None = None
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    buffer: list[RunnerResult] = field(default_factory=list)
    sequences: list[int] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    task: asyncio.Task[None] | None = None
    cancelling: bool = False
    question: dict[str, object] | None = None  # the ask_user form of a run that ended with a question
    continued_by: str | None = None
    config: RunConfig | None = None  # the run's tags and metadata (a continuation keeps them)

    @property
    def done(self) -> bool:
        return self.finished_at is not None

    @property
    def last(self) -> int:
        return self.sequences[-1] if self.sequences else 0

    async def append(self, envelope: RunnerResult) -> None:
        if self.done:
            return  # nothing follows the terminal envelope
        sequence = envelope.sequence if envelope.sequence is not None else self.last + 1
        if sequence <= self.last:
            sequence = self.last + 1  # keep the stream strictly increasing whatever the runner sent
        if envelope.sequence != sequence:
            envelope = envelope.model_copy(update={"sequence": sequence})
        if envelope.type == "action.requested":
            self._note_question(envelope)
        async with self.changed:
            self.buffer.append(envelope)
            self.sequences.append(sequence)
            if envelope.type in TERMINAL_TYPES:
                self.finished_at = time.time()
            self.changed.notify_all()

    def _note_question(self, envelope: RunnerResult) -> None:
        """Keep the form a question (``ask_user``) sent: it stays open after the run ends.

        Only an interaction request counts: a platform action the code requested is never a question,
        whatever its payload says.
        """
        from codeact.engine.runner.entities import INTERACTION_REQUESTED_ACTION

        data = envelope.data if isinstance(envelope.data, dict) else {}
        payload = data.get("payload")
        if data.get("action") != INTERACTION_REQUESTED_ACTION:
            return
        if isinstance(payload, dict) and payload.get("kind") == "form":
            self.question = dict(payload)

    def asked(self) -> dict[str, object] | None:
        """The open question of a run that ended with ``finish_reason`` ``ask_user``, else None."""
        if not self.done or self.question is None or self.continued_by is not None:
            return None
        last = self.buffer[-1]
        data = last.data if isinstance(last.data, dict) else {}
        if last.type != "run.completed" or data.get("finish_reason") != "ask_user":
            return None
        return self.question

    async def finish(self, code: str, message: str, *, retryable: bool = False) -> None:
        """Close the stream with a synthesized ``run.failed`` unless a terminal envelope is already in."""
        if not self.done:
            await self.append(_failed(self.run_id, self.last + 1, code, message, retryable=retryable))

    def info(self) -> RunInfo:
        status: RunStatus = "running"
        error: dict[str, object] | None = None
        pending: tuple[dict[str, object], ...] = ()
        if self.done:
            last = self.buffer[-1]
            if last.type == "run.completed":
                status = "completed"
                question = self.asked()
                pending = (dict(question),) if question is not None else ()
            else:
                data = dict(last.data or {})
                error = {k: data.get(k) for k in ("code", "message", "retryable")}
                status = "cancelled" if data.get("code") == "cancelled" else "failed"
        else:
            pending = tuple(dict(p) for p in self.interactions.pending())
            if pending:
                status = "waiting"
        return RunInfo(
            run_id=self.run_id,
            runner_id=self.runner_id,
            session_id=self.session_id,
            status=status,
            pending=pending,
            started_at=self.started_at,
            finished_at=self.finished_at,
            events=self.last,
            error=error,
            continued_by=self.continued_by,
            tags=tuple(self.config.tags) if self.config is not None else (),
            metadata=dict(self.config.metadata) if self.config is not None else {},
        )


def _log_end(run: _Run) -> None:
    """The ``run.ended`` line: status, duration, events and a failed run's error code."""
    info = run.info()
    error = info.error or {}
    log_event(
        "run.ended",
        level=logging.WARNING if info.status == "failed" else logging.INFO,
        run_id=run.run_id,
        runner_id=run.runner_id,
        session_id=run.session_id,
        status=info.status,
        duration_ms=round(((run.finished_at or time.time()) - run.started_at) * 1000, 1),
        events=info.events,
        code=error.get("code"),
    )


def _failed(run_id: str, sequence: int, code: str, message: str, *, retryable: bool) -> RunnerResult:
    from codeact.engine.runner import RunnerResult

    now = time.time()
    return RunnerResult.model_validate(
        {
            "run_id": run_id,
            "type": "run.failed",
            "data": ErrorInfo(code=code, message=message, details={"retryable": retryable}).to_dict(),
            "sequence": sequence,
            "timestamp": int(now),  # protocol v1's whole seconds, and `at` to the millisecond (every envelope)
            "at": int(now * 1000) / 1000,
        }
    )


class Runs(Protocol):
    """What the HTTP app needs of a run manager: ``RunManager`` here, the queue's ``QueueRunManager``."""

    async def start(self, runner_id: str, context: RunnerContext, *, config: RunConfig | None = None) -> RunInfo:
        """Start a run (labelled with ``config``'s tags and metadata) and return at once."""
        ...

    async def get(self, run_id: str) -> RunInfo | None:
        """The run's state, or None."""
        ...

    async def by_session(self, session_id: str) -> RunInfo | None:
        """The session's most recent run, or None."""
        ...

    async def list(self) -> list[RunInfo]:
        """Every known run, most recent first."""
        ...

    def events(self, run_id: str, after: int = 0) -> AsyncIterator[RunnerResult]:
        """The run's envelopes after ``after``, buffered then live, each once, in order."""
        ...

    async def cancel(self, run_id: str) -> RunInfo:
        """Cancel the run; returns once its sandbox is gone."""
        ...

    async def interact(self, run_id: str, data: Mapping[str, object]) -> RunInfo:
        """Answer a pending interaction request (``{"request_id", "data"}``)."""
        ...

    async def close(self) -> None:
        """Cancel every running run (server shutdown)."""
        ...


class RunManager:
    """Starts runs as tasks of the running event loop and keeps their result streams.

    Args:
        runners: The runners served, by id.
        max_active: At most this many runs at once; ``start`` refuses more (HTTP 503).
        keep: Finished runs kept for late readers.
        keep_s: Seconds a finished run is kept.
        api_rate: The rate limit of each run's run-scoped API calls (None: unlimited).
    """

    def __init__(
        self,
        runners: Mapping[str, BlueprintRunner],
        *,
        max_active: int = 256,
        keep: int = 1000,
        keep_s: float = 3600.0,
        api_rate: RateLimit | None = None,
    ) -> None:
        self.runners = runners
        self.api_rate = api_rate
        self.max_active = max_active
        self.keep = keep
        self.keep_s = keep_s
        self._runs: dict[str, _Run] = {}
        self._authorizations: AuthorizationRegistry | None = None

    @property
    def authorizations(self) -> AuthorizationRegistry:
        """The authorization snapshots of the running runs (codeact as the host of run-scoped API calls).

        Each run's grants (``context.resources`` and what its context allows, bounded by its runner's manifest
        permissions) are registered, as a frozen deep copy, when it starts and unregistered when its last
        envelope is in; ``check(action, payload, caller=runner_id)`` checks a run-scoped call in the seed's order.
        """
        if self._authorizations is None:
            from codeact.engine.runner import AuthorizationRegistry

            self._authorizations = AuthorizationRegistry(rate=self.api_rate)
        return self._authorizations

    def run_state(self, run_id: str) -> _Run | None:
        """The run ``run_id`` (its context, session, stream and state), or None; the API serves registered runs."""
        return self._runs.get(run_id)

    async def start(self, runner_id: str, context: RunnerContext, *, config: RunConfig | None = None) -> RunInfo:
        """Start a run of ``runner_id`` on ``context`` and return at once.

        The run id is the context's ``run_id`` (a fresh ``run-...`` id when it is empty); ``config``'s tags
        and metadata label the run (its ``run.started``, its session record, ``GET /v1/runs/{id}``).

        Raises:
            ServiceError: unknown runner (404), a run with that id exists or its session is in use by a
                running run (409), too many runs at once (503).
        """
        from codeact.engine.runner import Interactions, session_id_for

        runner = served_runner(self.runners, runner_id)
        self._evict()
        run_id = str(getattr(context, "run_id", "") or "") or f"run-{uuid.uuid4().hex}"
        if run_id in self._runs:
            raise ServiceError(
                f"run {run_id!r} exists already; give each run a new context.run_id "
                f"(GET /v1/runs/{run_id}/events re-attaches to it)",
                code="service.run_exists",
                status=409,
            )
        session_id = session_id_for(context)
        busy = next((r for r in self._runs.values() if r.session_id == session_id and not r.done), None)
        if busy is not None:
            raise ServiceError(
                f"session {session_id!r} of this conversation is in use by run {busy.run_id!r}; wait for it to "
                f"end (GET /v1/runs/{busy.run_id}) or cancel it (POST /v1/runs/{busy.run_id}/cancel)",
                code="service.session_busy",
                status=409,
            )
        active = sum(1 for r in self._runs.values() if not r.done)
        if active >= self.max_active:
            raise ServiceError(
                f"the server runs {active} runs already (its limit); retry later",
                code="service.busy",
                status=503,
                headers={"Retry-After": "1"},
            )
        run = _Run(
            run_id=run_id,
            runner_id=runner_id,
            session_id=session_id,
            interactions=Interactions(),
            context=context,
            config=config,
        )
        self.authorizations.register(
            context.model_copy(update={"run_id": run_id}), runner_id=runner_id, permissions=runner.manifest.permissions
        )
        for earlier in self._runs.values():  # the conversation went on: an earlier open question is closed
            if earlier.session_id == session_id and earlier.asked() is not None:
                earlier.continued_by = run_id
        self._runs[run_id] = run
        run.task = asyncio.get_running_loop().create_task(self._drive(run, runner, context), name=f"run {run_id}")
        return run.info()

    async def _drive(self, run: _Run, runner: BlueprintRunner, context: RunnerContext) -> None:
        tags = list(run.config.tags) if run.config is not None and run.config.tags else None  # not the metadata
        log_event("run.started", run_id=run.run_id, runner_id=run.runner_id, session_id=run.session_id, tags=tags)
        try:
            await self._iterate(run, runner, context)
        finally:
            self.authorizations.unregister(run.run_id)  # the seed: the host unregisters the ended run
            _log_end(run)

    async def _iterate(self, run: _Run, runner: BlueprintRunner, context: RunnerContext) -> None:
        stream = runner.run(context, run_id=run.run_id, interactions=run.interactions, config=run.config)
        try:
            async with contextlib.aclosing(stream) as envelopes:  # type: ignore[type-var]
                async for envelope in envelopes:
                    await run.append(envelope)
        except asyncio.CancelledError:
            # Our own cancel (or the server shutting down): the runner has killed the sandbox.
            await run.finish("cancelled", "the run was cancelled")
            return
        except Exception as exc:  # a runner bug must still close the stream, never leave readers hanging
            await run.finish("runner.error", f"the runner failed: {type(exc).__name__}: {exc}")
            return
        await run.finish("runner.error", "the runner's stream ended without run.completed or run.failed")

    async def get(self, run_id: str) -> RunInfo | None:
        """The run's current state, or None when it is unknown (or forgotten)."""
        run = self._runs.get(run_id)
        return run.info() if run is not None else None

    async def by_session(self, session_id: str) -> RunInfo | None:
        """The most recent run of the session (a running one first), or None."""
        runs = [r for r in self._runs.values() if r.session_id == session_id]
        if not runs:
            return None
        runs.sort(key=lambda r: (not r.done, r.started_at))
        return runs[-1].info()

    async def list(self) -> list[RunInfo]:
        """Every known run, most recently started first."""
        return [r.info() for r in sorted(self._runs.values(), key=lambda r: r.started_at, reverse=True)]

    def _get(self, run_id: str) -> _Run:
        run = self._runs.get(run_id)
        if run is None:
            raise ServiceError(
                f"run {run_id!r} not found (finished runs are kept {self.keep_s:g} s); start one with POST /v1/runs",
                code="service.run_not_found",
                status=404,
            )
        return run

    async def events(self, run_id: str, after: int = 0) -> AsyncIterator[RunnerResult]:
        """The run's envelopes with ``sequence > after``: buffered ones, then live ones, until the last.

        Raises:
            ServiceError: unknown run (404), raised before the first envelope.
        """
        run = self._get(run_id)
        index = bisect.bisect_right(run.sequences, after)
        while True:
            while index < len(run.buffer):
                yield run.buffer[index]
                index += 1
            if run.done:
                return
            async with run.changed:
                await run.changed.wait_for(lambda seen=index: len(run.buffer) > seen or run.done)  # type: ignore[misc]

    async def cancel(self, run_id: str) -> RunInfo:
        """Cancel a run and wait (up to 15 s) until its sandbox is gone; a finished run is left as it is.

        Raises:
            ServiceError: unknown run (404).
        """
        run = self._get(run_id)
        task = run.task
        if task is not None and not task.done():
            run.cancelling = True
            task.cancel()
            await asyncio.wait({task}, timeout=_CANCEL_WAIT_S)
        return run.info()

    async def interact(self, run_id: str, data: Mapping[str, object]) -> RunInfo:
        """Answer one of the run's pending interaction requests (an approval waits in place).

        A run that ended with a question (``finish_reason`` ``ask_user``) lists it in ``pending``
        until it is answered: the answer starts the continuation run, a new run of the same
        conversation (``continuation_context``, same session and variables, the same time budget
        as the run that asked), and this returns that run; the asking run's ``continued_by``
        names it.

        Args:
            run_id: The run.
            data: An interaction submission ``{"interaction_id", "action_id", "values"}`` (the protocol's
                shape: ``action_id`` ``approve`` or ``deny`` for an approval), or ``{"request_id", "data"}``
                with the answer in ``data``.

        Raises:
            ServiceError: unknown run (404), a finished run (409), a body naming no request (422);
                for a question, what ``start`` raises (the session busy, the server busy).
            CodeactError: ``runner.interaction_not_found`` when no request of that id waits,
                ``runner.invalid_interaction`` when the answer does not fit the request.
        """
        run = self._get(run_id)
        request_id, answer = interaction_submission(data)
        question = run.asked()
        if question is not None and run.context is not None and request_id == question.get("interaction_id"):
            from codeact.engine.runner import continuation_context

            submission = question_answer(request_id, answer)
            following = continuation_context(run.context, submission, run_id=continuation_run_id(data))
            following = with_budget(following, run.context, run.started_at)
            # No await before it registers: one answer wins. The continuation keeps the run's labels.
            info = await self.start(run.runner_id, following, config=run.config)
            run.continued_by = info.run_id
            return info
        if run.done:
            raise ServiceError(
                f"run {run_id!r} has ended ({run.info().status})"
                + (f"; its question was answered by run {run.continued_by!r}" if run.continued_by else "")
                + "; nothing waits for an interaction",
                code="service.run_finished",
                status=409,
            )
        run.interactions.submit(request_id, answer)
        return run.info()

    async def close(self) -> None:
        """Cancel every running run (server shutdown): each session is left consistent and resumable."""
        tasks = [r.task for r in self._runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=_CANCEL_WAIT_S)

    def _evict(self) -> None:
        finished = sorted((r for r in self._runs.values() if r.done), key=lambda r: r.finished_at or 0.0)
        horizon = time.time() - self.keep_s
        excess = len(finished) - self.keep
        for position, run in enumerate(finished):
            if position < excess or (run.finished_at or 0.0) < horizon:
                del self._runs[run.run_id]
