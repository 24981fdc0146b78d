"""Interrupted rounds: what a round did before Ctrl-C, a cancel, a store outage or a host crash stopped it.

While a round runs, :class:`PendingWriter` writes its code and each toolkit call AS IT COMPLETES to
the session's pending list in the store (in the background, in order), so a host that dies mid-round
leaves them behind. An interrupted round is then recorded as a ``RoundRecord`` with status
``interrupted``, holding the calls that completed and an Evaluation segment (``interrupted_round.j2``)
that tells the model on resume what ran:

* in-process (``RunContext.record_interrupted``) at Ctrl-C or a cancel, from the run's memory;
* on the next open of the session (:func:`fold_pending`), from the pending list, when the run that
  wrote it is gone (the caller holds the session lock, so it is).

Replay treats an interrupted round as recorded: it is not re-executed (``codeact.engine.replay``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.errors import CodeactError
from codeact.sandbox.aio import cancel_and_wait, wait_for
from codeact.sandbox.runtime.codec import has_tags, python_repr
from codeact.segments import Segment, SegmentKind, exec_chain

if TYPE_CHECKING:
    from codeact.engine.store import RoundRecord, Store
    from codeact.toolkits import CallRecord

__all__ = [
    "CLEANUP_S",
    "INTERRUPTED_TAG",
    "PendingWriter",
    "fold_pending",
    "interrupted_evaluation",
    "interrupted_record",
    "mark_opened_interrupted",
]

INTERRUPTED_TAG = "interrupted"
"""Tag of the Evaluation segment that reports an interrupted round."""

CLEANUP_S = 15.0  # bound of the writes made while a run is being interrupted
_ARGUMENT_CHARS = 200


class PendingWriter:
    """Writes the round in progress's code and completed calls to the store's pending list, in order.

    Writes run in one background task so a toolkit call never waits for the store; a write that fails
    (the store is down) is dropped: the round's own write then fails loudly, and the calls are still
    in the run's memory for an in-process interrupted record.
    """

    def __init__(self, store: Store, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self._queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._drain())

    def code(self, round_index: int, *, code: str, middle: str, reply: str) -> None:
        """The round's program (``code``; the model's part: ``middle``) is about to run."""
        entry = {"round": round_index, "kind": "code", "code": code, "middle": middle, "reply": reply}
        self._queue.put_nowait(("add", entry))

    def call(self, round_index: int, record: CallRecord) -> None:
        """One toolkit call of the round completed (with a result or an error)."""
        self._queue.put_nowait(("add", {"round": round_index, "kind": "call", "call": record.to_json()}))

    def clear(self) -> None:
        """The round was recorded: its pending entries are no longer needed."""
        self._queue.put_nowait(("clear", {}))

    async def flush(self, timeout: float = CLEANUP_S) -> None:
        """Wait (at most ``timeout`` seconds) until every queued write was made or dropped."""
        with contextlib.suppress(TimeoutError):
            await wait_for(self._queue.join(), timeout)

    async def aclose(self) -> None:
        """Stop the writer (queued writes not yet made are dropped)."""
        # Cancel until it is done: a cancel swallowed inside a store call must not leave the writer
        # waiting on its queue forever.
        await cancel_and_wait(self._task)

    async def _drain(self) -> None:
        while True:
            item = await self._queue.get()
            try:
                if item is None:
                    return
                action, entry = item
                with contextlib.suppress(CodeactError):
                    if action == "add":
                        await self._store.add_pending(self._session_id, entry)
                    else:
                        await self._store.clear_pending(self._session_id)
            finally:
                self._queue.task_done()


def _outcome(call: Mapping[str, Any]) -> str:
    error = call.get("error")
    if isinstance(error, Mapping):
        return f"error: {error.get('message', error)}"
    if error is not None:
        return f"error: {error}"
    return _cut(_shown(call.get("result")))


def _shown(value: Any) -> str:
    """Codec data for the model: JSON, or Python's repr for a value JSON cannot hold (never the codec's tag)."""
    return python_repr(value) if has_tags(value) else json.dumps(value, ensure_ascii=False, default=str)


def _cut(text: str) -> str:
    return text if len(text) <= _ARGUMENT_CHARS else text[: _ARGUMENT_CHARS - 3] + "..."


def interrupted_evaluation(round_index: int, calls: Sequence[Mapping[str, Any]], *, reason: str) -> str:
    """The text the model reads about an interrupted round (``prompts/interrupted_round.j2``)."""
    shown = []
    for call in calls:
        arguments = call.get("arguments") if isinstance(call.get("arguments"), Mapping) else {}
        args = ", ".join(f"{name}={_cut(_shown(value))}" for name, value in (arguments or {}).items())
        shown.append(
            {
                "toolkit": call.get("toolkit", "?"),
                "operation": call.get("operation", "?"),
                "arguments": args,
                "outcome": _outcome(call),
            }
        )
    return prompts.render("interrupted_round.j2", round=round_index, reason=reason, calls=shown)


def interrupted_record(
    *,
    session_id: str,
    index: int,
    started: float,
    code: str | None,
    reply: str,
    calls: Sequence[Mapping[str, Any]],
    variables: Mapping[str, Any],
    reason: str,
) -> RoundRecord:
    """The ``interrupted`` record of a round that was cut short (in-process or folded from pending writes)."""
    from codeact.engine.store import RoundRecord

    return RoundRecord(
        session_id=session_id,
        index=index,
        started_at=started,
        duration_s=max(0.0, time.time() - started),
        prompt_hash="",
        reply=reply,
        code=code,
        calls=tuple(dict(c) for c in calls),
        status="interrupted",
        error={"type": "Interrupted", "message": f"the round was interrupted ({reason})", "line": None},
        variables=dict(variables),
    )


async def mark_opened_interrupted(store: Store, session_id: str) -> None:
    """A run cancelled while opening the session (the caller holds the lock): mark it ``interrupted``."""

    async def write() -> None:
        meta = await store.get_session(session_id)
        if meta is not None and meta.status == "active":
            await store.update_session(session_id, status="interrupted")

    with contextlib.suppress(CodeactError, TimeoutError):
        await wait_for(write(), CLEANUP_S)


async def fold_pending(store: Store, session_id: str, *, fence: str, reason: str) -> RoundRecord | None:
    """Turn the pending entries a dead run left into an ``interrupted`` round record (caller holds the lock).

    Entries of rounds already recorded are dropped (the run died after recording its round). Returns
    the record written, or None when there was nothing to fold.
    """
    meta = await store.get_session(session_id)
    if meta is None:
        return None
    entries = await store.pending(session_id)
    index = meta.rounds + 1
    current = [e for e in entries if e.get("round") == index]
    if not current:
        if entries:
            await store.clear_pending(session_id)
        return None
    code_entry = next((e for e in current if e.get("kind") == "code"), None)
    calls = [e["call"] for e in current if e.get("kind") == "call" and isinstance(e.get("call"), Mapping)]
    code = code_entry.get("code") if code_entry is not None else None
    middle = code_entry.get("middle", code) if code_entry is not None else None
    reply = code_entry.get("reply") if code_entry is not None else ""
    variables = await store.variables(session_id)
    segments: list[dict[str, Any]] = []
    chain = exec_chain(session_id, index, meta.rounds)  # the dead run's round in progress
    if isinstance(middle, str):
        code_segment = Segment(kind=SegmentKind.CODE, content=middle, round_index=index, **chain)
        segments.append(code_segment.model_dump(mode="json"))
    text = interrupted_evaluation(index, calls, reason=reason)
    evaluation = Segment(
        kind=SegmentKind.EVALUATION, content=text, round_index=index, tags=("error", INTERRUPTED_TAG), **chain
    )
    segments.append(evaluation.model_dump(mode="json"))
    started = min((float(c.get("started_at") or 0) for c in calls), default=0.0) or meta.updated_at
    record = interrupted_record(
        session_id=session_id,
        index=index,
        started=started,
        code=code if isinstance(code, str) else None,
        reply=reply if isinstance(reply, str) else "",
        calls=calls,
        variables=variables,
        reason=reason,
    )
    await store.append_round(record, segments=segments, variables=variables, fence=fence)
    await store.clear_pending(session_id)
    return record
