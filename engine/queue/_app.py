"""The Celery app of codeact's queue: Redis broker, JSON only, late acknowledgement.

A task message carries only ``[run_id, attempt]`` (JSON); the run's request lives in Redis
(:mod:`codeact.engine.queue._state`). Messages are acknowledged after the run (``acks_late``) and given back
when the worker is lost (``reject_on_worker_lost``); a message taken by a worker that then died is
redelivered after the broker's ``visibility_timeout``. Runs whose worker died while running are
re-enqueued faster than that, by the lease reaper of every live worker (:mod:`codeact.engine.queue._worker`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_QUEUE", "TASK_NAME", "VISIBILITY_TIMEOUT_S", "make_app"]

DEFAULT_QUEUE = "codeact"
"""The queue runs go to unless told otherwise."""
TASK_NAME = "codeact.queue.run"
"""The Celery task name of one run."""
VISIBILITY_TIMEOUT_S = 3600.0
"""Default broker visibility timeout (the backstop; dead workers' runs are re-enqueued by leases)."""


def make_app(broker_url: str, *, visibility_timeout: float | None = None) -> Any:
    """A Celery app on ``broker_url`` (``redis://...``) configured for codeact runs.

    Args:
        broker_url: The Redis broker URL.
        visibility_timeout: Seconds before an unacknowledged message is redelivered (default
            ``$CODEACT_QUEUE_VISIBILITY_TIMEOUT`` or an hour).
    """
    import os

    from celery import Celery

    if visibility_timeout is None:
        visibility_timeout = float(os.environ.get("CODEACT_QUEUE_VISIBILITY_TIMEOUT", VISIBILITY_TIMEOUT_S))
    app = Celery("codeact", broker=broker_url, set_as_current=False)
    app.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        event_serializer="json",
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_default_queue=DEFAULT_QUEUE,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        broker_transport_options={"visibility_timeout": visibility_timeout},
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
    )
    return app
