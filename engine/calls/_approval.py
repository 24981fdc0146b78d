"""How the engine asks its host about a call: ``action.requested``, then the host's approver."""

from __future__ import annotations

import contextvars
from collections.abc import Callable

from codeact.engine.events import ActionRequested, Event
from codeact.toolkits import ApprovalDecision, ApprovalRequest, Approver, Asker

__all__ = ["APPROVAL_REQUEST_ID", "Emit", "ask_approval", "asker"]

Emit = Callable[..., Event]
"""The run's event emitter (``emit(EventType, **fields)``)."""

APPROVAL_REQUEST_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("codeact_approval_id", default=None)
"""While the approver is asked: the ``request_id`` of the ``action.requested`` event it answers."""


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


def asker(approver: Approver | None, emit: Emit) -> Asker:
    """The bridge's :class:`~codeact.toolkits.Asker` for a run: every question is reported, then asked."""

    async def ask(request: ApprovalRequest, *, request_id: str, round_index: int | None) -> ApprovalDecision:
        return await ask_approval(approver, emit, request, request_id=request_id, round_index=round_index)

    return ask
