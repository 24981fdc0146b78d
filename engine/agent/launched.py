"""The record of the tasks a session launched, kept in the session's own metadata (``extra["tasks"]``).

A run's :class:`~codeact.toolkits.tasks.TaskBoard` (``ToolkitContext.tasks``, what ``system.tasks()`` lists)
writes its entries here as each task starts and ends, so the next run of the session (a continued session,
an answered question, a resume after a crash) lists them too. An entry an earlier run left ``running`` is
read back from the task's own session: a sub-agent's id is its session id, and its session says how its
run ended (its answer is its last round's ``finish``). The record goes with the session when it is deleted.

What it does not own: which toolkits launch tasks (they write the board), the entries' shape and bounds
(``codeact.toolkits.tasks``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from codeact.engine.errors import StoreError
from codeact.sandbox.runtime.codec import plain
from codeact.toolkits.tasks import bounded_value

if TYPE_CHECKING:
    from codeact.engine.store import Store

__all__ = ["TASKS_KEY", "SessionTasks"]

TASKS_KEY = "tasks"
"""The key of ``SessionMeta.extra`` that holds the entries."""

_STOPPED = "its run stopped before it ended (the process running it died, or it was stopped)"
_FAILED = "its run failed; the reason was not recorded in this session (see the task's own session)"
_PAUSED = "it asked the user a question, which a launched task cannot ask"


@dataclass(frozen=True)
class SessionTasks:
    """The :class:`~codeact.toolkits.tasks.TaskRecord` of one session in ``store``.

    A run gives its board one: ``TaskBoard(SessionTasks(store, session_id))``.
    """

    store: Store
    session_id: str

    async def load(self) -> list[dict[str, object]]:
        """The entries the session's metadata holds, oldest first."""
        meta = await self.store.get_session(self.session_id)
        entries = meta.extra.get(TASKS_KEY) if meta is not None else None
        return [dict(e) for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []

    async def save(self, entries: Sequence[Mapping[str, object]]) -> None:
        """Write ``entries`` into the session's metadata (the other keys kept)."""
        meta = await self.store.get_session(self.session_id)
        if meta is None:
            return  # the session is gone (deleted while its run went on): nothing to keep
        await self.store.update_session(self.session_id, extra={**meta.extra, TASKS_KEY: [dict(e) for e in entries]})

    async def taken(self, task_id: str) -> bool:
        """Whether a session of that id exists (an id is never given to two tasks)."""
        try:
            return await self.store.get_session(task_id) is not None
        except StoreError:  # not a valid session id: no session can have it
            return False

    async def settle(self, entry: Mapping[str, object]) -> dict[str, object]:
        """A ``running`` entry of an earlier run, as the task's own session says it ended."""
        settled = dict(entry)
        task_id = entry.get("id")
        child = None
        if isinstance(task_id, str):
            try:
                child = await self.store.get_session(task_id)
            except StoreError:
                child = None
        if child is None or child.status in ("active", "interrupted"):
            settled.update(state="interrupted", error=_STOPPED)
        elif child.status == "completed":
            last = await self.store.round(child.session_id, child.rounds) if child.rounds else None
            control = last.control if last is not None else None
            answer = control.get("answer") if control and control.get("kind") == "finish" else None
            settled.update(state="completed", answer=bounded_value(plain(answer)) if answer is not None else None)
        else:
            settled.update(state=child.status, error=_FAILED if child.status == "failed" else _PAUSED)
        if child is not None:
            settled["ended"] = child.updated_at
        return settled
