"""One toolkit call's pipeline: the call value, its outcome, the wrapper protocol and the approval gate.

A call travels one way (``ToolkitBridge.handle`` is the only handler)::

    runtime request --parse once--> Call --wrapper--> wrapper --> ... --> the bridge's core --> CallOutcome

1. ``ToolkitBridge.handle`` parses the request once into a :class:`Call` (its sequence number in
   the session, its start time) and hands it to the wrappers composed once (:func:`compose`);
2. each wrapper (a :class:`CallWrapper`) sees the call and ``call_next``; it may pass on a changed
   copy of the call (``dataclasses.replace``), refuse it (return ``call.failed(...)``) or look at the outcome;
3. the bridge's budgets (its innermost wrapper), then its core (authorize, rate limit, validate, the
   operation's stage of the :class:`ApprovalGate`, invoke, encode)
   turns every failure into a value: a :class:`CallOutcome` carries the result or the ``RpcError``;
4. back in ``handle``, :meth:`CallOutcome.unwrap` returns the result or raises the error to the channel.

The host's wrappers that need the engine (events, spans, the call journal, interceptors) live in
``codeact.engine.calls``; the bridge's own (its call log and ``ToolkitContext.emit`` events) sit next to
it. Approval has one vocabulary after load (:class:`Approval`): every word a blueprint or an
``@operation`` accepts maps to it once (:meth:`Approval.of`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from codeact.sandbox.runtime import protocol as _p
from codeact.toolkits.records import ApprovalDecision, ApprovalRequest, Approver

__all__ = [
    "Approval",
    "ApprovalGate",
    "ApprovalWaitCancelled",
    "Asker",
    "AWAITING_APPROVAL",
    "Call",
    "CallNext",
    "CallOutcome",
    "CallWrapper",
    "compose",
    "encode_error",
]


class Approval(enum.StrEnum):
    """What happens to a call before it runs: the one approval vocabulary after load."""

    RUN = "run"
    ASK = "ask"
    DENY = "deny"

    @classmethod
    def of(cls, word: str | None) -> Approval:
        """Map an approval word to its meaning, once, where it is loaded.

        Blueprint words (``always``, ``safe``, ``auto`` run; ``never``, ``deny`` deny; ``ask``, ``manual``
        ask), ``@operation`` words (``auto``, ``ask``, ``deny``) and this enum's own values; no word
        (``None``) runs. An unknown word asks: the safe side.
        """
        if word is None or word in _RUN_WORDS:
            return cls.RUN
        if word in _DENY_WORDS:
            return cls.DENY
        return cls.ASK


AWAITING_APPROVAL = {"awaiting": "approval"}
"""The ``data`` of a cancelled call's error when the round stopped while it waited for an approval: it did not run."""

_RUN_WORDS = frozenset({"always", "safe", "auto", "run"})
_DENY_WORDS = frozenset({"deny", "never"})


def encode_error(error: _p.RpcError) -> dict[str, object]:
    """A call's failure as records, events and spans carry it: ``{"code", "name", "message"[, "data"]}``."""
    out: dict[str, object] = {"code": error.code, "name": error.name, "message": error.message}
    if error.data is not None:
        out["data"] = error.data
    return out


@dataclass(kw_only=True, slots=True)  # a value never changed in place; not frozen=True: 3x its cost per call
class Call:
    """One toolkit call as the wrappers see it (a value: a wrapper passes on a changed copy, never mutates it).

    Attributes:
        toolkit: The toolkit name ("" when the request did not carry a string).
        operation: The operation name ("" when the request did not carry a string).
        arguments: As received (codec-encoded JSON; ``{}`` when the request did not carry an object).
        sequence: Order of arrival in the session's bridge (0-based).
        started_at: Wall-clock start (``time.time()``).
        t0: ``time.perf_counter()`` at the start: a failure or result made into an outcome measures from it.
        raw: The request's ``toolkit``, ``operation`` and ``arguments`` as sent (checked by the core).
        call_id: The call's stable id (``ToolkitContext.call_id``), "" until a wrapper numbers it.
        round: The engine's round the call arrived in, when the host has rounds.
        round_sequence: The call's order of arrival in that round (0-based; the last part of ``call_id``).
        approved: The host's approver already allowed this call (for its grant): it is not asked again.
    """

    toolkit: str
    operation: str
    arguments: dict[str, object]
    sequence: int
    started_at: float
    t0: float
    raw: tuple[object, object, object]
    call_id: str = ""
    round: int | None = None
    round_sequence: int = 0
    approved: bool = False

    def done(self, result: object) -> CallOutcome:
        """The call returned ``result``."""
        return CallOutcome(result=result, duration_s=time.perf_counter() - self.t0)

    def failed(self, error: _p.RpcError) -> CallOutcome:
        """The call failed with ``error`` (what the code sees)."""
        return CallOutcome(error=error, duration_s=time.perf_counter() - self.t0)

    def cancelled(self, *, awaiting_approval: bool = False) -> CallOutcome:
        """The call was cancelled (the round ended); ``awaiting_approval``: while it waited for an approval."""
        if awaiting_approval:  # it never ran: the record says so (an interrupted round lists it as not performed)
            message = "the call did not run: the round ended while it waited for the user's approval"
            error = _p.RpcError(_p.CANCELLED, message, dict(AWAITING_APPROVAL))
        else:
            error = _p.RpcError(_p.CANCELLED, "the call was cancelled: the round ended")
        return CallOutcome(error=error, duration_s=time.perf_counter() - self.t0, cancelled=True)


@dataclass(kw_only=True, slots=True)  # a value never changed in place (dataclasses.replace), like Call
class CallOutcome:
    """How a call ended: its result, or the error the code sees (a value, as :class:`Call`).

    Attributes:
        result: What goes back to the sandbox (codec-encoded) when there is no error.
        error: The failure, else None.
        duration_s: Seconds from the call's start to the moment it became this outcome.
        cancelled: The round ended while the call ran (``unwrap`` raises ``CancelledError``).
        unstarted: The call journal could not record its start: it never ran, and its end is not written.
        from_record: The call id of the interrupted round's call whose recorded result this is: the call was
            answered from that record, not run (the engine's ``FromRecord``); "" when it ran.
    """

    duration_s: float
    result: object = None
    error: _p.RpcError | None = None
    cancelled: bool = False
    unstarted: bool = False
    from_record: str = ""

    @property
    def failure(self) -> dict[str, object] | None:
        """The error as records carry it (:func:`encode_error`), else None."""
        return encode_error(self.error) if self.error is not None else None

    def unwrap(self) -> object:
        """The result; raises the error (``CancelledError`` when cancelled)."""
        if self.cancelled:
            raise asyncio.CancelledError
        if self.error is not None:
            raise self.error
        return self.result


CallNext = Callable[[Call], Awaitable[CallOutcome]]
"""The rest of the pipeline, as a wrapper calls it."""


class CallWrapper(Protocol):
    """One stage around a toolkit call: do something, call ``call_next`` (or not), return the outcome."""

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """Handle one call."""
        ...


def compose(wrappers: Sequence[CallWrapper], core: CallNext) -> CallNext:
    """``wrappers`` around ``core``, the first one outermost (composed once, when a bridge is set up)."""
    handler = core
    for wrapper in reversed(wrappers):
        handler = _bind(wrapper, handler)
    return handler


def _bind(wrapper: CallWrapper, inner: CallNext) -> CallNext:
    # A plain function handing back the wrapper's coroutine: no coroutine of its own per stage and call.
    def handler(call: Call) -> Awaitable[CallOutcome]:
        return wrapper(call, inner)

    return handler


class Asker(Protocol):
    """Asks the host whether one call may run (the engine's also reports it as ``action.requested``)."""

    async def __call__(self, request: ApprovalRequest, *, request_id: str, round_index: int | None) -> ApprovalDecision:
        """The host's decision on ``request``."""
        ...


def asker_of(approver: Approver) -> Asker:
    """An :class:`Asker` over a plain approver (``toolkits.Approver``)."""

    async def ask(request: ApprovalRequest, *, request_id: str, round_index: int | None) -> ApprovalDecision:
        return await approver(request)

    return ask


class ApprovalWaitCancelled(asyncio.CancelledError):
    """The round stopped while a call waited for its operation's approval (:meth:`ApprovalGate.check_operation`).

    Still a cancellation; the bridge's core makes it the outcome ``Call.cancelled(awaiting_approval=True)``.
    """


class ApprovalGate:
    """The one approval gate of a session: decides, per call, whether it runs, is asked about, or is refused.

    A call meets it twice, at two stages of the one pipeline: as a wrapper (:meth:`__call__`), under its
    toolkit's grant policy (a blueprint's ``approval``), before the call is journaled; then in the core,
    under its operation's own policy (``@operation(approval=...)``), after its arguments are validated.
    A call its grant's stage asked about and allowed (``Call.approved``) is not asked a second time.

    Args:
        ask: How the host is asked; None: every call that needs asking is denied.
        policies: ``{toolkit: Approval}`` from the blueprint's grants (absent: RUN).
        granted: The session's granted toolkits now (calls of other toolkits are the bridge's to refuse).
        session_id: The session, for the requests.
    """

    def __init__(
        self,
        ask: Asker | None,
        *,
        policies: Mapping[str, str] | None = None,
        granted: Callable[[], Mapping[str, object]] = dict,
        session_id: str = "",
    ) -> None:
        self._ask = ask
        self._policies = {name: Approval.of(word) for name, word in (policies or {}).items()}
        self._granted = granted
        self._session_id = session_id

    @property
    def has_policies(self) -> bool:
        """Whether any grant asks or denies (else the grant's stage is left out of the pipeline)."""
        return any(policy is not Approval.RUN for policy in self._policies.values())

    async def __call__(self, call: Call, call_next: CallNext, /) -> CallOutcome:
        """The grant's stage: apply the toolkit's policy before anything of the call runs."""
        policy = self._policies.get(call.toolkit, Approval.RUN)
        if policy is Approval.RUN or call.toolkit not in self._granted():
            return await call_next(call)  # ungranted calls are refused by the bridge itself, never approved here
        label = f"{call.toolkit}.{call.operation}"
        if policy is Approval.DENY:
            return call.failed(_p.RpcError(_p.APPROVAL_DENIED, f"{label} is denied by the blueprint's approval policy"))
        if self._ask is None:
            decision = ApprovalDecision(allow=False, reason="no approver is configured")
        else:
            try:
                decision = await self._ask(self._request(call, ""), request_id=call.call_id, round_index=call.round)
            except asyncio.CancelledError:  # the round stopped (a queued run pauses so): the call did not run
                return call.cancelled(awaiting_approval=True)
            except Exception as exc:  # a failing approver denies; it never crashes the round
                message = f"{label} was not approved: the approver failed ({type(exc).__name__})"
                return call.failed(_p.RpcError(_p.APPROVAL_DENIED, message))
        if not decision.allow:
            message = f"{label} was not approved: {decision.reason or 'denied'}"
            return call.failed(_p.RpcError(_p.APPROVAL_DENIED, message))
        return await call_next(dataclasses.replace(call, approved=True))

    async def check_operation(self, call: Call, policy: Approval, summary: str) -> None:
        """The operation's stage (the bridge's core, after validation); raises ``RpcError`` when refused."""
        label = f"{call.toolkit}.{call.operation}"
        if policy is Approval.RUN:
            return
        if policy is Approval.DENY:
            raise _p.RpcError(_p.APPROVAL_DENIED, f"{label}() is denied by the host's policy and never runs")
        if call.approved:
            return
        if self._ask is None:
            raise _p.RpcError(
                _p.APPROVAL_DENIED, f"{label}() needs the user's approval, but this host has no approver: denied"
            )
        request = self._request(call, summary)
        try:
            # In its own task: the approver may use timeouts, which need a current task.
            decision = await asyncio.ensure_future(
                self._ask(request, request_id=f"approval-{call.sequence}", round_index=call.round)
            )
        except asyncio.CancelledError:  # the round stopped while it waited: the core records that it did not run
            raise ApprovalWaitCancelled from None
        except Exception as exc:
            raise _p.RpcError(
                _p.APPROVAL_DENIED, f"{label}() was not approved: the approver failed ({type(exc).__name__})"
            ) from None
        if not isinstance(decision, ApprovalDecision) or not decision.allow:
            given = decision.reason if isinstance(decision, ApprovalDecision) else ""
            raise _p.RpcError(_p.APPROVAL_DENIED, f"{label}() was not approved: {given or 'no reason given'}")

    def _request(self, call: Call, description: str) -> ApprovalRequest:
        return ApprovalRequest(
            session_id=self._session_id,
            sequence=call.sequence,
            toolkit=call.toolkit,
            operation=call.operation,
            description=description,
            arguments=dict(call.arguments),
        )
