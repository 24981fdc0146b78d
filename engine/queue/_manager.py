"""``QueueRunManager``: the service's run manager over the queue (``codeact serve --queue URL``).

Same methods as ``codeact.engine.service.RunManager``; runs go to Celery workers instead of running in the
server. Envelopes are made from the run's Redis stream by ``codeact.engine.runner.ResultMapper`` (replayed
from the stream's start, so sequence numbers are the same for every reader and ``after=N`` resumes
exactly). An approval pauses the run on its worker (``action.requested`` is sent, the run is
``waiting``); answering it enqueues the continuation on any worker, and the same event stream goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeact.engine.errors import ErrorInfo
from codeact.engine.queue._client import QueueClient, run_labels
from codeact.engine.queue._state import PREFIX, TERMINAL, RunState

if TYPE_CHECKING:
    from codeact.engine.agent import RunConfig
    from codeact.engine.runner import BlueprintRunner, ResultMapper, RunnerContext, RunnerResult
    from codeact.engine.service import RunInfo

__all__ = ["QueueRunManager"]

_CANCEL_WAIT_S = 15.0
_QUEUE_ONLY = frozenset({"run.queued", "run.requeued", "run.paused"})


class QueueRunManager:
    """Starts runs on the queue's workers and serves their result streams from Redis.

    Args:
        runners: The runners served, by id (their blueprint files travel with each run).
        queue: The broker's Redis URL.
        store: The store URL the workers use for these sessions (default: the workers' ``--store``).
        model: Model override sent with every run (as ``codeact serve --model``).
        base_url: Model server base URL sent with every run.
        max_active: At most this many queued or running runs at once; ``start`` refuses more (503).
        queue_name: The Celery queue the runs go to.
        sandbox: ``subprocess`` or ``docker``: where the workers run the code (default: the blueprint's).
    """

    def __init__(
        self,
        runners: Mapping[str, BlueprintRunner],
        *,
        queue: str,
        store: str | None = None,
        model: str | None = None,
        base_url: str | None = None,
        max_active: int = 10_000,
        queue_name: str | None = None,
        sandbox: str | None = None,
    ) -> None:
        from codeact.engine.queue._app import DEFAULT_QUEUE

        self.runners = runners
        self.client = QueueClient(queue)
        self.state: RunState = self.client.state
        self.store = store
        self.model = model
        self.base_url = base_url
        self.max_active = max_active
        self.queue_name = queue_name or DEFAULT_QUEUE
        self.sandbox = sandbox
        self._async: Any = None

    # -- starting ----------------------------------------------------------------------------------
    async def start(self, runner_id: str, context: RunnerContext, *, config: RunConfig | None = None) -> RunInfo:
        """Enqueue a run of ``runner_id`` on ``context`` and return at once.

        ``config``'s tags and metadata travel with the run (and its continuations) to the worker.

        Raises:
            ServiceError: unknown runner (404), a run with that id exists or the session is in use (409),
                too many runs queued or running (503), a context without input (422).
        """
        import uuid

        from codeact.engine.runner import compose_input, session_id_for
        from codeact.engine.service.errors import ServiceError, served_runner

        runner = served_runner(self.runners, runner_id)
        run_id = str(getattr(context, "run_id", "") or "") or f"run-{uuid.uuid4().hex}"
        if self.state.get(run_id):
            raise ServiceError(
                f"run {run_id!r} exists already; give each run a new context.run_id "
                f"(GET /v1/runs/{run_id}/events re-attaches to it)",
                code="service.run_exists",
                status=409,
            )
        session_id = session_id_for(context)
        busy = await self.by_session(session_id)
        if busy is not None and not busy.done:
            raise ServiceError(
                f"session {session_id!r} of this conversation is in use by run {busy.run_id!r}; wait for it to "
                f"end (GET /v1/runs/{busy.run_id}) or cancel it (POST /v1/runs/{busy.run_id}/cancel)",
                code="service.session_busy",
                status=409,
            )
        active = len(self.state.active())
        if active >= self.max_active:
            raise ServiceError(
                f"the queue holds {active} runs already (this server's limit); retry later",
                code="service.busy",
                status=503,
                headers={"Retry-After": "1"},
            )
        text, _attachments, parts = compose_input(context)
        if parts:
            raise ServiceError(
                f"the context has {len(parts)} image or file contents; queued runs take text only: "
                "serve the runner without --queue to send files",
                code="service.invalid_request",
                status=422,
            )
        if not text:
            raise ServiceError(
                "the context has no text input (queued runs take input.text or an interaction answer)",
                code="service.invalid_request",
                status=422,
            )
        agent = getattr(runner, "agent", None)
        if agent is None:  # a flow blueprint's runner: workers build codeact agents only
            raise ServiceError(
                f"runner {runner_id!r} is a flow: flows run in the server, not on queue workers; "
                "serve it without --queue",
                code="service.invalid_request",
                status=422,
            )
        source = agent.spec.source_path
        if source is None:
            raise ServiceError(
                f"runner {runner_id!r} was not loaded from a file: the queue sends the blueprint's file to workers",
                code="service.invalid_request",
                status=422,
            )
        from codeact.engine.blueprint import pack_blueprint
        from codeact.engine.errors import BlueprintLoadError

        try:  # the files the blueprint references travel with it (docs/scaling.md)
            bundle = pack_blueprint(source, model=self.model)
        except BlueprintLoadError as exc:
            raise ServiceError(
                f"runner {runner_id!r} cannot be sent to the workers: {exc.message}", code=exc.code, status=422
            ) from None
        deadline = getattr(getattr(context, "runtime", None), "deadline_at", None)
        request = {
            "timeout_s": max(0.001, float(deadline) - time.time()) if deadline is not None else None,
            "runner_id": runner_id,
            "input": text,
            "session_id": session_id,
            "blueprint_text": Path(source).read_text(encoding="utf-8"),
            "blueprint_dir": str(Path(source).resolve().parent),
            "blueprint_bundle": bundle,
            "model": self.model,
            "base_url": self.base_url,
            "store": self.store,
            "queue": self.queue_name,
            "show_work": runner.show_work,
            "sandbox": self.sandbox,
            "user": context.actor.actor_id if context.actor is not None else None,
            "context": context.model_dump(mode="json", exclude_none=True),  # a question's answer continues it
            **run_labels(config),
        }
        if busy is not None and busy.pending and busy.continued_by is None:  # its question is moot now
            from codeact.engine.queue._state import swap_status

            if swap_status(self.state, busy.run_id, "paused", "completed"):
                self.state.update(busy.run_id, continued_by=run_id)
        self.client.enqueue(request, run_id=run_id)
        return await self._info(run_id)

    # -- reading -----------------------------------------------------------------------------------
    def _mapper(self, run_id: str, info: Mapping[str, str]) -> ResultMapper:
        from codeact.engine.runner import ResultMapper

        request = json.loads(info.get("request") or "{}")
        context = request.get("context")
        delivery = context.get("delivery") if isinstance(context, dict) else None
        delivery = delivery if isinstance(delivery, dict) else {}
        size = delivery.get("max_message_size")
        return ResultMapper(
            run_id,
            show_work=bool(request.get("show_work", True)),
            streaming=bool(delivery.get("supports_streaming", False)),  # as the in-process runner: the host says
            max_message_size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )

    def _envelopes(self, mapper: ResultMapper, entry: Mapping[str, Any], started: list[bool]) -> list[RunnerResult]:
        """The protocol results of one stream entry (engine events through the mapper; queue entries as needed)."""
        from codeact.engine.events import event_from_json

        kind = entry.get("type")
        if kind in _QUEUE_ONLY:
            return []
        if kind == "run.cancelled":
            return [mapper.failed("the run was cancelled", code="cancelled", retryable=False)]
        if entry.get("sequence") is None:  # the worker's own run.failed (deadline, a bad request)
            error = ErrorInfo.from_dict(entry.get("error") if isinstance(entry.get("error"), Mapping) else {})
            code = error.code
            message = error.message or "the run failed"
            if code == "queue.deadline":  # the worker's run time limit: the protocol's timeout (retryable)
                return [mapper.failed(f"[{code}] {message}", code="runner.timeout")]
            return [mapper.failed(message, code=code)]
        if kind == "run.started":
            if started[0]:
                return []  # a continuation (after a pause or a lost worker): one run for the client
            started[0] = True
        try:
            event = event_from_json(entry)
        except Exception:
            return []
        return list(mapper.map(event))

    def _replay(self, run_id: str) -> tuple[list[RunnerResult], dict[str, str]]:
        info = self.state.get(run_id)
        mapper = self._mapper(run_id, info)
        started = [False]
        out: list[RunnerResult] = []
        for event in self.state.history(run_id):
            out.extend(self._envelopes(mapper, event, started))
        return out, info

    async def events(self, run_id: str, after: int = 0) -> AsyncIterator[RunnerResult]:
        """The run's envelopes with ``sequence > after``, from Redis, then live, until the last.

        Raises:
            ServiceError: unknown run (404), raised before the first envelope.
        """
        info = self._known(run_id)
        mapper = self._mapper(run_id, info)
        started = [False]
        client = self._redis()
        cursor = "0-0"
        key = self.state.stream_key(run_id)
        while True:
            found = await client.xread({key: cursor}, count=500, block=1000)
            for _key, entries in found or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    for envelope in self._envelopes(mapper, json.loads(fields["e"]), started):
                        if envelope.sequence is not None and envelope.sequence > after:
                            yield envelope
                        if envelope.terminal:
                            return

    def _redis(self) -> Any:
        if self._async is None:
            import redis.asyncio as aioredis

            self._async = aioredis.Redis.from_url(self.client.url, decode_responses=True)
        return self._async

    def _known(self, run_id: str) -> dict[str, str]:
        from codeact.engine.service.errors import ServiceError

        info = self.state.get(run_id)
        if not info or not info.get("runner_id"):
            raise ServiceError(
                f"run {run_id!r} not found (queued runs are kept 24 h); start one with POST /v1/runs",
                code="service.run_not_found",
                status=404,
            )
        return info

    async def get(self, run_id: str) -> RunInfo | None:
        """The run's state, or None when it is unknown (or expired)."""
        from codeact.engine.service import RunInfo

        envelopes, info = await asyncio.to_thread(self._replay, run_id)
        if not info or not info.get("runner_id"):
            return None
        status = info.get("status", "queued")
        pending: tuple[dict[str, Any], ...] = ()
        if status == "paused":
            pause = json.loads(info.get("pause") or "{}")
            pending = _pending(envelopes, pause)
            if pause.get("kind") == "ask_user":
                status = "completed"  # the run ended with its question; the answer starts the next run
        error: dict[str, Any] | None = None
        last = envelopes[-1] if envelopes else None
        if last is not None and last.type == "run.failed":
            data = dict(last.data or {}) if isinstance(last.data, Mapping) else {}
            error = {k: data.get(k) for k in ("code", "message", "retryable")}
        shown = {"queued": "running", "running": "running", "paused": "waiting"}.get(status, status)
        done = status in TERMINAL
        request = json.loads(info.get("request") or "{}")
        return RunInfo(
            run_id=run_id,
            runner_id=info.get("runner_id", ""),
            session_id=info.get("session_id", ""),
            status=shown,  # type: ignore[arg-type]
            pending=pending,
            started_at=float(info.get("created_at") or 0.0),
            finished_at=float(info.get("updated_at") or time.time()) if done else None,
            events=(last.sequence or 0) if last is not None else 0,
            error=error,
            continued_by=info.get("continued_by") or None,
            tags=tuple(request.get("tags") or ()),
            metadata=dict(request.get("metadata") or {}),
        )

    async def by_session(self, session_id: str) -> RunInfo | None:
        """The session's most recent run, or None."""
        run_id = self.state.redis.get(f"{PREFIX}:session:{session_id}:last")
        return await self.get(str(run_id)) if run_id else None

    async def list(self) -> list[RunInfo]:
        """The most recent runs (at most 200), most recent first."""
        ids = self.state.redis.zrevrange(f"{PREFIX}:runs", 0, 199)
        found = [await self.get(str(run_id)) for run_id in ids]
        return [info for info in found if info is not None]

    # -- acting ------------------------------------------------------------------------------------
    async def cancel(self, run_id: str) -> RunInfo:
        """Cancel the run (queued: never starts; running: its worker kills the sandbox); waits up to 15 s."""
        self._known(run_id)
        self.client.cancel(run_id)
        deadline = time.monotonic() + _CANCEL_WAIT_S
        while time.monotonic() < deadline and self.state.get(run_id).get("status") not in TERMINAL:
            await asyncio.sleep(0.1)
        return await self._info(run_id)

    async def interact(self, run_id: str, data: Mapping[str, Any]) -> RunInfo:
        """Answer the run's pending approval (its continuation is enqueued on any worker) or question.

        A run that ended with a question (``ask_user``) lists it in ``pending``; the answer starts a
        new run of the same conversation (``continuation_context``; same session), returned here,
        and the asking run's ``continued_by`` names it.

        Raises:
            ServiceError: unknown run (404), a finished run (409), a body naming no request (422).
            CodeactError: ``runner.interaction_not_found`` when no request of that id waits.
        """
        from codeact.engine.runner import RunnerError
        from codeact.engine.runner.interactions import decision_from
        from codeact.engine.service.contract import interaction_submission
        from codeact.engine.service.errors import ServiceError

        info = self._known(run_id)
        request_id, answer = interaction_submission(data)
        pause = json.loads(info.get("pause") or "{}")
        if info.get("status") == "paused" and pause.get("kind") == "ask_user":
            asked = await self.get(run_id)
            if asked is not None and asked.pending and asked.pending[0].get("interaction_id") == request_id:
                return await self._answer(run_id, info, request_id, answer, data)
        if info.get("status") in TERMINAL or pause.get("kind") == "ask_user":
            answered = info.get("continued_by")
            raise ServiceError(
                f"run {run_id!r} has ended ({info.get('status')})"
                + (f"; its question was answered by run {answered!r}" if answered else "")
                + "; nothing waits for an interaction",
                code="service.run_finished",
                status=409,
            )
        if (
            info.get("status") != "paused"
            or pause.get("kind") != "approval"
            or request_id
            not in (
                pause.get("interaction_id"),
                pause.get("request_id"),
            )
        ):
            raise RunnerError(
                f"no interaction {request_id!r} is waiting for an answer on run {run_id!r}",
                code="runner.interaction_not_found",
            )
        decision = decision_from(answer)
        self.client.interact(run_id, {"approve": decision.allow, "reason": decision.reason})
        return await self._info(run_id)

    async def _answer(
        self, run_id: str, info: Mapping[str, str], request_id: str, answer: Mapping[str, Any], data: Mapping[str, Any]
    ) -> RunInfo:
        """Answer a question: the run becomes ``completed`` and its continuation is a new queued run."""
        from codeact.engine.queue._state import swap_status
        from codeact.engine.runner import RunnerContext, continuation_context
        from codeact.engine.service.contract import continuation_run_id, question_answer, with_budget
        from codeact.engine.service.errors import ServiceError

        submission = question_answer(request_id, answer)
        request = json.loads(info.get("request") or "{}")
        if not isinstance(request.get("context"), dict):
            raise ServiceError(
                f"run {run_id!r} was not started through the service (no run context kept): answer it with "
                "the conversation's next message (POST /v1/runs)",
                code="service.run_finished",
                status=409,
            )
        asked = RunnerContext.model_validate(request["context"])
        following = continuation_context(asked, submission, run_id=continuation_run_id(data))
        following = with_budget(following, asked, float(info.get("created_at") or time.time()))
        labels = _labels(request)
        if not swap_status(self.state, run_id, "paused", "completed"):  # one answer wins
            raise ServiceError(
                f"run {run_id!r} was answered meanwhile; nothing waits for an interaction",
                code="service.run_finished",
                status=409,
            )
        self.state.update(run_id, continued_by=following.run_id)
        try:
            return await self.start(str(info.get("runner_id")), following, config=labels)
        except Exception:
            self.state.update(run_id, status="paused", continued_by="")  # the question stays open
            raise

    async def _info(self, run_id: str) -> RunInfo:
        from codeact.engine.service.errors import ServiceError

        info = await self.get(run_id)
        if info is None:
            raise ServiceError(f"run {run_id!r} expired meanwhile", code="service.run_not_found", status=404)
        return info

    async def close(self) -> None:
        """Close the connections (runs go on on the workers)."""
        if self._async is not None:
            await self._async.aclose()
            self._async = None
        self.client.close()


def _labels(request: Mapping[str, Any]) -> RunConfig | None:
    """The tags and metadata a queued run's request carries, for its continuation."""
    from codeact.engine.agent import RunConfig

    tags, metadata = request.get("tags") or (), request.get("metadata") or {}
    return RunConfig(tags=tags, metadata=metadata) if tags or metadata else None


def _pending(envelopes: list[RunnerResult], pause: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The interaction a paused run waits on, as ``RunManager`` lists it in ``pending`` (one, or none).

    It is found by what it is, not where it is: an interaction request (``interaction.requested``; a
    platform action the code requested is an ``action.requested`` too, and one gathered with the call
    that waits can follow its request), and for an approval the one the pause names (``interaction_id``).
    """
    from codeact.engine.runner.entities import INTERACTION_REQUESTED_ACTION

    asked: list[dict[str, Any]] = []
    for envelope in envelopes:
        if envelope.type != "action.requested":
            continue
        raw = envelope.data.model_dump(mode="json") if hasattr(envelope.data, "model_dump") else envelope.data
        if not isinstance(raw, Mapping) or raw.get("action") != INTERACTION_REQUESTED_ACTION:
            continue  # a platform action the code requested
        payload = raw.get("payload")
        asked.append(dict(payload) if isinstance(payload, Mapping) else {})
    if pause.get("kind") == "approval":
        named = pause.get("interaction_id")
        waiting = [p for p in asked if p.get("kind") == "confirmation"]
        if named:
            waiting = [p for p in waiting if p.get("interaction_id") == named]
    else:  # ask_user: the question the run ended with
        waiting = [p for p in asked if p.get("kind") == "form"]
    return tuple(waiting[-1:])
