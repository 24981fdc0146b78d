"""The engine's toolkit-call pipeline: the run's bridge with its wrappers composed once.

One toolkit call goes ``sandbox channel -> ToolkitBridge.handle -> wrappers -> the bridge's core -> the
operation`` and back; nothing of it runs in ``engine/agent/``. :func:`call_bridge` builds the run's
bridge and composes, once, the wrappers that need the engine (``_wrappers.py``)::

    CallIds -> CallEvents -> CallSpan -> CallLog -> JournalStages.behind -> FromRecord (a resumed run's)
        -> ApprovalGate (the grant's stage) -> JournalStages.ahead -> Interceptors -> the bridge's budgets
        -> its core (authorize, rate limit, validate, ApprovalGate (the operation's stage), invoke)

Every call gets its stable id (``"{session}:{round}:{sequence in the round}"``) in its events, its record
and ``ToolkitContext.call_id``; it is recorded once (``ToolkitBridge.drain_calls``: every call with exactly
the result or error the code got, including calls refused before the core, so replay answers them the
same way). With a journal, a call's start is durable before the operation runs and its completion
before the result is returned to the sandbox. In a run that resumes an interrupted round, a call the
interrupted round completed is answered from its record when the resuming round makes it again
(:class:`FromRecord`): it is not done twice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from codeact.engine.calls._approval import APPROVAL_REQUEST_ID, Emit, ask_approval, asker
from codeact.engine.calls._journal import CLEANUP_S, CallJournal
from codeact.engine.calls._wrappers import (
    CallEvents,
    CallIds,
    CallJournalSink,
    CallSpan,
    FromRecord,
    Interceptors,
    JournalStages,
    ToolCall,
    ToolInterceptor,
)
from codeact.engine.telemetry import RunTrace
from codeact.toolkits import (
    Approval,
    Approver,
    CallBudgets,
    CallLog,
    CallWrapper,
    Grants,
    ToolkitBridge,
    ToolkitContext,
    ToolkitRegistry,
)

__all__ = [
    "APPROVAL_REQUEST_ID",
    "CLEANUP_S",
    "CallJournal",
    "CallJournalSink",
    "Emit",
    "Resumed",
    "ToolCall",
    "ToolInterceptor",
    "ask_approval",
    "call_bridge",
    "grant_policy",
]


def grant_policy(approval: str | None) -> Approval:
    """A blueprint grant's approval word in the one vocabulary (``Approval.of``: unknown words ask)."""
    return Approval.of(approval)


@dataclass(frozen=True, kw_only=True)
class Resumed:
    """The interrupted round a run resumes, as its call pipeline needs it.

    Attributes:
        interrupted: The interrupted round's index (the resuming round's calls keep its ids).
        first_round: The run's first round, the one that resumes it.
        calls: The interrupted round's calls as recorded (``CallRecord.to_json()``): those that completed
            with a result answer the same calls of the resuming round (:class:`FromRecord`).
        answered: Told each call answered from the record, with that record (the model is told).
    """

    interrupted: int
    first_round: int
    calls: Sequence[Mapping[str, object]] = ()
    answered: Callable[[Mapping[str, object]], None] | None = None


def call_bridge(
    toolkits: ToolkitRegistry | Iterable[object],
    *,
    grants: Grants | None,
    context: ToolkitContext,
    budgets: CallBudgets | None,
    emit: Emit,
    round_ref: Callable[[], int],
    policies: Mapping[str, str],
    approver: Approver | None,
    interceptors: Sequence[object] = (),
    trace: Callable[[], RunTrace] | None = None,
    journal: Callable[[], CallJournalSink | None] | None = None,
    resumes: Resumed | None = None,
) -> ToolkitBridge:
    """The run's toolkit bridge, with the engine's call wrappers composed once; the sandbox serves it.

    Args:
        toolkits: The registry (or toolkits) the run's calls are served from.
        grants: The run's grants (``ToolkitBridge``).
        context: The ``ToolkitContext`` operations get.
        budgets: The calls and bridge bytes a round and the run may use.
        emit: The run's event emitter (``tool.call.*``, ``action.requested``).
        round_ref: The current round.
        policies: ``{toolkit: approval word}`` of the blueprint's grants.
        approver: The host's approver (None: every call that needs asking is denied, with the reason).
        interceptors: The host's hooks; those with ``intercept_tool`` wrap each call, the first outermost.
        trace: The run's spans (each call gets one).
        journal: The run's call journal now (each call's start and end are durable before it goes on).
        resumes: The interrupted round the run resumes (its first round's calls keep that round's ids, and
            those the interrupted round completed are answered from its record); None otherwise.
    """
    bridge = ToolkitBridge(
        toolkits,
        grants=grants,
        context=context,
        asker=asker(approver, emit),
        policies=policies,
        record=False,  # the run's log is below (CallLog): every call, with its id, as the code got it
        call_events=False,  # CallEvents reports them, including the ones refused before the core
        budgets=budgets,
    )
    chain = Interceptors(interceptors)
    log = CallLog(bridge.record_of)
    durable = JournalStages(journal if journal is not None else _no_journal, record=bridge.record_of)
    ids = (resumes.interrupted, resumes.first_round) if resumes is not None else None
    recorded: list[CallWrapper] = []
    if resumes is not None and resumes.calls:
        recorded.append(FromRecord(resumes.calls, round_index=resumes.first_round, answered=resumes.answered))
    wrappers: list[CallWrapper] = [
        CallIds(bridge.session_id, round_ref=round_ref, resumes=ids),
        CallEvents(emit),
        CallSpan(trace, interceptors=chain.names),
        log,
        durable.behind,
        *recorded,
        bridge.gate,
        durable.ahead,
        chain,
    ]
    bridge.use(wrappers, log=log)
    return bridge


def _no_journal() -> None:
    return None
