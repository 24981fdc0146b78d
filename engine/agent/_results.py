"""How a run ended, as a value (``RunResult``), read from its last event."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from codeact.engine.errors import CodeactError
from codeact.engine.events import Event, RunCompleted, RunFailed


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """How a run ended (the last event, as a value).

    Attributes:
        run_id: The run.
        session_id: The session (pass it as ``session_id`` to continue).
        status: ``completed``, ``paused`` (waiting for the user) or ``failed``.
        answer: The final answer, or the question when paused (a flow paused by ``interruptBefore``: the
            latest result).
        reason: Why it ended (``finished``, ``ask_user``, ``interrupt_before``, ``max_turns``, ``stuck``, ...).
        rounds: Rounds this run recorded (``session_rounds``: the session's, earlier runs included).
        error: ``{"code", "message"}`` when failed.
        variables: The session's variables when the run ended, decoded to plain JSON.
        messages: The session's conversation as ``{"role", "content"}`` messages (user messages,
            the agent's messages and its answer).
        metadata: The run's metadata as the caller gave it (``RunConfig.metadata``, ``--meta``).
    """

    run_id: str
    session_id: str
    status: Literal["completed", "paused", "failed"]
    answer: object = None
    reason: str = ""
    rounds: int = 0
    session_rounds: int = 0
    error: dict[str, object] | None = None
    variables: dict[str, object] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)
    metadata: dict[str, object] = field(default_factory=dict)


PAUSE_REASONS = frozenset({"ask_user", "interrupt_before"})
"""``run.completed`` reasons that leave the run ``paused``: a question for the user, a flow's ``interruptBefore``."""


def _result(last: Event | None, session_id: str, *, metadata: Mapping[str, object] | None = None) -> RunResult:
    if isinstance(last, RunCompleted):
        status: Literal["completed", "paused"] = "paused" if last.reason in PAUSE_REASONS else "completed"
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status=status,
            answer=last.answer,
            reason=last.reason,
            rounds=last.rounds if last.run_rounds is None else last.run_rounds,
            session_rounds=last.rounds,
            metadata=dict(metadata or {}),
        )
    if isinstance(last, RunFailed):
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status="failed",
            reason=str(last.error.get("code", "")),
            rounds=last.rounds if last.run_rounds is None else last.run_rounds,
            session_rounds=last.rounds,
            error=dict(last.error),
            metadata=dict(metadata or {}),
        )
    raise CodeactError("the run ended without run.completed or run.failed (engine bug: please report it)")
