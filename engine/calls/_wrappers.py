"""The engine's wrappers of a toolkit call (``toolkits.CallWrapper``): ids, events, span, journal, interceptors.

Each is one small stage; :func:`codeact.engine.calls.call_bridge` composes them once, in this order
(outermost first), around the bridge's core::

    CallIds -> CallEvents -> CallSpan -> CallLog -> JournalStages.behind -> FromRecord -> ApprovalGate
        -> JournalStages.ahead -> Interceptors -> (the bridge's budgets and core)

so ``tool.call.started`` precedes the span, the span covers the approval, the journal and the operation,
a call refused by its grant is recorded (never journaled as started), the journal's start is durable
before an interceptor or the operation runs, and a call answered from an interrupted round's record
(:class:`FromRecord`, only in a run that resumes one) is recorded and journaled but never asked about again
nor run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from codeact.engine.errors import CodeactError
from codeact.engine.events import ToolCallCompleted, ToolCallStarted
from codeact.engine.interceptors import chain, interceptor_name
from codeact.engine.telemetry import NULL_TRACE, RunTrace
from codeact.sandbox.runtime import protocol as _p
from codeact.toolkits import Call, CallNext, CallOutcome, CallRecord
from codeact.toolkits.context import CALL_ID

from ._approval import Emit

__all__ = [
    "CallEvents",
    "CallIds",
    "JournalStages",
    "CallJournalSink",
    "CallSpan",
    "FromRecord",
    "Interceptors",
    "ToolCall",
    "ToolInterceptor",
]


class CallIds:
    """Numbers each call in its round: its stable id ``"{session}:{round}:{sequence in the round}"``.

    Args:
        session_id: The session.
        round_ref: The round the call arrives in (events and the journal name it).
        resumes: ``(interrupted round, this run's first round)`` when the run resumes an interrupted round:
            the first round's calls keep the interrupted round's ids (its journal names them).
    """

    def __init__(
        self, session_id: str, *, round_ref: Callable[[], int], resumes: tuple[int, int] | None = None
    ) -> None:
        self._session_id = session_id
        self._round = round_ref
        self._resumes = resumes
        self._seq_round = -1  # the round the per-round sequence counts in
        self._round_seq = 0

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Give the call its id and round."""
        rnd = self._round()
        if rnd != self._seq_round:
            self._seq_round, self._round_seq = rnd, 0
        in_round = self._round_seq
        self._round_seq += 1
        resumes = self._resumes
        named = resumes[0] if resumes is not None and rnd == resumes[1] else rnd
        call_id = f"{self._session_id}:{named}:{in_round}"
        return await call_next(dataclasses.replace(call, call_id=call_id, round=rnd, round_sequence=in_round))


class CallEvents:
    """``tool.call.started`` before the call, ``tool.call.completed`` with what the code got after it."""

    def __init__(self, emit: Emit) -> None:
        self._emit = emit

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Report the call."""
        self._emit(
            ToolCallStarted,
            call_id=call.call_id,
            toolkit=call.toolkit,
            operation=call.operation,
            arguments=call.arguments,
            round=call.round,
        )
        outcome = await call_next(call)
        failure = outcome.failure
        self._emit(
            ToolCallCompleted,
            call_id=call.call_id,
            toolkit=call.toolkit,
            operation=call.operation,
            result=None if failure is not None else outcome.result,
            error=failure,
            duration_s=outcome.duration_s,
            round=call.round,
            from_record=outcome.from_record,
        )
        return outcome


class CallSpan:
    """The call's span (``engine.telemetry``), current while the host side runs; ``ToolkitContext.call_id`` set.

    A toolkit's HTTP client continues the trace from it.
    """

    def __init__(self, trace: Callable[[], RunTrace] | None, *, interceptors: Sequence[str] = ()) -> None:
        self._trace = trace
        self._interceptors = tuple(interceptors)

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Run the rest of the call inside its span."""
        trace = self._trace() if self._trace is not None else NULL_TRACE
        token = CALL_ID.set(call.call_id)
        try:
            with trace.tool_call(call.toolkit, call.operation, call.arguments, interceptors=self._interceptors) as span:
                outcome = await call_next(call)
                if span is not None:
                    error = outcome.error
                    if error is not None and isinstance(error.data, dict) and "interceptor" in error.data:
                        span.interceptor_failed(str(error.data["interceptor"]))
                    failure = outcome.failure
                    span.finish(None if failure is not None else outcome.result, failure)
        finally:
            CALL_ID.reset(token)
        return outcome


@runtime_checkable
class CallJournalSink(Protocol):
    """Where each call's start and completion are written ahead (:class:`~codeact.engine.calls.CallJournal`)."""

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
        """The call is about to run; returns once that is durable."""
        ...

    async def completed(self, round_index: int, record: CallRecord) -> None:
        """The call ended; returns once that is durable."""
        ...

    def completed_nowait(self, round_index: int, record: CallRecord) -> None:
        """The call was cancelled: its end is queued."""
        ...


def _unrecorded(what: str, exc: CodeactError) -> _p.RpcError:
    return _p.RpcError(
        _p.INTERNAL_ERROR,
        f"store.unavailable: {what} could not be recorded in the session store ({exc.message}); the round cannot "
        "go on safely: end it, and continue the session once the store is back",
        {"code": "store.unavailable"},
    )


class JournalStages:
    """The call journal's two stages around a call: :meth:`ahead` and :meth:`behind`.

    The start is durable before the call runs, its completion before the result goes back into the
    sandbox. A journal write that fails fails the call with ``store.unavailable``.

    Args:
        journal: The run's journal now (None: nothing is written).
        record: Builds a call's record from its outcome (``ToolkitBridge.record_of``).
    """

    def __init__(
        self,
        journal: Callable[[], CallJournalSink | None],
        *,
        record: Callable[[Call, CallOutcome], CallRecord],
    ) -> None:
        self._journal = journal
        self._record = record

    async def ahead(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Write the call's start (write-ahead), then run it."""
        journal = self._journal()
        if journal is None:
            return await call_next(call)
        try:
            await journal.started(
                call.round or 0,
                call_id=call.call_id,
                sequence=call.round_sequence,
                toolkit=call.toolkit,
                operation=call.operation,
                arguments=call.arguments,
                started_at=call.started_at,
            )
        except CodeactError as exc:
            what = f"the start of {call.toolkit}.{call.operation} (call {call.call_id}; it did not run)"
            return dataclasses.replace(call.failed(_unrecorded(what, exc)), unstarted=True)
        return await call_next(call)

    async def behind(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Run the call, then write its completion (queued when it was cancelled)."""
        outcome = await call_next(call)
        journal = self._journal()
        if journal is None or outcome.unstarted:
            return outcome
        rnd = call.round or 0
        if outcome.cancelled:
            journal.completed_nowait(rnd, self._record(call, outcome))
            return outcome
        try:  # durable before the result goes back into the sandbox
            await journal.completed(rnd, self._record(call, outcome))
        except CodeactError as exc:
            what = f"the outcome of {call.toolkit}.{call.operation} (call {call.call_id}; it ran)"
            return dataclasses.replace(outcome, result=None, error=_unrecorded(what, exc))
        except asyncio.CancelledError:
            return dataclasses.replace(outcome, cancelled=True)
        return outcome


class FromRecord:
    """Answers a call that an interrupted round already completed from that round's record: it is not done again.

    A run that resumes an interrupted round (its host died; a queued run paused for an approval and is
    continued) asks the model again, and the model may well write the round's program again. The calls the
    interrupted round completed with a result took effect; in the resuming round (the run's first), a call
    with the same toolkit, operation and arguments as one of them gets that call's recorded result without
    running (and without an approval: it was approved when it ran), as a direct run whose round waited in
    place would have had it once. Each recorded call answers once, in the order they completed (a loop
    that made the same call three times is answered three times, a fourth time runs). Anything else runs:
    a different call, a call that failed (nothing is known to have taken effect, and a retry is what the
    model asks for), a call in flight when the round stopped (outcome unknown: its call id is its
    idempotency key), a record the journal capped (its arguments or result are not kept whole), and every
    call of a later round.

    Args:
        completed: The interrupted round's calls as recorded (``CallRecord.to_json()``); only those with a
            result and kept whole answer.
        round_index: The resuming round (the run's first): only its calls are answered.
        answered: Told each call answered this way, with the record that answered it (the model is told).
    """

    def __init__(
        self,
        completed: Sequence[Mapping[str, object]],
        *,
        round_index: int,
        answered: Callable[[Mapping[str, object]], None] | None = None,
    ) -> None:
        self._round = round_index
        self._answered = answered
        self._records: dict[str, deque[Mapping[str, object]]] = {}
        for record in completed:
            if _answers(record):
                key = _call_key(record.get("toolkit"), record.get("operation"), record.get("arguments"))
                self._records.setdefault(key, deque()).append(record)

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """The recorded result of the same call, or the call itself."""
        if call.round == self._round and self._records:
            records = self._records.get(_call_key(call.toolkit, call.operation, call.arguments))
            if records:
                record = records.popleft()
                if self._answered is not None:
                    self._answered(record)
                answered = call.done(record.get("result"))
                return dataclasses.replace(answered, from_record=str(record.get("call_id") or "?"))
        return await call_next(call)


def _answers(record: Mapping[str, object]) -> bool:
    """A recorded call that completed with a result kept whole (not a control signal such as ``finish``)."""
    if record.get("error") is not None or record.get("in_flight") or record.get("capped") is not None:
        return False
    result = record.get("result")
    return not (isinstance(result, dict) and "$control" in result)


def _call_key(toolkit: object, operation: object, arguments: object) -> str:
    """The same call: toolkit, operation and (codec-encoded) arguments, whatever their keys' order."""
    return json.dumps([toolkit, operation, arguments], sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True, kw_only=True)
class ToolCall:
    """A toolkit call as interceptors see it: codec-encoded arguments."""

    toolkit: str
    operation: str
    arguments: dict[str, object]


ToolNext = Callable[[ToolCall], Awaitable[object]]


@runtime_checkable
class ToolInterceptor(Protocol):
    """Wraps toolkit calls from sandbox code; raise to refuse, or return a result without calling.

    An optional ``name`` attribute labels it in trace spans and errors (default: the class name).
    """

    async def intercept_tool(self, request: ToolCall, call_next: ToolNext) -> object:
        """Handle one tool call."""
        ...


class Interceptors:
    """The host's tool interceptors (``ToolInterceptor``), the first one outermost, around the rest of the call.

    What one raises itself (not what came out of its ``call_next``: the guard of ``engine/interceptors.py``,
    the one model interceptors go through too) is the call's error, with its name in the error's ``data``
    (``"interceptor"``); any other exception becomes ``tool_error`` with its message.
    """

    def __init__(self, interceptors: Sequence[object]) -> None:
        self._interceptors = tuple(i for i in interceptors if isinstance(i, ToolInterceptor))

    @property
    def names(self) -> tuple[str, ...]:
        """The interceptors' names, outermost first (for the call's span)."""
        return tuple(interceptor_name(i) for i in self._interceptors)

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Run the interceptors; the innermost one's ``call_next`` goes on with the (changed) request."""

        async def final(request: ToolCall) -> object:
            arguments = request.arguments
            passed = dataclasses.replace(
                call,
                toolkit=request.toolkit,
                operation=request.operation,
                arguments=arguments if isinstance(arguments, dict) else {},
                raw=(request.toolkit, request.operation, arguments),  # as the bridge is handed it
            )
            return (await call_next(passed)).unwrap()

        if not self._interceptors:
            return await call_next(dataclasses.replace(call, raw=(call.toolkit, call.operation, call.arguments)))
        handler = chain(self._interceptors, "intercept_tool", final, on_error=_refused_by)
        try:
            result = await handler(ToolCall(toolkit=call.toolkit, operation=call.operation, arguments=call.arguments))
        except _p.RpcError as exc:
            return call.failed(exc)
        except asyncio.CancelledError:
            return call.cancelled()
        except Exception as exc:  # an interceptor failed: the code sees its message
            return call.failed(_p.RpcError(_p.TOOL_ERROR, _message(exc), {"type": type(exc).__name__}))
        return call.done(result)


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def _refused_by(name: str, exc: Exception) -> _p.RpcError:
    """A tool interceptor's own exception as the call's error: its message for the code, its name in ``data``."""
    if isinstance(exc, _p.RpcError):
        data = dict(exc.data) if isinstance(exc.data, dict) else ({} if exc.data is None else {"data": exc.data})
        return _p.RpcError(exc.code, exc.message, {**data, "interceptor": name})
    return _p.RpcError(_p.TOOL_ERROR, _message(exc), {"type": type(exc).__name__, "interceptor": name})
