"""How a run ended, as a value (``RunResult``), and the agent's per-run bookkeeping."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from codeact.engine.errors import CodeactError
from codeact.engine.events import Event, RunCompleted, RunFailed

if TYPE_CHECKING:
    from codeact.engine.agent.context import RunContext
    from codeact.engine.store import SessionLock


@dataclass(frozen=True, kw_only=True)
class RunResult:
    """How a run ended (the last event, as a value).

    Attributes:
        run_id: The run.
        session_id: The session (pass it as ``session_id`` to continue).
        status: ``completed``, ``paused`` (waiting for the user) or ``failed``.
        answer: The final answer, or the question when paused.
        reason: Why it ended (``finished``, ``ask_user``, ``max_turns``, ``stuck``, ...).
        rounds: Rounds recorded in the session so far.
        error: ``{"code", "message"}`` when failed.
        variables: The session's variables when the run ended, decoded to plain JSON.
        messages: The session's conversation as ``{"role", "content"}`` messages (user messages,
            the agent's messages and its answer).
    """

    run_id: str
    session_id: str
    status: Literal["completed", "paused", "failed"]
    answer: Any = None
    reason: str = ""
    rounds: int = 0
    error: dict[str, Any] | None = None
    variables: dict[str, Any] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(default_factory=list)


_RETRYABLE_STORE_CODES = frozenset({"store.unavailable", "store.busy", "store.session_busy"})


def _gone_reason(lock: SessionLock) -> str:
    """Why the session's previous run stopped mid-round, as far as the lock tells."""
    if lock.took_over is not None:
        return f"its run's process {lock.took_over.owner} died"
    return "its run stopped before recording it: the host process died, the store became unavailable, or the run failed"


def _retryable(exc: CodeactError) -> bool:
    """Model errors say so themselves; a store outage or a busy session may pass too."""
    flag = getattr(exc, "retryable", None)
    if isinstance(flag, bool):
        return flag
    return exc.code in _RETRYABLE_STORE_CODES


@dataclass
class _DriveState:
    started: bool = False
    ctx: RunContext | None = None
    stopping: bool = False  # the run's consumer left: no round may start
    cancelled: bool = False  # the run took the cancel and is recording what it did
    history: tuple[tuple[str, str], ...] = ()  # the input's history messages, as (segment kind, text)
    labels: dict[str, Any] = field(default_factory=dict)  # RunConfig.labels(): thread_id, tags, metadata
    context: str | None = None  # the caller's context (Agent.run(context=...)), as the Context segment's text
    files: tuple[Any, ...] = ()  # the input's files and images (engine/agent/_files.py InputFile)

    def stop(self) -> None:
        self.stopping = True
        if self.ctx is not None:
            self.ctx.stopping = True


def _result(last: Event | None, session_id: str) -> RunResult:
    if isinstance(last, RunCompleted):
        status: Literal["completed", "paused"] = "paused" if last.reason == "ask_user" else "completed"
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status=status,
            answer=last.answer,
            reason=last.reason,
            rounds=last.rounds,
        )
    if isinstance(last, RunFailed):
        return RunResult(
            run_id=last.run_id,
            session_id=session_id,
            status="failed",
            reason=str(last.error.get("code", "")),
            rounds=last.rounds,
            error=dict(last.error),
        )
    raise CodeactError("the run ended without run.completed or run.failed (engine bug: please report it)")
