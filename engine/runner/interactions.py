"""Interaction requests of a run (approvals, ``ask_user``) and the answers the host submits.

The rule (docs/runner.md, "Interactions"):

- **An approval waits in place.** A call that needs approval emits ``action.requested``
  (``interaction.requested``, kind ``confirmation``, ``interaction_id`` = the call's request id);
  the run waits until the host calls :meth:`Interactions.submit` or ``deadline_at`` passes
  (then ``run.failed`` / ``runner.timeout``).
- **A question ends the run.** ``system.ask_user(question)`` emits ``action.requested``
  (kind ``form``, one ``answer`` field), then ``run.completed`` with ``finish_reason``
  ``ask_user``. Nothing waits: the answer is a new run of the same conversation (same session,
  same variables) whose event is ``interaction.submitted`` with ``input.interaction`` = the
  submission (see :func:`continuation_context`), or simply the next message.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from codeact.engine.runner.entities import (
    INTERACTION_SUBMITTED_EVENT,
    AgentEventContext,
    AgentInput,
    AgentTrigger,
    InteractionAction,
    InteractionField,
    InteractionRequest,
    InteractionSubmission,
    RunnerContext,
    RunnerError,
)
from codeact.toolkits import ApprovalDecision

__all__ = [
    "Interactions",
    "approval_request",
    "continuation_context",
    "decision_from",
    "question_request",
]

_APPROVE, _DENY = "approve", "deny"


def _short(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def approval_request(
    request_id: str, *, toolkit: str, operation: str, arguments: Mapping[str, Any], expires_at: float | None = None
) -> InteractionRequest:
    """The confirmation asked before ``toolkit.operation(**arguments)`` runs."""
    args = ", ".join(f"{name}={_short(value, 200)}" for name, value in arguments.items())
    call = f"{toolkit}.{operation}({args})"
    return InteractionRequest(
        interaction_id=request_id,
        kind="confirmation",
        title=_short(f"Allow {toolkit}.{operation}?", 1000),
        description=_short(f"The agent wants to call {call}.", 10000),
        fields=[InteractionField(id="reason", label="Reason (optional)", type="text")],
        actions=[
            InteractionAction(id=_APPROVE, label="Approve", style="primary"),
            InteractionAction(id=_DENY, label="Deny", style="danger"),
        ],
        expires_at=None if expires_at is None else int(expires_at),
        fallback_text=_short(f"Approval needed: {call}. Answer approve or deny.", 20000),
    )


def question_request(request_id: str, question: str) -> InteractionRequest:
    """The form asking the user ``question`` (the run has ended; the answer starts the next run)."""
    text = question.strip() or "The agent needs more information."
    return InteractionRequest(
        interaction_id=request_id,
        kind="form",
        title=_short(text.splitlines()[0], 1000),
        description=_short(text, 10000),
        fields=[InteractionField(id="answer", label="Answer", type="textarea", required=True)],
        actions=[InteractionAction(id="submit", label="Send", style="primary")],
        fallback_text=_short(text, 20000),
    )


def decision_from(data: Mapping[str, Any]) -> ApprovalDecision:
    """An approval decision from a submitted answer.

    Accepted shapes: an interaction submission (``{"action_id": "approve" | "deny", "values":
    {"reason": ...}}``) or ``{"allow": bool, "reason": str}`` (``approved`` is read as ``allow``).

    Raises:
        RunnerError: ``runner.invalid_interaction`` when neither shape fits.
    """
    values = data.get("values")
    reason = ""
    if isinstance(values, Mapping) and isinstance(values.get("reason"), str):
        reason = values["reason"]
    if isinstance(data.get("reason"), str):
        reason = data["reason"]
    action = data.get("action_id")
    if action in (_APPROVE, _DENY):
        return ApprovalDecision(allow=action == _APPROVE, reason=reason or ("approved" if action == _APPROVE else ""))
    for key in ("allow", "approved"):
        flag = data.get(key)
        if isinstance(flag, bool):
            return ApprovalDecision(allow=flag, reason=reason or ("approved" if flag else ""))
    raise RunnerError(
        f"an approval answer needs action_id 'approve' or 'deny' (or allow: true/false); got keys {sorted(data)}",
        code="runner.invalid_interaction",
    )


class Interactions:
    """The open interaction requests of one run, and the way to answer them.

    The host (``codeact serve``, a queue worker) creates one per run, passes it to
    ``BlueprintRunner.run(..., interactions=...)``, lists :meth:`pending` and answers with
    :meth:`submit`. All methods run on the run's event loop.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, tuple[dict[str, Any], asyncio.Future[dict[str, Any]]]] = {}

    def pending(self) -> list[dict[str, Any]]:
        """The requests waiting for an answer, as sent in ``action.requested`` (``payload``)."""
        return [dict(request) for request, future in self._waiting.values() if not future.done()]

    def submit(self, request_id: str, data: Mapping[str, Any]) -> None:
        """Answer the request ``request_id``; the waiting run resumes.

        Raises:
            RunnerError: ``runner.interaction_not_found`` when no run waits for ``request_id``;
                ``runner.invalid_interaction`` when ``data`` does not answer an approval.
        """
        entry = self._waiting.get(request_id)
        if entry is None or entry[1].done():
            waiting = sorted(k for k, (_, f) in self._waiting.items() if not f.done())
            raise RunnerError(
                f"no interaction {request_id!r} is waiting for an answer (waiting: {waiting or 'none'}); "
                "a question (ask_user) ended its run: answer it with a new run of the same conversation",
                code="runner.interaction_not_found",
            )
        request, future = entry
        if request.get("kind") == "confirmation":
            decision_from(data)  # refuse a malformed answer here, while the caller can still fix it
        future.set_result(dict(data))

    async def wait(self, request: InteractionRequest) -> dict[str, Any]:
        """Register ``request`` and wait for its answer (used by the runner; cancelled with the run)."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request.interaction_id] = (request.model_dump(mode="json"), future)
        try:
            return await future
        finally:
            self._waiting.pop(request.interaction_id, None)

    def close(self) -> None:
        """Cancel every waiting request (the run ended)."""
        for _, future in self._waiting.values():
            if not future.done():
                future.cancel()
        self._waiting.clear()


def continuation_context(
    context: RunnerContext, submission: InteractionSubmission | Mapping[str, Any], *, run_id: str
) -> RunnerContext:
    """The context of the run that carries the answer to a question (same conversation, same session).

    Args:
        context: The context of the run that asked (its conversation, actor, delivery, resources).
        submission: The answer (``interaction_id``, ``values`` with ``answer``).
        run_id: The new run's id.
    """
    answer = InteractionSubmission.model_validate(submission)
    event = AgentEventContext(
        event_id=f"{run_id}-answer",
        event_type=INTERACTION_SUBMITTED_EVENT,
        source=context.event.source,
        data={"interaction_id": answer.interaction_id},
    )
    return context.model_copy(
        update={
            "run_id": run_id,
            "trigger": AgentTrigger(type=INTERACTION_SUBMITTED_EVENT, source=context.trigger.source),
            "event": event,
            "input": AgentInput(interaction=answer),
        }
    )


def answer_text(submission: InteractionSubmission) -> str:
    """The user's answer as text: ``values["answer"]``, else the values as JSON, else the action id."""
    answer = submission.values.get("answer")
    if isinstance(answer, str):
        return answer
    if submission.values:
        return json.dumps(submission.values, ensure_ascii=False)
    return submission.action_id or ""
