"""Runs on many machines: Celery workers over Redis, events through a Redis stream per run.

``codeact worker`` starts a worker; ``submit()`` (or ``codeact run FILE --queue URL``) enqueues a
run and returns a :class:`RunHandle`. Any worker can take any run of any session: history,
variables, the record and the session lock live in the store (Redis), so a run whose worker died is
continued elsewhere from its last recorded round (docs/scaling.md).
"""

from __future__ import annotations

from codeact.engine.queue._app import DEFAULT_QUEUE, make_app
from codeact.engine.queue._client import QueueClient, QueueResult, RunHandle, submit
from codeact.engine.queue._manager import QueueRunManager
from codeact.engine.queue._state import RunState
from codeact.engine.queue._worker import start_worker

__all__ = [
    "DEFAULT_QUEUE",
    "QueueClient",
    "QueueResult",
    "QueueRunManager",
    "RunHandle",
    "RunState",
    "make_app",
    "start_worker",
    "submit",
]
