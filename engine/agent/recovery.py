"""The run's writes: its rounds (:class:`Recorder`), the call journal, and what an interrupted round did.

:class:`Recorder` writes each round atomically (its record, the segments added since the last one, the
variables) and keeps the journal of the round in progress; everything below is about that journal and
about a round that did not end: Ctrl-C, a cancel, a store outage or a crash.

While a round runs, :class:`CallJournal` writes AHEAD to the session's pending list in the store: the
round's code before it runs, each toolkit call's start before the operation runs, and its completion
(result or error) before the result goes back into the sandbox. Entries that arrive while a write is in
flight go together in the next write (group commit: ``Store.add_pending_many``), so gathered calls share
writes. A write that fails fails the call with ``store.unavailable`` (never a silent drop). An
interrupted round is then recorded as a ``RoundRecord`` with status ``interrupted``, built from the
journal, with an Evaluation segment (``interrupted_round.j2``) that tells the model on resume which calls
completed (with results), which were in flight (started, outcome unknown: check before repeating, by call
id), which did not run (they waited for the user's approval, as a queued run's call does when the run
pauses for it: make them again) and that nothing else had started:

* in-process (``Recorder.record_interrupted``) at Ctrl-C or a cancel, from the journal (the run's
  memory only when the store cannot be read);
* on the next open of the session (:func:`fold_pending`), from the journal, when the run that wrote it
  is gone (the caller holds the session lock, so it is).

Replay treats an interrupted round as recorded: it is not re-executed (``codeact.engine.replay``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codeact import prompts
from codeact.engine.calls import CLEANUP_S, CallJournal
from codeact.engine.errors import CodeactError
from codeact.prompts.jsontypes import JsonObject
from codeact.sandbox.aio import wait_for
from codeact.sandbox.runtime import protocol as _p
from codeact.sandbox.runtime.codec import has_tags, python_repr
from codeact.segments import Segment, SegmentKind, exec_chain
from codeact.toolkits import AWAITING_APPROVAL

if TYPE_CHECKING:
    from codeact.engine.agent._parts import RunDeps, RunState
    from codeact.engine.store import RoundRecord, Store

__all__ = [
    "CLEANUP_S",
    "INTERRUPTED_TAG",
    "CallJournal",
    "JournalGroups",
    "Recorder",
    "fold_pending",
    "from_record_notes",
    "interrupted_evaluation",
    "interrupted_record",
    "journal_groups",
    "mark_opened_interrupted",
]

INTERRUPTED_TAG = "interrupted"
"""Tag of the Evaluation segment that reports an interrupted round."""

_ARGUMENT_CHARS = 200
_OUTCOME_UNKNOWN = {
    "code": _p.INTERNAL_ERROR,
    "name": "outcome_unknown",
    "message": "the call was in flight when the round stopped: it may or may not have run",
}
_WAITED = "it was waiting for the user's approval when the round stopped"
_UNSTARTED = "the round stopped before it started"


@dataclass(frozen=True, kw_only=True)
class JournalGroups:
    """What the journal says about one round.

    Attributes:
        code: The round's code entry (``{"code", "middle", "reply"}``), or None.
        completed: The calls that completed, as stored (``CallRecord.to_json()``), in order of completion.
        in_flight: The calls started whose outcome is unknown (no completion, or cancelled while running),
            as call dicts with ``"in_flight": True`` and an ``outcome_unknown`` error.
        not_performed: The calls the round's end cancelled before they ran (one waiting for the user's
            approval: a queued run pauses so), as stored with ``"not_performed": True``; they may be made again.
    """

    code: Mapping[str, object] | None
    completed: tuple[dict[str, object], ...]
    in_flight: tuple[dict[str, object], ...]
    not_performed: tuple[dict[str, object], ...] = ()

    @property
    def calls(self) -> tuple[dict[str, Any], ...]:
        """Every call of the round for its record: the completed ones, those in flight, those not performed."""
        return (*self.completed, *self.in_flight, *self.not_performed)

    @property
    def empty(self) -> bool:
        """True when the round had not even got its code recorded."""
        return self.code is None and not self.calls


def _cancelled(call: Mapping[str, object]) -> bool:
    error = call.get("error")
    return isinstance(error, Mapping) and error.get("code") == _p.CANCELLED


def _waited(call: Mapping[str, object]) -> bool:
    """Cancelled while it waited for an approval (``Call.cancelled(awaiting_approval=True)``): it did not run."""
    error = call.get("error")
    return isinstance(error, Mapping) and error.get("data") == AWAITING_APPROVAL


def journal_groups(entries: Sequence[Mapping[str, object]], round_index: int) -> JournalGroups:
    """Group the journal's entries of round ``round_index``: its code, the calls completed and those in flight.

    A call that started and never completed, or that was cancelled while it ran (the round was stopped
    under it), is in flight: it may have taken effect. A call cancelled while it waited for an approval
    (at its grant's stage, before its start is journaled, or at its operation's, after it) did not run,
    nor did a cancelled one whose start was never journaled: not performed.
    """
    current = [e for e in entries if e.get("round") == round_index]
    code = next((e for e in current if e.get("kind") == "code"), None)
    starts = {str(e.get("call_id")): e for e in current if e.get("kind") == "start"}
    completed: list[dict[str, object]] = []
    in_flight: list[dict[str, Any]] = []
    not_performed: list[dict[str, object]] = []
    done: set[str] = set()
    for e in current:
        call = e.get("call")
        if e.get("kind") != "call" or not isinstance(call, Mapping):
            continue
        call_id = str(call.get("call_id") or "")
        done.add(call_id)
        if _cancelled(call) and (_waited(call) or call_id not in starts):
            not_performed.append({**dict(call), "not_performed": True})
        elif _cancelled(call):
            in_flight.append({**dict(call), "error": dict(_OUTCOME_UNKNOWN), "in_flight": True})
        else:
            completed.append(dict(call))
    for call_id, start in starts.items():
        if call_id in done:
            continue
        in_flight.append(
            {
                "call_id": call_id,
                "session_id": str(start.get("session_id") or ""),
                "sequence": start.get("sequence", 0),
                "toolkit": start.get("toolkit", ""),
                "operation": start.get("operation", ""),
                "arguments": start.get("arguments") or {},
                "result": None,
                "error": dict(_OUTCOME_UNKNOWN),
                "started_at": start.get("started_at", 0.0),
                "duration_s": 0.0,
                "in_flight": True,
            }
        )
    in_flight.sort(key=lambda c: int(c.get("sequence") or 0))
    return JournalGroups(
        code=code, completed=tuple(completed), in_flight=tuple(in_flight), not_performed=tuple(not_performed)
    )


def _outcome(call: Mapping[str, Any]) -> str:
    error = call.get("error")
    if isinstance(error, Mapping):
        return f"error: {error.get('message', error)}"
    if error is not None:
        return f"error: {error}"
    return _cut(_shown(call.get("result")))


def _shown(value: object) -> str:
    """Codec data for the model: JSON, or Python's repr for a value JSON cannot hold (never the codec's tag)."""
    return python_repr(value) if has_tags(value) else json.dumps(value, ensure_ascii=False, default=str)


def _cut(text: str) -> str:
    return text if len(text) <= _ARGUMENT_CHARS else text[: _ARGUMENT_CHARS - 3] + "..."


def _call_shown(call: Mapping[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments") if isinstance(call.get("arguments"), Mapping) else {}
    args = ", ".join(f"{name}={_cut(_shown(value))}" for name, value in (arguments or {}).items())
    return {
        "toolkit": call.get("toolkit", "?"),
        "operation": call.get("operation", "?"),
        "arguments": args,
        "outcome": _outcome(call),
        "call_id": str(call.get("call_id") or "?"),
    }


def interrupted_evaluation(
    round_index: int,
    calls: Sequence[Mapping[str, object]],
    *,
    reason: str,
    in_flight: Sequence[Mapping[str, object]] = (),
    not_performed: Sequence[Mapping[str, object]] = (),
) -> str:
    """The text the model reads about an interrupted round (``prompts/interrupted_round.j2``).

    Args:
        round_index: The round.
        calls: The calls that completed (with their results or errors).
        reason: Why the round stopped.
        in_flight: The calls that had started and whose outcome is unknown.
        not_performed: The calls cancelled before they ran (:attr:`JournalGroups.not_performed`).
    """
    return prompts.render(
        "interrupted_round.j2",
        round=round_index,
        reason=reason,
        calls=[_call_shown(c) for c in calls],
        in_flight=[_call_shown(c) for c in in_flight],
        not_performed=[{**_call_shown(c), "why": _WAITED if _waited(c) else _UNSTARTED} for c in not_performed],
    )


def from_record_notes(answered: Sequence[Mapping[str, object]]) -> list[str]:
    """Evaluation notes naming the calls answered from an interrupted round's record (``prompts/from_record.j2``).

    Args:
        answered: The records that answered calls of the resuming round, each with its ``round``.
    """
    rounds: dict[object, list[Mapping[str, Any]]] = {}
    for call in answered:
        rounds.setdefault(call.get("round"), []).append(call)
    return [
        prompts.render("from_record.j2", round=index, calls=[_call_shown(c) for c in calls]).strip()
        for index, calls in rounds.items()
    ]


def interrupted_record(
    *,
    session_id: str,
    index: int,
    started: float,
    code: str | None,
    reply: str,
    calls: Sequence[JsonObject],
    variables: JsonObject,
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


class Recorder:
    """Writes the run's rounds to the store (``run.recorder``), and the call journal of the round in progress.

    It keeps the segments added since the last record (a round's record carries them), the lock's fencing
    token and the journal (``recovery.CallJournal``) once the run holds the session.
    """

    def __init__(self, state: RunState, deps: Callable[[], RunDeps]) -> None:
        self._state = state
        self._deps = deps  # the run's deps as they are now (the run binds its bridge in once it opened it)
        self.pending_segments: list[Segment] = []
        self.fence: str | None = None
        self.writer: CallJournal | None = None

    def note_code(self, *, program: str, middle: str, reply: str) -> None:
        """The round's code is about to run: remember it and write it to the pending list."""
        state = self._state
        state.current_code, state.current_reply = program, reply
        if self.writer is not None:
            self.writer.code(state.round, code=program, middle=middle, reply=reply)

    async def record_round(self, *, started: float, t0: float, reply: str, **fields: Any) -> None:
        """Write the current round atomically: its record, the segments added since the last one, the variables.

        Args:
            started: Wall-clock start of the round (``time.time()``).
            t0: ``time.perf_counter()`` at the start (for the duration).
            reply: The raw model reply.
            **fields: The other ``RoundRecord`` fields the loop knows (code, stdout, error, ...).
        """
        from codeact.engine.store import RoundRecord

        deps, state = self._deps(), self._state
        segments = [s.model_dump(mode="json") for s in self.pending_segments]
        self.pending_segments.clear()
        fields.setdefault("prompt_hash", "")
        if state.pending_edits:
            fields.setdefault("edits", state.pending_edits)
            state.pending_edits = {}
        if state.tools_in_force:  # replay gives the round's code the same toolkits (engine/replay.py)
            fields["edits"] = {**fields.get("edits", {}), "tools": dict(state.tools_in_force)}
        if deps.input_files and state.round == state.first_round:  # the run's input files, kept for replay
            from codeact.engine.agent._files import input_artifacts

            fields["artifacts"] = (*input_artifacts(deps.input_files), *fields.get("artifacts", ()))
        record = RoundRecord(
            session_id=deps.session_id,
            index=state.round,
            started_at=started,
            duration_s=time.perf_counter() - t0,
            reply=reply,
            calls=self.drain_calls(),
            variables=state.variables,
            **fields,
        )
        await deps.store.append_round(record, segments=segments, variables=state.variables, fence=self.fence)
        state.recorded = state.round
        state.current_code, state.current_reply = None, ""
        if self.writer is not None:
            self.writer.clear()

    async def record_interrupted(self, *, reason: str) -> None:
        """Record the run's round in progress as ``interrupted`` and mark the session so (bounded).

        Called by the agent when the run is cancelled (Ctrl-C, a cancel). The round is written only when
        it got as far as running code or calling a toolkit; the session is marked ``interrupted`` either way.
        """
        deps, state = self._deps(), self._state

        async def write() -> None:
            groups = await self._journal_groups()
            calls = list(groups.calls)
            if state.round > state.recorded and (state.current_code is not None or calls):
                text = interrupted_evaluation(
                    state.round,
                    groups.completed,
                    reason=reason,
                    in_flight=groups.in_flight,
                    not_performed=groups.not_performed,
                )
                evaluation = state.history.add(
                    SegmentKind.EVALUATION,
                    text,
                    round_index=state.round,
                    tags=("error", INTERRUPTED_TAG),
                    **exec_chain(deps.session_id, state.round, state.recorded),
                )
                segments = [s.model_dump(mode="json") for s in (*self.pending_segments, evaluation)]
                self.pending_segments.clear()
                record = interrupted_record(
                    session_id=deps.session_id,
                    index=state.round,
                    started=state.round_started or time.time(),
                    code=state.current_code,
                    reply=state.current_reply,
                    calls=calls,
                    variables=state.variables,
                    reason=reason,
                )
                try:
                    await deps.store.append_round(
                        record, segments=segments, variables=state.variables, fence=self.fence
                    )
                    state.recorded = state.round
                except CodeactError:
                    pass  # e.g. the round's own write landed as the cancel came (conflict): keep that record
            if self.writer is not None:
                await self.writer.aclose()
                self.writer = None
            await deps.store.clear_pending(deps.session_id)
            await deps.store.update_session(deps.session_id, status="interrupted")

        with contextlib.suppress(CodeactError, TimeoutError):
            await wait_for(write(), CLEANUP_S)

    async def _journal_groups(self) -> JournalGroups:
        """The round in progress's calls from the journal (flushed first); from memory when the store cannot be read."""
        remembered: list[dict[str, object]] = [dict(c) for c in self.drain_calls()]
        if self.writer is not None:
            await self.writer.flush()
            with contextlib.suppress(CodeactError):
                return journal_groups(await self._deps().store.pending(self._deps().session_id), self._state.round)
        waited = tuple({**c, "not_performed": True} for c in remembered if _waited(c))
        return JournalGroups(
            code=None, completed=tuple(c for c in remembered if not _waited(c)), in_flight=(), not_performed=waited
        )

    def drain_calls(self) -> tuple[JsonObject, ...]:
        """The round's toolkit calls as stored (``CallRecord.to_json()``), from the run's bridge log (engine.calls)."""
        handler = self._deps().handler
        if handler is None:
            return ()
        return tuple(c.to_json() for c in handler.drain_calls())


async def mark_opened_interrupted(store: Store, session_id: str) -> None:
    """A run cancelled while opening the session (the caller holds the lock): mark it ``interrupted``."""

    async def write() -> None:
        meta = await store.get_session(session_id)
        if meta is not None and meta.status == "active":
            await store.update_session(session_id, status="interrupted")

    with contextlib.suppress(CodeactError, TimeoutError):
        await wait_for(write(), CLEANUP_S)


async def fold_pending(store: Store, session_id: str, *, fence: str, reason: str) -> RoundRecord | None:
    """Turn the journal a dead run left into an ``interrupted`` round record (caller holds the lock).

    Entries of rounds already recorded are dropped (the run died after recording its round). Returns
    the record written, or None when there was nothing to fold.
    """
    meta = await store.get_session(session_id)
    if meta is None:
        return None
    entries = await store.pending(session_id)
    index = meta.rounds + 1
    groups = journal_groups(entries, index)
    if groups.empty:
        if entries:
            await store.clear_pending(session_id)
        return None
    code_entry = groups.code
    code = code_entry.get("code") if code_entry is not None else None
    middle = code_entry.get("middle", code) if code_entry is not None else None
    reply = code_entry.get("reply") if code_entry is not None else ""
    variables = await store.variables(session_id)
    segments: list[dict[str, object]] = []
    chain = exec_chain(session_id, index, meta.rounds)  # the dead run's round in progress
    if isinstance(middle, str):
        code_segment = Segment(kind=SegmentKind.CODE, content=middle, round_index=index, **chain)
        segments.append(code_segment.model_dump(mode="json"))
    text = interrupted_evaluation(
        index, groups.completed, reason=reason, in_flight=groups.in_flight, not_performed=groups.not_performed
    )
    evaluation = Segment(
        kind=SegmentKind.EVALUATION, content=text, round_index=index, tags=("error", INTERRUPTED_TAG), **chain
    )
    segments.append(evaluation.model_dump(mode="json"))
    calls = groups.calls
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
