"""The tasks a session launched (sub-agent runs, ...): the board the launching toolkits write, ``system.tasks()`` reads.

A toolkit whose operation starts work of its own, the sub-agents' ``agents`` toolkit first, records it on
``ToolkitContext.tasks`` while the work runs::

    async with context.tasks.launched(kind="subagent", name="reviewer", input=task, prefix=f"{session}.reviewer") as t:
        result = await child.invoke(task, session_id=t.id)   # state "running" until the block ends
        await t.end("completed", answer=result.answer)

An exception ending the block marks the task ``failed`` with its message, a cancel ``cancelled``; the
toolkit's own :meth:`Launch.end` wins when it was called first. Each entry is kept bounded as it is
written (:data:`INPUT_CHARS`, :data:`TEXT_CHARS`, a note saying what was cut), as plain JSON.

The board lives in memory for one run; a :class:`TaskRecord` the host gives it (the engine: the session's
record in the store) keeps it across runs: :meth:`TaskBoard.listing` starts from what earlier runs of the
session recorded, and a task an earlier run left ``running`` is read back from where its own record says
how it ended. Keeping the record never fails the work: a write that fails is logged and the board goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as _dt
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

from codeact.toolkits._errors import safe_message
from codeact.toolkits.errors import ToolkitError

__all__ = [
    "INPUT_CHARS",
    "KEPT_TASKS",
    "MAX_RUNNING_TASKS",
    "TASK_STATES",
    "TEXT_CHARS",
    "ChildRun",
    "Launch",
    "Launcher",
    "TaskBoard",
    "TaskRecord",
    "TaskState",
    "bounded_text",
    "bounded_value",
    "run_child",
    "view",
]

TaskState = Literal["running", "completed", "failed", "paused", "cancelled", "interrupted"]
"""``running`` until it ends; ``interrupted``: an earlier run of the session stopped while it ran (its process
died, or it was stopped) and its own record says no more."""
TASK_STATES: tuple[str, ...] = get_args(TaskState)

INPUT_CHARS = 200
"""The most characters of a task's input an entry keeps."""
TEXT_CHARS = 500
"""The most characters of an answer (as JSON when it is data) or an error an entry keeps."""
KEPT_TASKS = 100
"""The most entries a session's record keeps (the oldest are dropped first)."""

MAX_RUNNING_TASKS = 8
"""The most tasks one board (one run) has running at once: each is a run of its own (a model, a sandbox), and
a launch past it is refused, so a loop or a gather of thousands of launches starts no more than this."""

_HELD_TASKS = 10 * KEPT_TASKS  # entries a board holds in memory (the oldest ended ones go first)
_CANCELLED = "cancelled before it ended: its call timed out, the round that started it ended, or the run stopped"
_log = logging.getLogger("codeact.toolkits.tasks")


class TaskRecord(Protocol):
    """Where a board keeps its entries between runs (the engine: the session's record in the store)."""

    async def load(self) -> list[dict[str, object]]:
        """The entries earlier runs saved, oldest first (a ``running`` one is read back: :meth:`settle`)."""
        ...

    async def save(self, entries: Sequence[Mapping[str, object]]) -> None:
        """Keep ``entries`` (all of them, oldest first) in place of what was saved before."""
        ...

    async def taken(self, task_id: str) -> bool:
        """Whether ``task_id`` is in use already (a session of that id exists), so it is not given again."""
        ...

    async def settle(self, entry: Mapping[str, object]) -> dict[str, object]:
        """An entry an earlier run left ``running``, as its own record says it ended (``interrupted`` when not)."""
        ...


def bounded_text(text: str, limit: int = TEXT_CHARS) -> str:
    """``text`` cut to ``limit`` characters, with a note saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [cut: {len(text)} characters in all]"


def bounded_value(value: object, limit: int = TEXT_CHARS) -> object:
    """``value`` as plain JSON when its JSON text fits in ``limit`` characters, else that text cut (a str)."""
    if isinstance(value, str):
        return bounded_text(value, limit)
    from codeact.sandbox.runtime import codec

    try:
        data = codec.plain(codec.encode(value))
        text = json.dumps(data, ensure_ascii=False)
    except Exception:  # a value the codec cannot carry is described, never dropped
        return bounded_text(repr(value), limit)
    return data if len(text) <= limit else bounded_text(text, limit)


def _iso(seconds: object) -> str | None:
    if not isinstance(seconds, int | float) or isinstance(seconds, bool):
        return None
    return _dt.datetime.fromtimestamp(seconds, _dt.UTC).isoformat(timespec="seconds")


def view(entry: Mapping[str, object]) -> dict[str, object]:
    """An entry as ``system.tasks()`` shows it: the fixed keys, times as ISO 8601 (UTC)."""
    return {
        "id": entry.get("id"),
        "kind": entry.get("kind"),
        "name": entry.get("name"),
        "input": entry.get("input"),
        "state": entry.get("state"),
        "answer": entry.get("answer"),
        "error": entry.get("error"),
        "started": _iso(entry.get("started")),
        "ended": _iso(entry.get("ended")),
    }


@dataclass(eq=False)
class Launch:
    """One task while its ``launched`` block runs: its id, and :meth:`end` to say how it ended."""

    id: str
    _board: TaskBoard

    @property
    def ended(self) -> bool:
        """Whether the task has ended already."""
        return self._board.entry(self.id).get("state") != "running"

    async def end(self, state: TaskState, *, answer: object = None, error: str | None = None) -> None:
        """The task ended: ``completed`` with its ``answer``, or ``failed``/``paused``/``cancelled`` with ``error``."""
        await self._board.end(self.id, state, answer=answer, error=error)


class TaskBoard:
    """The tasks one session launched, as they run and after (one board per run; see the module's docstring).

    Args:
        record: Where the entries are kept between runs; None: this run's memory only.
    """

    def __init__(self, record: TaskRecord | None = None) -> None:
        self._record = record
        self._entries: dict[str, dict[str, object]] = {}
        self._highest: dict[str, int] = {}  # the highest n given out per prefix: ids stay unique as entries go
        self._loaded = record is None
        self._lock = asyncio.Lock()  # loading and giving ids out, one launch at a time
        self._saving = asyncio.Lock()  # one write of the record at a time, each the latest entries

    def entry(self, task_id: str) -> dict[str, object]:
        """The entry of ``task_id`` (KeyError when the board has none)."""
        return self._entries[task_id]

    async def _load(self) -> None:
        if self._loaded or self._record is None:
            return
        try:
            earlier = await self._record.load()
            for item in earlier:
                entry = dict(item)
                if entry.get("state") == "running":
                    entry = dict(await self._record.settle(entry))
                task_id = entry.get("id")
                if isinstance(task_id, str) and task_id not in self._entries:
                    self._entries[task_id] = entry
                    self._note_id(task_id)
        except Exception as exc:  # bookkeeping never fails the work
            _log.warning("tasks: the tasks earlier runs launched could not be read: %s", safe_message(exc))
        self._loaded = True

    def _note_id(self, task_id: str) -> None:
        prefix, _, n = task_id.rpartition(".")
        if n.isdigit():
            self._highest[prefix] = max(self._highest.get(prefix, 0), int(n))

    async def _free_id(self, prefix: str) -> str:
        n = self._highest.get(prefix, 0) + 1
        while await self._taken(f"{prefix}.{n}"):
            n += 1
        task_id = f"{prefix}.{n}"
        self._note_id(task_id)
        return task_id

    async def _taken(self, task_id: str) -> bool:
        if self._record is None:
            return False
        try:
            return await self._record.taken(task_id)
        except Exception as exc:
            _log.warning("tasks: could not check whether %s is in use: %s", task_id, safe_message(exc))
            return False

    async def start(self, *, kind: str, name: str, input: object, prefix: str, call_id: str | None = None) -> str:
        """Record a task starting now; its id is ``{prefix}.{n}``: the next ``n`` of the prefix that no session uses."""
        async with self._lock:
            await self._load()
            running = sum(1 for e in self._entries.values() if e.get("state") == "running")
            if running >= MAX_RUNNING_TASKS:
                raise ToolkitError(
                    f"{running} tasks this run launched are still running, the most at once; await some "
                    "(gather fewer at a time) before launching more",
                    code="tasks.too_many",
                )
            task_id = await self._free_id(prefix)
            self._forget_oldest()
            text = input if isinstance(input, str) else json.dumps(bounded_value(input, INPUT_CHARS))
            self._entries[task_id] = {
                "id": task_id,
                "kind": kind,
                "name": name,
                "input": bounded_text(text, INPUT_CHARS),
                "state": "running",
                "answer": None,
                "error": None,
                "started": round(time.time(), 3),
                "ended": None,
                "call_id": call_id,
            }
        await self._save()
        return task_id

    def _forget_oldest(self) -> None:
        """Hold at most :data:`_HELD_TASKS` (a long-lived board: a toolkit's own, without a record)."""
        ended = [i for i, e in self._entries.items() if e.get("state") != "running"]
        for task_id in ended[: max(0, len(self._entries) - _HELD_TASKS + 1)]:
            del self._entries[task_id]

    async def end(self, task_id: str, state: TaskState, *, answer: object = None, error: str | None = None) -> None:
        """Record how ``task_id`` ended (the entry changes at once; the record is written after).

        ``error`` is kept as a tool error's message reaches the code: host paths reduced (``<path>/name``).
        """
        if state not in TASK_STATES or state == "running":
            raise ValueError(f"a task ends as one of {', '.join(TASK_STATES[1:])}, not {state!r}")
        entry = self._entries[task_id]
        entry.update(
            state=state,
            answer=bounded_value(answer) if answer is not None else None,
            error=bounded_text(safe_message(RuntimeError(error))) if error is not None else None,
            ended=round(time.time(), 3),
        )
        await self._save()

    async def _save(self) -> None:
        if self._record is None:
            return
        async with self._saving:
            kept = list(self._entries.values())[-KEPT_TASKS:]
            try:
                await self._record.save([dict(e) for e in kept])
            except Exception as exc:  # bookkeeping never fails the work
                _log.warning("tasks: the launched tasks could not be recorded: %s", safe_message(exc))

    @contextlib.asynccontextmanager
    async def launched(
        self, *, kind: str, name: str, input: object, prefix: str, call_id: str | None = None
    ) -> AsyncIterator[Launch]:
        """Record a task for the block's duration: an exception ending it is ``failed``, a cancel ``cancelled``."""
        launch = Launch(await self.start(kind=kind, name=name, input=input, prefix=prefix, call_id=call_id), self)
        try:
            yield launch
        except asyncio.CancelledError:
            if not launch.ended:
                await self.end(launch.id, "cancelled", error=_CANCELLED)
            raise
        except Exception as exc:
            if not launch.ended:
                await self.end(launch.id, "failed", error=safe_message(exc))
            raise
        if not launch.ended:
            await self.end(launch.id, "completed")

    async def listing(self, *, state: str | None = None, limit: int | None = None) -> list[dict[str, object]]:
        """The tasks as ``system.tasks()`` shows them, oldest first: those in ``state``, the ``limit`` latest."""
        async with self._lock:
            await self._load()
        found = [view(e) for e in self._entries.values() if state is None or e.get("state") == state]
        return found[-limit:] if limit is not None else found


class ChildRun(Protocol):
    """How a launched run ended, as :func:`run_child` reads it (an engine ``RunResult``)."""

    @property
    def status(self) -> str:
        """``completed``, ``paused`` or ``failed``."""

    @property
    def reason(self) -> str:
        """Why it ended."""

    @property
    def answer(self) -> object:
        """Its answer (the question when paused)."""

    @property
    def error(self) -> Mapping[str, object] | None:
        """``{"code", "message"}`` when failed."""


class Launcher(Protocol):
    """What :func:`run_child` reads of the launching call's context (a ``ToolkitContext``)."""

    @property
    def tasks(self) -> TaskBoard | None:
        """The session's board, or None when the host keeps none."""

    @property
    def session_id(self) -> str:
        """The launching run's session."""

    @property
    def call_id(self) -> str | None:
        """The launching call."""


_PREFIX_CHARS = 118  # a session id is at most 128 characters: room for ".<n>"


async def run_child(
    context: Launcher,
    fallback: TaskBoard,
    invoke: Callable[[str], Awaitable[ChildRun]],
    *,
    kind: str,
    name: str,
    operation: str,
    text: str,
    label: str,
    paused: str,
) -> object:
    """Run a child agent as a task the session launched, in a session of its own; its answer.

    The task is recorded on the context's board (``fallback``, a toolkit's own, when the host keeps none) with
    the id ``{session}.{operation}.{n}``, which is the child's session (``invoke`` gets it). A failed or paused
    child ends its task so and raises ``RuntimeError`` naming it by ``label`` (``paused``: what it did instead).
    """
    board = context.tasks if context.tasks is not None else fallback
    prefix = f"{context.session_id}.{operation}"[:_PREFIX_CHARS]
    async with board.launched(kind=kind, name=name, input=text, prefix=prefix, call_id=context.call_id) as launch:
        result = await invoke(launch.id)
        if result.status == "failed":
            message = (result.error or {}).get("message", result.reason)
            await launch.end("failed", error=str(message))
            raise RuntimeError(f"{label} failed (session {launch.id}): {message}")
        if result.status == "paused":
            question = f"{paused}: {result.answer}"
            await launch.end("paused", error=question)
            raise RuntimeError(f"{label} {question}")
        await launch.end("completed", answer=result.answer)
    return result.answer
