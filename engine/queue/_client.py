"""Submitting runs to the queue and watching them: ``submit()``, ``RunHandle``, cancel, answers.

Example::

    from codeact.engine.queue import submit

    handle = submit("agent.yaml", "Deploy the API", queue="redis://localhost:6379/0")
    for event in handle.events():        # every event of the run, in order (JSON dicts)
        print(event["type"])
    print(handle.result().answer)
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.errors import CodeactError
from codeact.engine.queue._app import DEFAULT_QUEUE, TASK_NAME, make_app
from codeact.engine.queue._state import STOP_TYPES, TERMINAL, RunState, swap_status

if TYPE_CHECKING:
    from codeact.engine.agent import RunConfig

__all__ = ["QueueClient", "QueueResult", "RunHandle", "submit"]


@dataclass(frozen=True, kw_only=True)
class QueueResult:
    """Where a queued run stands after its last stop event.

    Attributes:
        run_id: The run.
        session_id: Its session ("" before it started).
        status: ``completed``, ``failed``, ``cancelled`` or ``paused`` (waiting for an answer or an approval).
        answer: The final answer (or the question of an ``ask_user`` pause).
        error: ``{"code", "message"}`` of a failed run.
        pause: What a paused run waits for (``{"kind": "approval" | "ask_user", ...}``).
    """

    run_id: str
    session_id: str
    status: Literal["completed", "failed", "cancelled", "paused"]
    answer: Any = None
    error: dict[str, Any] | None = None
    pause: dict[str, Any] | None = None


class QueueClient:
    """Talks to the queue's Redis: enqueue, watch, cancel, answer.

    Args:
        url: The Redis URL of the broker (and of the runs' state unless ``state_url``).
        state_url: Another Redis for the runs' state and event streams.
    """

    def __init__(self, url: str, *, state_url: str | None = None) -> None:
        self.url = url
        self.app = make_app(url)
        self.state = RunState(state_url or url)

    def close(self) -> None:
        """Close the connections."""
        self.state.close()
        self.app.close()

    def enqueue(self, request: Mapping[str, Any], *, run_id: str | None = None) -> str:
        """Record and enqueue a run request; returns the run id."""
        run_id = run_id or uuid.uuid4().hex
        body = {**dict(request), "attempt": 1}
        queued = {"type": "run.queued", "run_id": run_id, "queue": body.get("queue", DEFAULT_QUEUE)}
        self.state.create(run_id, body, event=queued)
        self.app.send_task(TASK_NAME, args=[run_id, 1], queue=str(body.get("queue") or DEFAULT_QUEUE))
        return run_id

    def handle(self, run_id: str) -> RunHandle:
        """A handle on an existing run."""
        if not self.state.get(run_id):
            raise CodeactError(f"queued run {run_id!r} is unknown (or expired)", code="queue.run_not_found")
        return RunHandle(self, run_id)

    def cancel(self, run_id: str) -> None:
        """Cancel the run: a queued run never starts; a running one is stopped (its sandbox killed)."""
        info = self.state.get(run_id)
        if not info:
            raise CodeactError(f"queued run {run_id!r} is unknown (or expired)", code="queue.run_not_found")
        if info.get("status") in TERMINAL:
            return
        self.state.update(run_id, cancel="1")
        for status in ("queued", "paused"):
            if swap_status(self.state, run_id, status, "cancelled"):
                self.state.append(
                    run_id, {"type": "run.cancelled", "run_id": run_id, "reason": f"cancelled while {status}"}
                )
                return
        # running: the worker polls the flag, stops the round (sandbox killed) and writes run.cancelled

    def interact(self, run_id: str, data: Mapping[str, Any], *, queue: str | None = None) -> None:
        """Answer a paused run and enqueue its continuation (on any worker).

        ``data``: ``{"approve": bool, "reason"?: str}`` for an approval, ``{"answer": str}`` for ``ask_user``.

        Raises:
            CodeactError: ``queue.not_paused`` when the run waits for nothing.
        """
        from codeact.engine.queue._worker import requeue

        info = self.state.get(run_id)
        pause = json.loads(info["pause"]) if info.get("pause") else None
        if info.get("status") != "paused" or pause is None:
            raise CodeactError(f"run {run_id!r} is not paused: nothing to answer", code="queue.not_paused")
        request = self.state.request(run_id) or {}
        session_id = str(request.get("session_id") or info.get("session_id") or "")
        if pause.get("kind") == "approval":
            allow = bool(data.get("approve", data.get("allow", False)))
            reason = str(data.get("reason") or ("approved" if allow else "denied"))
            self.state.put_decision(session_id, str(pause["request_id"]), {"allow": allow, "reason": reason})
            verdict = "approved" if allow else "denied"
            text = _continue_text(pause, verdict, reason)
        else:
            text = str(data.get("answer") or "")
        request["input"] = text
        request["session_id"] = session_id
        self.state.update(run_id, request=json.dumps(request, ensure_ascii=False), pause="")
        requeue(self.app, self.state, run_id, reason="answered", queue=queue)


def _continue_text(pause: Mapping[str, Any], verdict: str, reason: str) -> str:
    from codeact import prompts

    return prompts.render(
        "queue_continue.j2",
        toolkit=pause.get("toolkit", "?"),
        operation=pause.get("operation", "?"),
        verdict=verdict,
        reason=reason,
    )


class RunHandle:
    """A queued run: its id, its events (from the run's Redis stream) and its result."""

    def __init__(self, client: QueueClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id
        self._cursor = "0-0"

    def events(self, *, after: str = "0-0", follow: bool = True) -> Iterator[dict[str, Any]]:
        """Every event of the run from the start (or after stream id ``after``), in order, each once.

        Ends after the next stop event (``run.completed``, ``run.failed``, ``run.cancelled``,
        ``run.paused``) when ``follow``; without ``follow`` only what is there now.
        """
        if not follow:
            for _entry, event in self.client.state.read(self.run_id, after):
                yield event
            return
        for entry_id, event in self.client.state.follow(self.run_id, after):
            self._cursor = entry_id
            yield event

    def result(self, timeout: float | None = None) -> QueueResult:
        """Wait for the run's next stop and return it (call again after answering a pause).

        Raises:
            CodeactError: ``queue.timeout`` when ``timeout`` seconds pass first.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            for entry_id, event in self.client.state.read(self.run_id, self._cursor, block_ms=500):
                self._cursor = entry_id
                if event.get("type") in STOP_TYPES:
                    return self._result(event)
            if deadline is not None and time.monotonic() > deadline:
                raise CodeactError(f"run {self.run_id} did not stop within {timeout} s", code="queue.timeout")

    def status(self) -> str:
        """The run's status now (queued, running, paused, completed, failed, cancelled)."""
        return self.client.state.get(self.run_id).get("status", "unknown")

    def cancel(self) -> None:
        """Cancel the run."""
        self.client.cancel(self.run_id)

    def interact(self, data: Mapping[str, Any], *, queue: str | None = None) -> None:
        """Answer the paused run (see :meth:`QueueClient.interact`)."""
        self.client.interact(self.run_id, data, queue=queue)

    def _result(self, event: Mapping[str, Any]) -> QueueResult:
        info = self.client.state.get(self.run_id)
        session_id = info.get("session_id", "")
        kind = event.get("type")
        if kind == "run.completed":
            paused = event.get("reason") == "ask_user"
            return QueueResult(
                run_id=self.run_id,
                session_id=session_id,
                status="paused" if paused else "completed",
                answer=event.get("answer"),
                pause={"kind": "ask_user", "question": event.get("answer")} if paused else None,
            )
        if kind == "run.failed":
            return QueueResult(run_id=self.run_id, session_id=session_id, status="failed", error=event.get("error"))
        if kind == "run.cancelled":
            return QueueResult(run_id=self.run_id, session_id=session_id, status="cancelled")
        pause = {k: v for k, v in event.items() if k not in ("type", "run_id", "session_id")}
        return QueueResult(run_id=self.run_id, session_id=session_id, status="paused", pause=pause)


def submit(
    blueprint: str | os.PathLike[str],
    input: str,
    *,
    queue: str,
    session_id: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    store: str | None = None,
    queue_name: str = DEFAULT_QUEUE,
    timeout_s: float | None = None,
    user: str | None = None,
    config: RunConfig | None = None,
    context: Mapping[str, Any] | None = None,
) -> RunHandle:
    """Enqueue one run of a blueprint on ``input``; any worker of ``queue_name`` takes it.

    Args:
        blueprint: A blueprint file (it travels with the run, with the files it references: bases,
            sub-agents, flow agents, prompts, scripted replies, so workers need not share a disk), or
            ``id:NAME`` for a blueprint of the workers' ``--blueprints`` folder.
        input: The user's message.
        queue: The broker's Redis URL (``redis://HOST:PORT/DB``).
        session_id: Continue (or name) this session.
        model: Override the blueprint's model (``scripted/PATH`` is read on the worker).
        base_url: Base URL of an OpenAI-compatible model server.
        store: Store URL for the session (default: the worker's ``--store``); a Redis store lets any
            worker continue the session.
        queue_name: The Celery queue (workers consume the ones they are given).
        timeout_s: Run time limit the worker enforces.
        user: Who the agent acts for.
        config: The run's tags, metadata and user (``RunConfig``; its ``thread_id`` is the session, as
            ``session_id``): the worker's run carries them into ``run.started``, the session record and
            the run's span, as ``Agent.run(config=...)`` does.
        context: The caller's context (page, URL, ...) for the prompt, as ``Agent.run(context=...)``.

    Raises:
        CodeactError: ``config.invalid`` when ``session_id`` and ``config.thread_id`` differ,
            ``context.invalid`` when ``context`` is not a mapping of JSON values, ``queue.blueprint_io``.
    """
    from codeact.engine.agent import context_text, resolve_run

    config, session_id, user = resolve_run(config, session_id, user)
    context_text(context)  # refused here, not on the worker
    request: dict[str, Any] = {
        "input": input,
        "session_id": session_id,
        "model": model,
        "base_url": base_url,
        "store": store,
        "queue": queue_name,
        "timeout_s": timeout_s,
        "user": user,
        **run_labels(config),
    }
    if context is not None:
        request["caller_context"] = dict(context)
    text = str(blueprint)
    if text.startswith("id:"):
        request["blueprint_id"] = text[3:]
    else:
        from codeact.engine.blueprint import pack_blueprint

        path = Path(blueprint)
        try:
            request["blueprint_text"] = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CodeactError(f"cannot read blueprint {text!r}: {exc.strerror}", code="queue.blueprint_io") from None
        request["blueprint_dir"] = str(path.resolve().parent)
        # The files the blueprint references travel with it: any worker resolves them as we do.
        request["blueprint_bundle"] = pack_blueprint(path, model=model)
    client = _client(queue)
    return RunHandle(client, client.enqueue(request))


def run_labels(config: RunConfig | None) -> dict[str, Any]:
    """A queued run request's ``tags`` and ``metadata`` (left out when empty); the worker reads them back."""
    if config is None:
        return {}
    out: dict[str, Any] = {}
    if config.tags:
        out["tags"] = list(config.tags)
    if config.metadata:
        out["metadata"] = dict(config.metadata)
    return out


_CLIENTS: dict[str, QueueClient] = {}


def _client(url: str) -> QueueClient:
    """One client per broker URL and process (its connections are reused by every ``submit``)."""
    client = _CLIENTS.get(url)
    if client is None:
        client = _CLIENTS[url] = QueueClient(url)
    return client
