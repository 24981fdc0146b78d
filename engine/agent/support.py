"""Pieces the agent loop wires together: variable views, the event-emitting bridge, model access."""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from codeact.engine.agent.hooks import ModelCall, ToolCall, chain, hook_name
from codeact.engine.errors import CodeactError
from codeact.engine.events import ActionRequested, Event, ToolCallCompleted, ToolCallStarted
from codeact.engine.telemetry._state import NULL_TRACE, RunTrace
from codeact.sandbox.runtime import protocol as _p
from codeact.sandbox.runtime.codec import python_repr
from codeact.toolkits import ApprovalDecision, ApprovalRequest, CallRecord, ToolkitBridge, cap_calls
from codeact.toolkits.context import CALL_ID

__all__ = ["CallJournalSink", "EventingBridge", "ModelAccessAdapter", "describe_variables", "grant_policy"]

Emit = Callable[..., Event]
Approver = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]

GRANT_APPROVED: contextvars.ContextVar[bool] = contextvars.ContextVar("codeact_grant_approved", default=False)
"""Set while a call the approver already allowed (for its grant) runs, so it is asked once."""

APPROVAL_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("codeact_approval_id", default=None)
"""While the approver is asked: the ``request_id`` of the ``action.requested`` event it answers."""

_RUN = frozenset({"always", "safe", "auto"})
_DENY = frozenset({"deny", "never"})


def grant_policy(approval: str | None) -> str:
    """Map a blueprint approval word to ``run``, ``ask`` or ``deny`` (unknown words ask: the safe side)."""
    if approval is None or approval in _RUN:
        return "run"
    if approval in _DENY:
        return "deny"
    return "ask"


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        tag = value.get("$type")
        if isinstance(tag, str):
            cls = value.get("class")
            if tag == "source":
                return str(value.get("kind", "function"))
            return str(cls) if isinstance(cls, str) else tag
        return "dict"
    if isinstance(value, list):
        return "list"
    if value is None:
        return "NoneType"
    return type(value).__name__


def describe_variables(variables: Mapping[str, Any], *, limit: int = 80) -> dict[str, tuple[str, str]]:
    """``name -> (type, short repr)`` of codec-encoded variables, for the FIM frame header.

    Nothing is decoded into live objects: the repr is the text Python's ``repr`` shows for the value
    (``codec.python_repr``: ``('A', 4)``, ``datetime.date(2026, 1, 2)``, ``{'ok': True}``), as the header
    is Python the model reads and copies from (JSON's ``true`` and ``null`` are not Python); functions
    and classes show their first source line.
    """
    out: dict[str, tuple[str, str]] = {}
    for name, value in variables.items():
        type_name = _type_name(value)
        if isinstance(value, dict) and value.get("$type") == "source":
            text = str(value.get("v", "")).strip().splitlines()[0] if value.get("v") else ""
        else:
            text = python_repr(value, limit=limit + 1)
        if len(text) > limit:
            text = text[: limit - 3] + "..."
        out[name] = (type_name, text)
    return out


class CallJournalSink(Protocol):
    """Where the eventing bridge writes each call's start and completion ahead (``recovery.CallJournal``)."""

    async def started(
        self,
        round_index: int,
        *,
        call_id: str,
        sequence: int,
        toolkit: str,
        operation: str,
        arguments: dict[str, Any],
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


class EventingBridge:
    """Wraps a :class:`~toolkits.ToolkitBridge`: emits tool events, applies grant approvals and interceptors.

    It implements ``codeact.sandbox.channel.RpcHandler`` like the bridge it wraps; the sandbox serves it. It keeps
    the call log of the round (:meth:`drain_calls`): every call with exactly the result or error the code
    got, including calls refused here (approval policy, interceptors) that never reached the bridge, so
    replay answers them the same way. Build the wrapped bridge with ``record=False``.

    Each call gets its stable id (``"{session}:{round}:{sequence in the round}"``; ``id_round`` gives the
    round the id names) in its events, its record and ``ToolkitContext.call_id``. With a ``journal``, the
    call's start is durable before the operation runs and its completion before the result is returned
    to the sandbox; a journal write that fails fails the call with ``store.unavailable``.
    """

    def __init__(
        self,
        bridge: ToolkitBridge,
        *,
        emit: Emit,
        round_ref: Callable[[], int],
        policies: Mapping[str, str],
        approver: Approver | None,
        interceptors: Sequence[Any] = (),
        on_call: Callable[[CallRecord], None] | None = None,
        trace: Callable[[], RunTrace] | None = None,
        journal: Callable[[], CallJournalSink | None] | None = None,
        id_round: Callable[[], int] | None = None,
    ) -> None:
        self.bridge = bridge
        self._journal = journal
        self._id_round = id_round if id_round is not None else round_ref
        self._seq_round = -1  # the round the per-round sequence counts in
        self._round_seq = 0
        self._trace = trace  # the run's spans (engine.telemetry): each call gets one
        self._on_call = on_call
        self._emit = emit
        self._round = round_ref
        self._policies = dict(policies)
        self._approver = approver
        self._calls = 0
        self._records: list[CallRecord] = []
        self._interceptors = tuple(hook_name(i) for i in interceptors if hasattr(i, "intercept_tool"))
        self._call = chain(interceptors, "intercept_tool", self._forward, on_error=_refused_by)

    def manifest(self) -> dict[str, Any]:
        """The wrapped bridge's manifest."""
        return self.bridge.manifest()

    def begin_round(self) -> None:
        """A new round starts (the channel calls it): the wrapped bridge's round budgets count from zero."""
        self.bridge.begin_round()

    def drain_calls(self) -> list[CallRecord]:
        """The calls made since the last drain, in order of arrival, capped (``cap_calls``); clears them."""
        records, self._records = self._records, []
        return cap_calls(records)

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        """Serve one runtime request with events around it."""
        if method != "call" or not isinstance(params, dict):
            return await self.bridge.handle(method, params)
        raw_args = params.get("arguments")
        toolkit = str(params.get("toolkit")) if isinstance(params.get("toolkit"), str) else ""
        operation = str(params.get("operation")) if isinstance(params.get("operation"), str) else ""
        arguments: dict[str, Any] = dict(raw_args) if isinstance(raw_args, dict) else {}
        sequence = self._calls
        self._calls += 1
        rnd = self._round()
        if rnd != self._seq_round:
            self._seq_round, self._round_seq = rnd, 0
        in_round = self._round_seq
        self._round_seq += 1
        call_id = f"{self.bridge.session_id}:{self._id_round()}:{in_round}"
        journal = self._journal() if self._journal is not None else None
        self._emit(
            ToolCallStarted, call_id=call_id, toolkit=toolkit, operation=operation, arguments=arguments, round=rnd
        )
        started_at, t0 = time.time(), time.perf_counter()
        result: Any = None
        error: _p.RpcError | None = None
        token = None
        id_token = CALL_ID.set(call_id)
        # The host side of the call runs inside its span (a toolkit's HTTP client continues the trace).
        span_cm = (self._trace() if self._trace is not None else NULL_TRACE).tool_call(
            toolkit, operation, arguments, interceptors=self._interceptors
        )
        span = span_cm.__enter__()
        cancelled = False
        unstarted = False  # the start could not be journaled: the call did not run, nothing more to write
        try:
            if await self._check_grant(toolkit, operation, arguments, call_id):
                token = GRANT_APPROVED.set(True)  # the operation's own "ask" is not asked a second time
            if journal is not None:
                try:  # write-ahead: the start is durable before the operation can run
                    await journal.started(
                        rnd,
                        call_id=call_id,
                        sequence=in_round,
                        toolkit=toolkit,
                        operation=operation,
                        arguments=arguments,
                        started_at=started_at,
                    )
                except CodeactError as exc:
                    unstarted = True
                    what = f"the start of {toolkit}.{operation} (call {call_id}; it did not run)"
                    raise _unrecorded(what, exc) from None
            result = await self._call(ToolCall(toolkit=toolkit, operation=operation, arguments=arguments))
        except _p.RpcError as exc:
            error = exc
        except asyncio.CancelledError:
            error = _p.RpcError(_p.CANCELLED, "the call was cancelled: the round ended")
            cancelled = True
        except Exception as exc:  # an interceptor refused the call (or failed): the code sees its message
            error = _p.RpcError(_p.TOOL_ERROR, _message(exc), {"type": type(exc).__name__})
        finally:
            CALL_ID.reset(id_token)
            if token is not None:
                GRANT_APPROVED.reset(token)
        duration = time.perf_counter() - t0
        call_record = self._record(
            sequence, call_id, toolkit, operation, arguments, result, error, started_at, duration
        )
        if journal is not None and not unstarted:
            if cancelled:
                journal.completed_nowait(rnd, call_record)
            else:
                try:  # durable before the result goes back into the sandbox
                    await journal.completed(rnd, call_record)
                except CodeactError as exc:
                    error = _unrecorded(f"the outcome of {toolkit}.{operation} (call {call_id}; it ran)", exc)
                    call_record = self._record(
                        sequence, call_id, toolkit, operation, arguments, None, error, started_at, duration
                    )
                except asyncio.CancelledError:
                    cancelled = True
        failure = call_record.error
        self._records.append(call_record)
        if span is not None and error is not None and isinstance(error.data, dict) and "interceptor" in error.data:
            span.interceptor_failed(str(error.data["interceptor"]))
        if span is not None:
            span.finish(call_record.result, failure)
        span_cm.__exit__(None, None, None)
        if self._on_call is not None:
            self._on_call(call_record)
        self._emit(
            ToolCallCompleted,
            call_id=call_id,
            toolkit=toolkit,
            operation=operation,
            result=None if failure is not None else result,
            error=failure,
            duration_s=duration,
            round=rnd,
        )
        if cancelled:
            raise asyncio.CancelledError
        if error is not None:
            raise error
        return result

    def _record(
        self,
        sequence: int,
        call_id: str,
        toolkit: str,
        operation: str,
        arguments: dict[str, Any],
        result: Any,
        error: _p.RpcError | None,
        started_at: float,
        duration: float,
    ) -> CallRecord:
        failure = _error_json(error) if error is not None else None
        return CallRecord(
            sequence=sequence,
            session_id=self.bridge.session_id,
            toolkit=toolkit,
            operation=operation,
            arguments=arguments,
            result=None if failure is not None else result,
            error=failure,
            started_at=started_at,
            duration_s=duration,
            call_id=call_id,
        )

    async def _forward(self, request: ToolCall) -> Any:
        params = {"toolkit": request.toolkit, "operation": request.operation, "arguments": request.arguments}
        return await self.bridge.handle("call", params)

    async def _check_grant(self, toolkit: str, operation: str, arguments: dict[str, Any], call_id: str) -> bool:
        """Apply the grant's approval word; True when the approver was asked and allowed the call."""
        policy = self._policies.get(toolkit, "run")
        if policy == "run" or toolkit not in self.bridge.grants:
            return False  # ungranted calls are refused by the bridge itself, never approved here
        if policy == "deny":
            raise _p.RpcError(_p.APPROVAL_DENIED, f"{toolkit}.{operation} is denied by the blueprint's approval policy")
        try:
            decision = await ask_approval(
                self._approver,
                self._emit,
                ApprovalRequest(
                    session_id=self.bridge.session_id,
                    sequence=self._calls,
                    toolkit=toolkit,
                    operation=operation,
                    description="",
                    arguments=arguments,
                ),
                request_id=call_id,
                round_index=self._round(),
            )
        except Exception as exc:  # a failing approver denies; it never crashes the round
            raise _p.RpcError(
                _p.APPROVAL_DENIED,
                f"{toolkit}.{operation} was not approved: the approver failed ({type(exc).__name__})",
            ) from None
        if not decision.allow:
            raise _p.RpcError(
                _p.APPROVAL_DENIED, f"{toolkit}.{operation} was not approved: {decision.reason or 'denied'}"
            )
        return True


def _message(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def _refused_by(name: str, exc: Exception) -> BaseException:
    """A tool interceptor's own exception as the call's error: its message for the code, its name in ``data``."""
    if isinstance(exc, _p.RpcError):
        data = dict(exc.data) if isinstance(exc.data, dict) else ({} if exc.data is None else {"data": exc.data})
        return _p.RpcError(exc.code, exc.message, {**data, "interceptor": name})
    return _p.RpcError(_p.TOOL_ERROR, _message(exc), {"type": type(exc).__name__, "interceptor": name})


def _error_json(err: _p.RpcError) -> dict[str, Any]:
    out: dict[str, Any] = {"code": err.code, "name": err.name, "message": err.message}
    if err.data is not None:
        out["data"] = err.data
    return out


async def ask_approval(
    approver: Approver | None,
    emit: Emit,
    request: ApprovalRequest,
    *,
    request_id: str,
    round_index: int | None,
) -> ApprovalDecision:
    """Emit ``action.requested`` and ask the host's approver (no approver: denied, with the reason)."""
    emit(
        ActionRequested,
        request_id=request_id,
        kind="approval",
        toolkit=request.toolkit,
        operation=request.operation,
        arguments=request.arguments,
        round=round_index,
    )
    if approver is None:
        return ApprovalDecision(allow=False, reason="no approver is configured (use --approve-all or a callback)")
    token = APPROVAL_REQUEST_ID.set(request_id)
    try:
        return await approver(request)
    finally:
        APPROVAL_REQUEST_ID.reset(token)


class ModelAccessAdapter:
    """``toolkits.ModelAccess`` over the agent's model client (for system.think / system.parse)."""

    def __init__(self, call: Callable[[ModelCall], Awaitable[Any]]) -> None:
        self._call = call

    async def complete(self, prompt: str, *, purpose: str = "utility") -> str:
        """The model's reply text to ``prompt`` on the ``purpose`` route."""
        reply = await self._call(ModelCall(purpose=purpose, messages=({"role": "user", "content": prompt},)))
        return str(reply.text)
