"""The host end of toolkit calls: grants, validation, approval, limits, recording and replay.

``ToolkitBridge`` implements ``codeact.sandbox.channel.RpcHandler``: the channel owns the socket and the
framing and hands each runtime->host request to :meth:`ToolkitBridge.handle`. Nothing here trusts
the sandbox: every argument is decoded with the JSON codec (never unpickled), validated against
the operation's schema, and only granted operations ever run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import time
import types
from collections import deque
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from typing import Any, cast

import pydantic

from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime import protocol as _p
from codeact.toolkits._call_help import call_help, refused_operation
from codeact.toolkits._errors import safe_message
from codeact.toolkits._grants import Grants, as_toolkit_map, normalize_grants
from codeact.toolkits._schema import field_errors
from codeact.toolkits.bound import BoundToolkit, bind_toolkit
from codeact.toolkits.budget import DEFAULT_BUDGETS, BudgetMeter, CallBudgets
from codeact.toolkits.context import CALL_ID, Control, Skill, ToolkitContext
from codeact.toolkits.errors import DuplicateToolkitError, ToolkitError
from codeact.toolkits.pipeline import (
    Approval,
    ApprovalGate,
    ApprovalWaitCancelled,
    Asker,
    Call,
    CallNext,
    CallOutcome,
    CallWrapper,
    asker_of,
    compose,
    encode_error,
)
from codeact.toolkits.records import Approver, CallFold, CallRecord, RecordCaps, cap_call
from codeact.toolkits.registry import ToolkitRegistry
from codeact.toolkits.spec import OperationSpec
from codeact.toolkits.stubs import openai_tools, render_stubs

__all__ = ["CallLog", "ToolkitBridge"]

_BAD_CALL = "call params must be {toolkit: str, operation: str, arguments: object}"
_RESULT_OVERHEAD = 256
_SMALL = frozenset({int, float, bool, type(None)})
"""Bytes of a response frame besides the result (``{"jsonrpc":"2.0","id":..,"result":..}``)."""


class _RateLimiter:
    """At most ``calls`` calls in any window of ``per`` seconds (sliding window)."""

    def __init__(self, calls: int, per: float) -> None:
        if calls < 1 or per <= 0:
            raise ToolkitError(f"rate_limit must be (calls >= 1, seconds > 0), got ({calls!r}, {per!r})")
        self.calls = calls
        self.per = per
        self._stamps: deque[float] = deque()

    def allow(self) -> bool:
        now = time.monotonic()
        stamps = self._stamps
        while stamps and stamps[0] <= now - self.per:
            stamps.popleft()
        if len(stamps) >= self.calls:
            return False
        stamps.append(now)
        return True


class _Replay:
    def __init__(self, records: Iterable[CallRecord]) -> None:
        self.records = sorted(records, key=lambda r: r.sequence)
        self.used = [False] * len(self.records)
        self.next = 0
        self.divergence: str | None = None

    def take(self, toolkit: str, operation: str, arguments: object) -> CallRecord:
        while self.next < len(self.records) and self.used[self.next]:
            self.next += 1
        for index in range(self.next, len(self.records)):
            rec = self.records[index]
            if not self.used[index] and (rec.toolkit, rec.operation, rec.arguments) == (toolkit, operation, arguments):
                self.used[index] = True
                return rec
        call = f"{toolkit}.{operation}({_args_repr(arguments)})"
        if self.next < len(self.records):
            rec = self.records[self.next]
            expected = f"{rec.toolkit}.{rec.operation}({_args_repr(rec.arguments)})"
            detail = f"the code called {call} but the record has {expected} next"
        else:
            detail = f"the code called {call} but the record has no more calls"
        message = (
            f"replay diverged at call #{sum(self.used)}: {detail}; the session cannot be replayed "
            "deterministically (did the code or a toolkit change?)"
        )
        if self.divergence is None:
            self.divergence = message
        raise _p.RpcError(_p.INTERNAL_ERROR, message, {"replay": "diverged"})

    @property
    def remaining(self) -> int:
        return self.used.count(False)


def _args_repr(arguments: object) -> str:
    if not isinstance(arguments, dict):
        return repr(arguments)[:80]
    text = ", ".join(f"{k}={v!r}" for k, v in arguments.items())
    return text if len(text) <= 160 else text[:157] + "..."


class CallLog:
    """A call wrapper that keeps every call with exactly what the code got, until :meth:`drain`.

    Bounded as the record is (:func:`~codeact.toolkits.records.cap_calls`): the first ``RecordCaps.calls``
    calls of a round are kept whole; the ones after them are folded as they end (:class:`CallFold`), so
    a round of 10,000 calls does not hold 10,000 calls until the round ends.

    Args:
        record: Builds a call's record (``ToolkitBridge.record_of``).
        ordered: Hand the calls out in order of arrival (else in the order they ended). The log must
            then be entered in order of arrival (no wrapper before it waits before passing a call on, as
            the bridge's own wrappers do): that order decides which calls are kept whole, and the folded
            ones are folded in it.
        ids: Keep the calls' ids in the records.
    """

    def __init__(self, record: Callable[..., CallRecord], *, ordered: bool = False, ids: bool = True) -> None:
        self._record = record
        self._ordered = ordered
        self._call_id = None if ids else ""
        self._calls: list[tuple[Call, CallOutcome]] = []
        self._caps: RecordCaps | None = None  # read at a round's first call (the environment may change)
        self._fold = CallFold()
        self._entered = 0  # calls that entered since the last drain: their place in the round
        self._folded = 0  # ordered: calls of the round's fold folded (or skipped) so far
        self._waiting: dict[int, CallRecord] = {}  # ordered: calls to fold that ended before an earlier one
        self._generation = 0

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Run the call and keep it (whole, or folded into the round's summary)."""
        if self._caps is None:
            self._caps = RecordCaps.from_env()
        generation, place = self._generation, self._entered
        self._entered += 1
        outcome = await call_next(call)
        if generation != self._generation:  # it outlived a drain: it counts in the round that drains it next
            place = self._entered
            self._entered += 1
            if self._caps is None:  # the drained round's caps are gone: this call opens the next round's
                self._caps = RecordCaps.from_env()
        limit = self._caps.calls if self._caps is not None else RecordCaps.from_env().calls
        if (place if self._ordered else len(self._calls)) < limit:
            self._calls.append((call, outcome))  # a CallRecord at drain time: keeps the per-call cost down
        elif not self._ordered:
            self._fold.add(self._record(call, outcome, call_id=self._call_id))  # in the order they end
        else:
            self._waiting[place - limit] = self._record(call, outcome, call_id=self._call_id)
            self._fold_waiting()
        return outcome

    def _fold_waiting(self) -> None:
        waiting = self._waiting
        while self._folded in waiting:
            self._fold.add(waiting.pop(self._folded))
            self._folded += 1

    def drain(self) -> list[CallRecord]:
        """The calls kept since the last drain, capped as :func:`cap_calls` caps them; clears them."""
        caps = self._caps if self._caps is not None else RecordCaps.from_env()
        calls, self._calls = self._calls, []
        fold, self._fold = self._fold, CallFold()
        while self._waiting:  # calls still running when the round ended: fold the ones that did end, in order
            if self._folded in self._waiting:
                fold.add(self._waiting.pop(self._folded))
            self._folded += 1
        self._caps, self._entered, self._folded = None, 0, 0
        self._generation += 1
        if self._ordered:
            calls.sort(key=lambda pair: pair[0].sequence)
        kept = [cap_call(self._record(call, outcome, call_id=self._call_id), caps) for call, outcome in calls]
        folded = fold.record(caps.calls)
        if folded is not None:
            kept.append(folded)
        return kept


class ToolkitBridge:
    """Serves one session's toolkit calls (implements ``codeact.sandbox.channel.RpcHandler``).

    Args:
        toolkits: A ``ToolkitRegistry`` (looked up on every call, so unregistering takes effect)
            or toolkits (anything ``bind_toolkit`` accepts).
        grants: ``{toolkit: "*" | [operation, ...]}``; ``None`` grants every operation of every
            toolkit given. Checked now: unknown names raise ``ToolkitNotFoundError``.
        session_id: The session; defaults to ``context.session_id``.
        context: The base ``ToolkitContext`` handed to operations (the bridge adds ``deadline``
            and ``skills`` per call).
        approval: The host's approver for ``approval="ask"`` operations; without one they are denied.
        asker: Asks the host instead of ``approval`` (the engine's also reports ``action.requested``).
        policies: ``{toolkit: word}``, the grants' approval policies (``Approval.of`` maps each word once);
            a host that sets them puts :attr:`gate` among its wrappers (:meth:`use`).
        default_timeout: Seconds per call when the operation sets none.
        rate_limit: ``(calls, per_seconds)`` for the session, or ``None`` for no limit.
        record: Keep a ``CallRecord`` of every call (see :meth:`drain_calls`).
        call_events: Send ``tool.call.started`` / ``tool.call.completed`` to ``context.emit`` (a host
            that logs and reports calls itself turns this off; operations' own events still go there).
        max_result_bytes: Cap on an encoded result (default: what fits in one frame).
        budgets: The calls and bridge bytes a round and the run may use (``toolkits.budget``; default
            ``DEFAULT_BUDGETS``; None: unbounded). The round's counts restart at :meth:`begin_round`.
    """

    def __init__(
        self,
        toolkits: ToolkitRegistry | Iterable[object],
        *,
        grants: Grants | None = None,
        session_id: str | None = None,
        context: ToolkitContext | None = None,
        approval: Approver | None = None,
        asker: Asker | None = None,
        policies: Mapping[str, str] | None = None,
        default_timeout: float = 30.0,
        rate_limit: tuple[int, float] | None = None,
        record: bool = True,
        call_events: bool = True,
        max_result_bytes: int | None = None,
        budgets: CallBudgets | None = DEFAULT_BUDGETS,
    ) -> None:
        if session_id is None and context is None:
            raise ToolkitError("ToolkitBridge needs a session: pass session_id=... or context=ToolkitContext(...)")
        if context is not None and session_id is not None and context.session_id != session_id:
            raise ToolkitError(
                f"ToolkitBridge got session_id={session_id!r} but context.session_id={context.session_id!r}; "
                "pass one of them"
            )
        if not default_timeout > 0:
            raise ToolkitError(f"default_timeout must be a positive number of seconds, got {default_timeout!r}")
        self._registry = toolkits if isinstance(toolkits, ToolkitRegistry) else ToolkitRegistry(toolkits)
        available = as_toolkit_map(self._registry)
        self._grants = normalize_grants(available, grants)
        self.session_id: str = session_id if session_id is not None else context.session_id  # type: ignore[union-attr]
        self._context = context if context is not None else ToolkitContext(session_id=self.session_id)
        if asker is None and approval is not None:
            asker = asker_of(approval)
        self.gate = ApprovalGate(asker, policies=policies, granted=lambda: self._grants, session_id=self.session_id)
        """The session's one approval gate (its operation stage runs in the core; its grant stage is a wrapper)."""
        self.default_timeout = float(default_timeout)
        self._limiter = _RateLimiter(*rate_limit) if rate_limit is not None else None
        self._max_result_bytes = max_result_bytes if max_result_bytes is not None else _p.MAX_FRAME - _RESULT_OVERHEAD
        self.log: CallLog | None = CallLog(self.record_of, ordered=True, ids=False) if record else None
        """The calls the session made, for its record (:meth:`drain_calls`); None when nothing is recorded."""
        own: list[CallWrapper] = []  # the bridge's own wrappers; a host adds its own with use()
        if call_events and self._context.emit is not None:  # the sink is fixed here (add_toolkit keeps it)
            own.append(self._report)
        if self.log is not None:
            own.append(self.log)
        self._meter = BudgetMeter(budgets) if budgets is not None else None
        self._own: tuple[CallWrapper, ...] = tuple(own)
        self._inner: tuple[CallWrapper, ...] = (self._budget,) if self._meter is not None else ()
        self._handler: CallNext = compose((*own, *self._inner), self._core)
        self._bare: CallNext = self._handler  # for a request that is not even an object: no host wrapper
        self._composed = False
        self._sequence = 0
        self._replay: _Replay | None = None
        self._manifest_override: dict[str, Any] | None = None
        self._added: dict[str, BoundToolkit] = {}  # add_toolkit(): this session's own, over the registry
        skills: dict[str, Skill] = {}
        for name, ops in self._grants.items():
            bound = available[name]
            skills[name] = {
                "description": bound.description,
                "operations": {op: spec.summary for op, spec in bound.operations.items() if op in ops},
            }
        self._context = dataclasses.replace(self._context, skills=skills)

    # -- construction helpers --------------------------------------------------------------------
    @classmethod
    def replaying(
        cls,
        records: Iterable[CallRecord],
        *,
        toolkits: ToolkitRegistry | Iterable[object] = (),
        grants: Grants | None = None,
        session_id: str | None = None,
        record: bool = True,
    ) -> ToolkitBridge:
        """A bridge that answers calls from ``records`` (in order) and never runs a tool.

        A call that matches no remaining record (same toolkit, operation and encoded arguments)
        fails with ``internal_error`` "replay diverged ..."; :attr:`divergence` keeps the first.

        Args:
            records: The recorded calls of the round(s) being replayed.
            toolkits: The session's toolkits, for the manifest (positional arguments need the
                parameter order); without them the manifest is rebuilt from the records.
            grants: As for the constructor.
            session_id: Defaults to the records' session.
            record: Record the replayed calls too.

        Returns:
            The replaying bridge.
        """
        recs = list(records)
        sid = session_id or (recs[0].session_id if recs else "replay")
        bridge = cls(toolkits, grants=grants, session_id=sid, record=record)
        bridge._replay = _Replay(recs)
        if not bridge._grants:
            bridge._manifest_override = _manifest_from_records(recs)
        return bridge

    # -- introspection ---------------------------------------------------------------------------
    @property
    def grants(self) -> dict[str, frozenset[str]]:
        """``{toolkit: frozenset(operations)}`` granted to this session."""
        return dict(self._grants)

    @property
    def divergence(self) -> str | None:
        """In replay mode: the first divergence message, else ``None``."""
        return self._replay.divergence if self._replay is not None else None

    @property
    def replay_remaining(self) -> int:
        """In replay mode: recorded calls not consumed yet (0 otherwise)."""
        return self._replay.remaining if self._replay is not None else 0

    def add_toolkit(self, toolkit: object) -> BoundToolkit:
        """Add a toolkit to this session, every operation granted (a hook's injected tool, engine/agent/hooks.py).

        The registry given to the constructor is not changed. Adding the same toolkit object (or another
        instance of the same class) under a name it already has here again does nothing.

        Args:
            toolkit: Anything ``bind_toolkit`` accepts (a ``@toolkit`` class or instance, a ``DynamicToolkit``).

        Returns:
            The bound toolkit.

        Raises:
            ToolkitDefinitionError: ``toolkit`` is not a toolkit.
            DuplicateToolkitError: the session already has another toolkit of that name.
        """
        bound = bind_toolkit(toolkit)
        added = self._added.get(bound.name)
        if added is not None and (added.target is bound.target or added.source == bound.source):
            return added
        if bound.name in self._grants:
            current = self._lookup(bound.name)
            source = current.source if current is not None else "the session's grants"
            raise DuplicateToolkitError(
                f"this session already has a toolkit named {bound.name!r} ({source}); cannot add {bound.source} "
                "under the same name: rename it (@toolkit(name=...))"
            )
        self._added[bound.name] = bound
        self._grants[bound.name] = frozenset(bound.operations)
        skills = dict(self._context.skills or {})
        skills[bound.name] = {
            "description": bound.description,
            "operations": {op: spec.summary for op, spec in bound.operations.items()},
        }
        self._context = dataclasses.replace(self._context, skills=skills)
        return bound

    def _lookup(self, name: str) -> BoundToolkit | None:
        return self._added.get(name) or self._registry.get(name)

    def _granted_toolkits(self) -> list[tuple[BoundToolkit, list[str]]]:
        out = []
        for name, ops in self._grants.items():
            bound = self._lookup(name)
            if bound is not None:
                out.append((bound, [op for op in bound.operations if op in ops]))
        return out

    def manifest(self) -> dict[str, Any]:
        """The granted toolkits and operations, sent to the runtime when it authenticates."""
        if self._manifest_override is not None:
            return self._manifest_override
        toolkits: dict[str, Any] = {}
        for bound, ops in self._granted_toolkits():
            operations = {}
            for op in ops:
                operations[op] = _manifest_entry(bound.operations[op])
            toolkits[bound.name] = {"description": bound.description, "operations": operations}
        return {"toolkits": toolkits}

    def stubs(self) -> str:
        """The granted operations as the model sees them (``render_stubs`` with this session's grants)."""
        granted = self._granted_toolkits()
        return render_stubs([b for b, _ in granted], grants={b.name: ops for b, ops in granted})

    def openai_tools(self) -> list[dict[str, Any]]:
        """The granted operations in the function-calling form."""
        granted = self._granted_toolkits()
        return openai_tools([b for b, _ in granted], grants={b.name: ops for b, ops in granted})

    def call_help(self, error: Mapping[str, object] | None) -> str | None:
        """What to show the model after ``error`` (a round's ``{"type", "message", ...}``), if it refused a call.

        For a call of a granted operation refused by the argument check (the bridge's ``invalid arguments
        for ...`` or the runtime proxy's ``TypeError``): its one-line signature, its bounds and one correct
        call (``prompts/call_help.j2``); ``None`` for any other error.
        """
        refused = refused_operation(error)
        if refused is None:
            return None
        toolkit, operation = refused
        bound = self._lookup(toolkit)
        if bound is None or operation not in self._grants.get(toolkit, ()) or operation not in bound.operations:
            return None
        return call_help(bound.operations[operation], toolkit=toolkit)

    def drain_calls(self) -> list[CallRecord]:
        """The calls recorded since the last drain, in order of arrival, capped (``cap_calls``); clears them."""
        return self.log.drain() if self.log is not None else []  # bounded per round (toolkits/records.py RecordCaps)

    # -- RpcHandler ------------------------------------------------------------------------------
    def begin_round(self) -> None:
        """A new round starts (the channel calls it): the round's budgets count from zero."""
        if self._meter is not None:
            self._meter.begin_round()

    @property
    def meter(self) -> BudgetMeter | None:
        """The budgets' counts so far (None without budgets)."""
        return self._meter

    def use(self, wrappers: Sequence[CallWrapper], *, log: CallLog | None = None) -> None:
        """Put the host's ``wrappers`` (first outermost) between the bridge's own and its core; once.

        The engine's (events, span, call journal, the :attr:`gate`'s grant stage, interceptors) come from
        ``codeact.engine.calls``. A request whose params are not even an object skips them: it names no call.
        ``log``, when given (one of ``wrappers``), is the log :meth:`drain_calls` hands out.
        """
        if self._composed:
            raise ToolkitError("ToolkitBridge.use() composes the call pipeline once; it was already called")
        self._composed = True
        self._handler = compose((*self._own, *wrappers, *self._inner), self._core)
        if log is not None:
            self.log = log

    async def handle(self, method: str, params: Mapping[str, object]) -> object:
        """Serve one runtime->host request (``call``); raises ``RpcError`` for every refusal or failure."""
        if method != "call":
            raise _p.RpcError(_p.METHOD_NOT_FOUND, f"unknown method {method!r}: the runtime may only send 'call'")
        sequence = self._sequence
        self._sequence += 1
        handler = self._handler
        if isinstance(params, dict):
            raw_toolkit, raw_operation = params.get("toolkit"), params.get("operation")
            raw_arguments = params.get("arguments", {})
        else:
            raw_toolkit = raw_operation = raw_arguments = None
            handler = self._bare
        call = Call(
            toolkit=raw_toolkit if isinstance(raw_toolkit, str) else "",
            operation=raw_operation if isinstance(raw_operation, str) else "",
            arguments=raw_arguments if isinstance(raw_arguments, dict) else {},
            sequence=sequence,
            started_at=time.time(),
            t0=time.perf_counter(),
            raw=(raw_toolkit, raw_operation, raw_arguments),
        )
        outcome = await handler(call)
        return outcome.unwrap()

    def record_of(self, call: Call, outcome: CallOutcome, *, call_id: str | None = None) -> CallRecord:
        """The record of one call: what the code got (the one place a ``CallRecord`` is built)."""
        failure = outcome.failure
        return CallRecord(
            sequence=call.sequence,
            session_id=self.session_id,
            toolkit=call.toolkit,
            operation=call.operation,
            arguments=call.arguments,
            result=None if failure is not None else outcome.result,
            error=failure,
            started_at=call.started_at,
            duration_s=outcome.duration_s,
            call_id=call.call_id if call_id is None else call_id,
        )

    async def _report(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """``tool.call.started`` / ``tool.call.completed`` to ``ToolkitContext.emit`` (``call_events=True``)."""
        emit = self._context.emit
        if emit is None:
            return await call_next(call)
        call_id = CALL_ID.get() or f"{self.session_id}:0:{call.sequence}"
        started = {"toolkit": call.toolkit, "operation": call.operation, "arguments": call.arguments}
        emit("tool.call.started", {"sequence": call.sequence, "call_id": call_id, **started})
        outcome = await call_next(call)
        done: dict[str, object] = {
            "sequence": call.sequence,
            "call_id": call_id,
            "toolkit": call.toolkit,
            "operation": call.operation,
            "duration_s": outcome.duration_s,
        }
        if outcome.error is not None:
            done["error"] = encode_error(outcome.error)
        emit("tool.call.completed", done)
        return outcome

    async def _budget(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """The calls and bridge bytes budgets (``toolkits/budget.py``), the innermost wrapper.

        Past a budget the call is refused with the ``budget_exceeded`` signal, and the round stops.
        """
        meter = self._meter
        if meter is None or self._replay is not None:  # a replayed call is answered from the record
            return await call_next(call)
        signal = meter.charge(1, _size(call.arguments))
        if signal is not None:
            try:
                return call.done(self._encode_result(f"{call.toolkit}.{call.operation}", signal))
            except _p.RpcError as err:
                return call.failed(err)
        outcome = await call_next(call)
        if outcome.error is None:
            meter.charge(0, _size(outcome.result))
        return outcome

    async def _core(self, call: Call) -> CallOutcome:
        """Replay, or the call itself (:meth:`_call`); every failure becomes the outcome."""
        try:
            if self._replay is not None:
                return call.done(self._replayed(call.toolkit, call.operation, call.arguments, *call.raw))
            return call.done(await self._call(call))
        except _p.RpcError as err:
            return call.failed(err)
        except asyncio.CancelledError as exc:
            return call.cancelled(awaiting_approval=isinstance(exc, ApprovalWaitCancelled))

    def _replayed(
        self, toolkit: str, operation: str, arguments: dict[str, object], *raw: object
    ) -> object:  # raw: the request's fields as sent, so malformed requests never match a record
        assert self._replay is not None  # noqa: S101 -- internal invariant, not input validation
        if not (isinstance(raw[0], str) and isinstance(raw[1], str) and isinstance(raw[2], dict)):
            raise _p.RpcError(_p.INVALID_PARAMS, _BAD_CALL)
        rec = self._replay.take(toolkit, operation, arguments)
        if rec.error is not None:
            code = rec.error.get("code")
            raise _p.RpcError(
                code if isinstance(code, int) else _p.INTERNAL_ERROR,
                str(rec.error.get("message", "")),
                rec.error.get("data"),
            )
        return rec.result

    async def _call(self, call: Call) -> object:
        toolkit, operation, arguments = call.raw
        if not (isinstance(toolkit, str) and isinstance(operation, str) and isinstance(arguments, dict)):
            raise _p.RpcError(_p.INVALID_PARAMS, _BAD_CALL)
        sequence = call.sequence
        bound = self._authorize(toolkit, operation)
        spec = bound.operations[operation]
        if self._limiter is not None and not self._limiter.allow():
            raise _p.RpcError(
                _p.RATE_LIMITED,
                f"rate limit exceeded: at most {self._limiter.calls} calls per {self._limiter.per:g} s in this "
                "session; wait, or do more work per call",
            )
        values = self._decode_arguments(toolkit, operation, arguments)
        try:
            validated = bound.validate(operation, values)
        except pydantic.ValidationError as exc:
            errors = field_errors(exc)
            detail = "; ".join(f"{e['field']}: {e['message']}" if e["field"] else e["message"] for e in errors)
            raise _p.RpcError(
                _p.INVALID_PARAMS, f"invalid arguments for {toolkit}.{operation}(): {detail}", {"errors": errors}
            ) from None
        if spec.policy is not Approval.RUN:
            await self.gate.check_operation(call, spec.policy, spec.summary)
        if bound.prepare is not None:  # a server (re)start is not the call: its own limit bounds it
            try:
                await bound.prepare(operation)
            except Exception as exc:
                raise _p.RpcError(_p.TOOL_ERROR, safe_message(exc), {"type": type(exc).__name__}) from None
        timeout = spec.timeout if spec.timeout is not None else self.default_timeout
        context = self._context
        if bound.wants_context(operation):
            call_id = call.call_id or CALL_ID.get() or f"{self.session_id}:0:{sequence}"
            context = context.with_deadline(time.monotonic() + timeout, call_id)
        try:
            value = await _run_with_timeout(bound.invoke(operation, validated, context), timeout)
        except _Expired:
            raise _p.RpcError(
                _p.DEADLINE_EXCEEDED, f"{toolkit}.{operation}() did not finish within its {timeout:g} s timeout"
            ) from None
        except _p.RpcError:
            raise
        except Exception as exc:  # the tool failed: its message only, never a host traceback or path
            raise _p.RpcError(_p.TOOL_ERROR, safe_message(exc), {"type": type(exc).__name__}) from None
        kind = type(value)
        if (
            kind is int
            or kind is bool
            or value is None
            or (kind is str and len(cast(str, value)) * 6 < self._max_result_bytes)
        ):
            return value  # plain JSON that cannot approach the cap: the codec would return it as is
        return self._encode_result(f"{toolkit}.{operation}", value)

    def _authorize(self, toolkit: str, operation: str) -> BoundToolkit:
        granted = self._grants.get(toolkit)
        bound = self._lookup(toolkit)
        if granted is None:
            if bound is None:
                available = ", ".join(self._grants) or "none"
                raise _p.RpcError(
                    _p.NOT_FOUND, f"there is no toolkit {toolkit!r}; toolkits of this session: {available}"
                )
            raise _p.RpcError(_p.UNAUTHORIZED, f"toolkit {toolkit!r} is not granted to this session")
        if bound is None:
            raise _p.RpcError(_p.NOT_FOUND, f"toolkit {toolkit!r} is no longer available on the host")
        if operation not in bound.operations or operation.startswith("_"):
            ops = sorted(op for op in granted if op in bound.operations)
            close = difflib.get_close_matches(operation, ops, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"granted: {', '.join(ops) or 'none'}"
            raise _p.RpcError(_p.NOT_FOUND, f"toolkit {toolkit!r} has no operation {operation!r}; {hint}")
        if operation not in granted:
            raise _p.RpcError(_p.UNAUTHORIZED, f"operation {toolkit}.{operation} is not granted to this session")
        return bound

    def _decode_arguments(self, toolkit: str, operation: str, arguments: dict[str, object]) -> dict[str, object]:
        values: dict[str, object] = {}
        for name, encoded in arguments.items():
            if not isinstance(name, str):  # pragma: no cover -- JSON object keys are always strings
                raise _p.RpcError(_p.INVALID_PARAMS, f"argument names of {toolkit}.{operation}() must be strings")
            kind = type(encoded)
            if kind is not dict and kind is not list:
                values[name] = encoded  # a JSON scalar decodes to itself
                continue
            try:
                values[name] = codec.decode(encoded)
            except Exception as exc:  # Unencodable, ValueError, ...: hostile input must not crash the host
                raise _p.RpcError(
                    _p.INVALID_PARAMS,
                    f"argument {name!r} of {toolkit}.{operation}() could not be decoded: {safe_message(exc)}",
                    {"errors": [{"field": name, "message": "undecodable value", "type": "codec"}]},
                ) from None
        return values

    def _encode_result(self, label: str, value: object) -> object:
        try:
            if isinstance(value, Control):
                payload = {k: codec.encode(v) for k, v in value.payload.items()}
                encoded: object = {"$control": {"kind": value.kind, **payload}}
            elif type(value) in _SMALL or (type(value) is str and len(value) * 6 < self._max_result_bytes):
                encoded = codec.encode(value)  # cannot approach the cap: skip measuring it
            else:
                encoded = codec.encode(value, max_bytes=self._max_result_bytes)
        except codec.TooLarge:
            raise _p.RpcError(
                _p.PAYLOAD_TOO_LARGE,
                f"the result of {label}() exceeds the {self._max_result_bytes}-byte limit; return less data",
            ) from None
        except codec.Unencodable as exc:
            raise _p.RpcError(
                _p.TOOL_ERROR, f"the result of {label}() cannot be sent to the sandbox: {exc.reason}"
            ) from None
        return encoded


def _size(value: object) -> int:
    """Bytes of ``value`` as JSON on the bridge (a string's length in characters: close enough, and free)."""
    kind = type(value)
    if kind is str:
        return len(cast(str, value)) + 2
    if kind in _SMALL:
        return 8
    try:
        return len(_p.dumps(value))
    except (TypeError, ValueError):
        return 0


_Coro = Coroutine[object, object, object]
"""A tool's coroutine, driven step by step."""


class _Expired(Exception):
    """The per-call timeout fired (distinct from a ``TimeoutError`` the tool itself raised)."""


async def _run_with_timeout(coro: _Coro, timeout: float) -> object:
    """Await ``coro`` for at most ``timeout`` seconds; raises ``_Expired`` when the time is up.

    Tools always run inside a task (anyio, sniffio and ``asyncio.timeout`` need one). The channel
    runs every handler in a task (an eager one: its first step runs as the frame is read). Inside
    a task the tool's first step runs inline, and a timer is armed only if it suspends: most
    trivial operations finish without ever touching the event loop. A caller that drives
    ``handle()`` outside any task gets one: after one suspension (a driver that resumes it in a
    task), else a task of the tool's own.
    """
    if asyncio.current_task() is None:
        await _suspend()
        if asyncio.current_task() is None:
            return await _in_own_task(coro, timeout)
    try:
        first = coro.send(None)
    except StopIteration as stop:
        return stop.value
    try:
        async with asyncio.timeout(timeout) as scope:
            return await _Resume(coro, first)
    except TimeoutError:
        if scope.expired():
            raise _Expired from None
        raise


@types.coroutine
def _suspend() -> Generator[None, None, None]:
    """Give control back to the event loop once (a bare ``yield``: the task is rescheduled at once)."""
    yield


class _Resume:
    """Await the rest of a coroutine whose first step already ran (``first`` is what it yielded)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: _Coro, first: object) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[object, object, object]:
        coro, pending = self._coro, self._first
        while True:
            try:
                sent = yield pending
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # cancellation (our timeout or the round's end) goes into the tool
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    pending = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


async def _in_own_task(coro: _Coro, timeout: float) -> object:
    task = asyncio.get_running_loop().create_task(coro)
    expired = False

    def expire() -> None:
        nonlocal expired
        expired = True
        task.cancel()

    timer = asyncio.get_running_loop().call_later(timeout, expire)
    try:
        return await task  # cancelling the awaiting side (the round ended) cancels the tool's task too
    except asyncio.CancelledError:
        if expired and not _cancelling():
            raise _Expired from None
        raise
    finally:
        timer.cancel()


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _manifest_entry(spec: OperationSpec) -> dict[str, Any]:
    """How the runtime's proxy maps a call's arguments to names (``sandbox/runtime/proxy.py``).

    ``positional`` and ``keyword`` are only sent when they differ from ``params`` (keyword-only,
    positional-only or variadic parameters), ``varargs`` / ``varkw`` only when there is one.
    """
    params = spec.parameters
    entry: dict[str, Any] = {"params": [p.name for p in params], "required": [p.name for p in params if p.required]}
    if all(p.kind == "positional_or_keyword" for p in params):
        return entry
    entry["positional"] = [p.name for p in params if p.kind in ("positional_only", "positional_or_keyword")]
    entry["keyword"] = [p.name for p in params if p.kind in ("positional_or_keyword", "keyword_only")]
    for p in params:
        if p.kind == "var_positional":
            entry["varargs"] = p.name
        elif p.kind == "var_keyword":
            entry["varkw"] = p.name
    return entry


def _manifest_from_records(records: list[CallRecord]) -> dict[str, Any]:
    toolkits: dict[str, Any] = {}
    for rec in records:
        if not rec.toolkit or not rec.operation:
            continue
        entry = toolkits.setdefault(rec.toolkit, {"description": "", "operations": {}})
        params = entry["operations"].setdefault(rec.operation, {"params": [], "required": []})["params"]
        for name in rec.arguments:
            if name not in params:
                params.append(name)
    return {"toolkits": toolkits}
