"""The contract the two run managers share: an interaction body, a question's answer, its continuation.

The service's manager (``engine.service._runs``) and the queue's (``engine.queue._manager``) both
read them through these functions, so the two APIs answer alike.

Its only product import at module level is ``engine.service.errors`` (itself importing only the
leaf ``prompts.errors``); the runner's names are imported where a function needs them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codeact.engine.service.errors import ServiceError

if TYPE_CHECKING:
    from codeact.engine.runner import RunnerContext

__all__ = ["continuation_run_id", "interaction_submission", "question_answer", "with_budget"]


def question_answer(request_id: str, answer: Mapping[str, Any]) -> dict[str, Any]:
    """The interaction submission answering a question (``values.answer`` a non-empty text).

    Accepts ``{"values": {"answer": ...}}`` (the protocol's submission) or ``{"answer": ...}``.

    Raises:
        RunnerError: ``runner.invalid_interaction`` without an answer.
    """
    from codeact.engine.runner import RunnerError

    values = answer.get("values") if isinstance(answer.get("values"), Mapping) else {}
    text = values.get("answer", answer.get("answer")) if isinstance(values, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        raise RunnerError(
            'the answer to a question is {"interaction_id": ..., "action_id": "submit", '
            '"values": {"answer": "<text>"}} with a non-empty answer',
            code="runner.invalid_interaction",
        )
    return {"interaction_id": request_id, "action_id": "submit", "values": {**dict(values or {}), "answer": text}}


def continuation_run_id(data: Mapping[str, Any]) -> str:
    """The run id of a question's continuation: the body's ``run_id`` when it gives one, else a fresh one."""
    import re

    given = data.get("run_id")
    if isinstance(given, str) and given:
        if not re.fullmatch(r"[A-Za-z0-9._:\-]{1,128}", given):
            raise ServiceError(
                f"run_id {given[:140]!r} must be 1-128 letters, digits or '._:-' (it names the run in URLs)",
                code="service.invalid_request",
                status=422,
            )
        return given
    return f"run-{uuid.uuid4().hex}"


def with_budget(context: RunnerContext, asked: RunnerContext, started_at: float) -> RunnerContext:
    """``context`` with the time budget of the run that asked (its ``deadline_at`` less its start), from now."""
    deadline = asked.runtime.deadline_at
    if deadline is None:
        return context
    budget = max(1.0, float(deadline) - started_at)
    runtime = context.runtime.model_copy(update={"deadline_at": time.time() + budget})
    return context.model_copy(update={"runtime": runtime})


def interaction_submission(data: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``(request id, answer)`` of an interaction body."""
    if isinstance(data.get("interaction_id"), str) and data["interaction_id"]:
        return data["interaction_id"], dict(data)
    request_id, answer = data.get("request_id"), data.get("data", {})
    if isinstance(request_id, str) and request_id and isinstance(answer, dict):
        return request_id, answer
    raise ServiceError(
        'an interaction is {"interaction_id": "<from action.requested>", "action_id": "approve", "values": {...}} '
        '(or {"request_id": ..., "data": {...}})',
        code="service.invalid_request",
        status=422,
    )
