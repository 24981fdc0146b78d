"""The call journal: a round's code and each toolkit call's start and completion, written ahead to the store.

While a round runs, :class:`CallJournal` writes AHEAD to the session's pending list in the store: the
round's code before it runs, each toolkit call's start before the operation runs, and its completion
(result or error) before the result goes back into the sandbox. Entries that arrive while a write is in
flight go together in the next write (group commit: ``Store.add_pending_many``), so gathered calls share
writes. A write that fails fails the call with ``store.unavailable`` (never a silent drop). What an
interrupted round is made of, from this journal, is ``engine.agent.recovery``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from codeact.engine.errors import CodeactError, StoreError
from codeact.sandbox.aio import cancel_and_wait, wait_for
from codeact.sandbox.runtime import protocol as _p
from codeact.toolkits import CallRecord, RecordCaps, cap_calls

if TYPE_CHECKING:
    from codeact.engine.store import Store

__all__ = ["CLEANUP_S", "CallJournal"]

CLEANUP_S = 15.0  # bound of the writes made while a run is being interrupted


class CallJournal:
    """The write-ahead journal of the round in progress, in the store's pending list (see the module docstring).

    One background task makes the writes, in order; every entry queued while a write is in flight goes
    into the next one (one ``add_pending_many``). :meth:`started` and :meth:`completed` return once
    their entry is durable; :meth:`code` and :meth:`clear` only queue theirs (a later awaited entry
    is written after them, so it proves them written too).

    Raises (from the awaited methods):
        StoreError: ``store.unavailable``: the store did not take the write.
    """

    def __init__(self, store: Store, session_id: str, *, caps: RecordCaps | None = None) -> None:
        self._store = store
        self._session_id = session_id
        self._caps = caps if caps is not None else RecordCaps.from_env()
        # (action, entry, future): action "add" | "clear" | "barrier"; the future is None when nobody waits.
        self._items: deque[tuple[str, dict[str, object] | None, asyncio.Future[None] | None]] = deque()
        self._wake = asyncio.Event()
        self._writing = asyncio.Lock()  # held while a write is in flight: one write at a time, in order
        self._task = asyncio.get_running_loop().create_task(self._drain())
        self.writes = 0
        """Store writes made (a measure of the group commit: entries per write)."""

    # -- what a round writes ---------------------------------------------------------------------------
    def code(self, round_index: int, *, code: str, middle: str, reply: str) -> None:
        """The round's program (``code``; the model's part: ``middle``) is about to run."""
        entry = {"round": round_index, "kind": "code", "code": code, "middle": middle, "reply": reply}
        self._put("add", entry, None)

    async def started(
        self,
        round_index: int,
        *,
        call_id: str,
        sequence: int,
        toolkit: str,
        operation: str,
        arguments: dict[str, object],
        started_at: float,
    ) -> None:
        """A call is about to run: returns once its start is durable."""
        if not _small(arguments, self._caps.argument_bytes):
            session = self._session_id
            probe = CallRecord(
                sequence=sequence, session_id=session, toolkit=toolkit, operation=operation, arguments=arguments
            )
            arguments = cap_calls([probe], self._caps)[0].arguments
        entry = {
            "round": round_index,
            "kind": "start",
            "session_id": self._session_id,
            "call_id": call_id,
            "sequence": sequence,
            "toolkit": toolkit,
            "operation": operation,
            "arguments": arguments,
            "started_at": started_at,
        }
        await self._wait(entry)

    async def completed(self, round_index: int, record: CallRecord) -> None:
        """A call ended (result or error): returns once its completion is durable."""
        await self._wait(self._completion(round_index, record))

    def completed_nowait(self, round_index: int, record: CallRecord) -> None:
        """A call ended where nobody can wait (it was cancelled): its completion is queued."""
        self._put("add", self._completion(round_index, record), None)

    def clear(self) -> None:
        """The round was recorded: its entries are no longer needed."""
        self._put("clear", None, None)

    async def flush(self, timeout: float = CLEANUP_S) -> None:
        """Wait (at most ``timeout`` seconds) until every queued write was made or failed."""
        fut = asyncio.get_running_loop().create_future()
        self._put("barrier", None, fut)
        with contextlib.suppress(TimeoutError, CodeactError):
            await wait_for(asyncio.shield(fut), timeout)

    async def aclose(self) -> None:
        """Stop the journal (writes still queued are dropped: the caller flushed what mattered)."""
        # Cancel until it is done: a cancel swallowed inside a store call must not leave it waiting forever.
        await cancel_and_wait(self._task)
        for _, _, fut in self._items:
            if fut is not None and not fut.done():
                fut.set_exception(self._closed_error())
                fut.exception()
        self._items.clear()

    # -- the writer ------------------------------------------------------------------------------------
    def _completion(self, round_index: int, record: CallRecord) -> dict[str, object]:
        caps = self._caps
        outcome = record.result if record.error is None else record.error
        if not (_small(record.arguments, caps.argument_bytes) and _small(outcome, caps.result_bytes)):
            record = cap_calls([record], caps)[0]
        call = {  # CallRecord.to_json() without dataclasses.asdict's deep copy: one per call
            "sequence": record.sequence,
            "session_id": record.session_id,
            "toolkit": record.toolkit,
            "operation": record.operation,
            "arguments": record.arguments,
            "result": record.result,
            "error": record.error,
            "started_at": record.started_at,
            "duration_s": record.duration_s,
        }
        if record.capped is not None:
            call["capped"] = record.capped
        if record.call_id:
            call["call_id"] = record.call_id
        return {"round": round_index, "kind": "call", "call": call}

    def _put(self, action: str, entry: dict[str, object] | None, fut: asyncio.Future[None] | None) -> None:
        if self._task.done():
            if fut is not None:
                fut.set_exception(self._closed_error())
            return
        self._items.append((action, entry, fut))
        self._wake.set()

    async def _wait(self, entry: dict[str, object]) -> None:
        # Through the writer task, even when it is idle: it runs after everything ready in this turn of the
        # event loop (the other calls of one read of the socket), so they share one write (group commit).
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._put("add", entry, fut)
        # A caller cancelled while it waits cancels only its future: the entry is still written.
        await fut

    def _closed_error(self) -> StoreError:
        return StoreError(
            f"the call journal of session {self._session_id!r} is closed: the run is ending", code="store.unavailable"
        )

    async def _drain(self) -> None:
        items = self._items
        while True:
            if not items:
                self._wake.clear()
                await self._wake.wait()
                continue
            async with self._writing:
                if not items:
                    continue
                action, _, _ = items[0]
                if action == "add":
                    batch = []
                    while items and items[0][0] == "add":
                        batch.append(items.popleft())
                else:
                    batch = [items.popleft()]
                failure: BaseException | None = None
                try:
                    if action == "add":
                        self.writes += 1
                        await self._store.add_pending_many(self._session_id, [e for _, e, _ in batch if e is not None])
                    elif action == "clear":
                        self.writes += 1
                        await self._store.clear_pending(self._session_id)
                except CodeactError as exc:
                    failure = exc
                except asyncio.CancelledError:
                    failure = self._closed_error()
                    self._settle(batch, failure)
                    raise
                self._settle(batch, failure)

    @staticmethod
    def _settle(
        batch: Sequence[tuple[str, dict[str, object] | None, asyncio.Future[None] | None]],
        failure: BaseException | None,
    ) -> None:
        for _, _, fut in batch:
            if fut is None or fut.done():
                continue
            if failure is None:
                fut.set_result(None)
            else:
                fut.set_exception(failure)
                fut.exception()  # retrieved: a shielded waiter that was cancelled never reads it


_SCALARS = frozenset({int, float, bool, type(None)})


def _small(value: object, limit: int) -> bool:
    """Whether ``value`` as JSON surely stays within ``limit`` bytes (flat values checked without encoding)."""
    kind = type(value)
    if kind in _SCALARS:
        return True
    if type(value) is str:
        return len(value) * 6 + 2 <= limit  # the worst case: every character escaped as \uXXXX
    if type(value) is dict and len(value) <= 16:
        total = 0
        for key, item in value.items():
            item_kind = type(item)
            if item_kind is str:
                total += len(item) * 6 + len(key) * 6 + 6
            elif item_kind in _SCALARS:
                total += 32 + len(key) * 6
            else:
                break
        else:
            return total <= limit
    try:
        return len(_p.dumps(value).encode("utf-8", "surrogatepass")) <= limit
    except (TypeError, ValueError):
        return False
