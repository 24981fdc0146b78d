"""A codeact worker process: a Celery worker (threads pool) running queued runs, plus a lease reaper.

Every worker runs the reaper: once a second it looks at the runs marked ``running`` whose lease is
gone (their worker died: SIGKILL, a lost machine) and re-enqueues each as its next attempt; the
attempt continues the session from its last recorded round on whichever worker takes it.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codeact.engine.queue._app import DEFAULT_QUEUE, TASK_NAME, make_app
from codeact.engine.queue._state import RunState
from codeact.engine.queue._task import WorkerConfig, execute

if TYPE_CHECKING:
    from codeact.toolkits import CallBudgets

__all__ = ["blueprint_index", "build_worker_app", "requeue", "start_worker"]

_log = logging.getLogger("codeact.queue")
_REAP_S = 1.0


def requeue(app: Any, state: RunState, run_id: str, *, reason: str, queue: str | None = None) -> int:
    """Enqueue the run's next attempt (same run id and stream); returns the attempt number."""
    request = state.request(run_id) or {}
    attempt = int(request.get("attempt", 1)) + 1
    request["attempt"] = attempt
    queue = queue or str(request.get("queue") or DEFAULT_QUEUE)
    state.append(
        run_id,
        {"type": "run.requeued", "run_id": run_id, "attempt": attempt, "reason": reason},
        status="queued",
        attempt=str(attempt),
        request=json.dumps(request, ensure_ascii=False),
    )
    app.send_task(TASK_NAME, args=[run_id, attempt], queue=queue)
    return attempt


def _reap(app: Any, state: RunState, name: str) -> None:
    for run_id in state.active():
        info = state.get(run_id)
        if info.get("status") != "running" or state.lease_holder(run_id) is not None:
            continue
        if state.claim_orphan(run_id, name):
            _log.warning("run %s lost its worker %s: re-enqueued", run_id, info.get("worker"))
            requeue(app, state, run_id, reason=f"its worker {info.get('worker', '?')} stopped (lease expired)")


def _reaper(app: Any, state: RunState, name: str, stop: threading.Event) -> None:
    while not stop.wait(_REAP_S):
        try:
            _reap(app, state, name)
        except Exception:  # Redis down for a moment: try again next tick
            _log.exception("lease reaper")


def blueprint_index(directory: Path | None) -> dict[str, Path]:
    """Blueprint id -> file for every ``*.yaml``/``*.yml`` of ``directory`` that loads."""
    if directory is None:
        return {}
    from codeact.engine.blueprint import load_path
    from codeact.engine.errors import CodeactError

    found: dict[str, Path] = {}
    for path in sorted([*directory.glob("*.yaml"), *directory.glob("*.yml")]):
        try:
            bp = load_path(path)
        except CodeactError:
            continue
        ident = getattr(bp, "id", None) or path.stem
        found[str(ident)] = path
    return found


def build_worker_app(broker_url: str, state_url: str, config: WorkerConfig) -> tuple[Any, RunState]:
    """The Celery app with the run task bound to ``config``, and the run state it uses."""
    app = make_app(broker_url)
    state = RunState(state_url)

    @app.task(name=TASK_NAME, bind=True, acks_late=True, reject_on_worker_lost=True)  # type: ignore[untyped-decorator]
    def run_task(self: Any, run_id: str, attempt: int) -> str:
        if not isinstance(run_id, str) or not isinstance(attempt, int):
            return "invalid"
        outcome = execute(state, config, run_id, attempt)
        if outcome == "busy":  # the attempt before is still closing: deliver this one again shortly
            queue = str((state.request(run_id) or {}).get("queue") or DEFAULT_QUEUE)
            app.send_task(TASK_NAME, args=[run_id, attempt], queue=queue, countdown=1)
        return outcome

    return app, state


def start_worker(
    *,
    broker_url: str,
    state_url: str | None = None,
    store: str | None = None,
    concurrency: int = 2,
    queues: tuple[str, ...] = (DEFAULT_QUEUE,),
    toolkits: tuple[str, ...] = (),
    blueprints: Path | None = None,
    max_sandboxes: int | None = None,
    run_timeout_s: float | None = None,
    max_round_seconds: float | None = None,
    call_budgets: CallBudgets | None = None,
    name: str | None = None,
    loglevel: str = "WARNING",
    strict: bool = False,
) -> None:
    """Run a worker in this process until it is stopped (SIGTERM: warm shutdown)."""
    from codeact.toolkits import load_registry

    node = name or f"codeact-{os.getpid()}@{socket.gethostname()}"
    config = WorkerConfig(
        name=node,
        store=store,
        registry=load_registry(list(toolkits)),
        blueprints=blueprint_index(blueprints),
        max_sandboxes=max_sandboxes or concurrency,
        run_timeout_s=run_timeout_s,
        max_round_seconds=max_round_seconds,
        call_budgets=call_budgets,
        strict=strict,
    )
    app, state = build_worker_app(broker_url, state_url or broker_url, config)
    stop = threading.Event()
    threading.Thread(target=_reaper, args=(app, state, node, stop), name="codeact-reaper", daemon=True).start()
    try:
        app.worker_main(
            argv=[
                "worker",
                "--pool=threads",
                f"--concurrency={concurrency}",
                f"--queues={','.join(queues)}",
                f"--hostname={node}",
                f"--loglevel={loglevel}",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ]
        )
    finally:
        stop.set()
        time.sleep(0)
        state.close()
