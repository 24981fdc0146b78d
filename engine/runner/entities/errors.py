"""The protocol's error model: run failures (``runner.*``, ``cancelled``) and host API errors.

A run that fails ends with ``run.failed`` whose ``code`` is one of :data:`RUNNER_ERROR_CODES`
(``runner.timeout`` when ``runtime.deadline_at`` passed, ``cancelled`` when the host cancelled it)
and whose ``retryable`` says whether the same run may succeed later. A run-scoped host API call
fails with an :class:`AgentAPIError` (``unauthorized``, ``deadline_exceeded``, ...), raised in
Python as :class:`RunnerAPIError`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from codeact.engine.errors import CodeactError

__all__ = [
    "API_ERROR_CODES",
    "RUNNER_ERROR_CODES",
    "AgentAPIError",
    "RunnerAPIError",
    "RunnerError",
]

RUNNER_ERROR_CODES: frozenset[str] = frozenset(
    {
        "runner.error",  # anything else (the message says what)
        "runner.timeout",  # runtime.deadline_at passed (retryable)
        "runner.invalid_context",  # the context cannot be run (no input, bad config)
        "runner.model_error",  # the model failed after retries (retryable when the provider says so)
        "runner.store_error",  # the session store failed
        "runner.sandbox_error",  # the sandbox could not run the code
        "runner.toolkit_error",  # a toolkit could not be loaded or served
        "runner.session_busy",  # another run holds the conversation's session (retryable)
        "runner.interaction_not_found",  # an answer for a request no run waits for
        "runner.invalid_interaction",  # an answer that does not fit its request
        "cancelled",  # the host cancelled the run
    }
)
"""The ``code`` values of ``run.failed`` (and of :class:`RunnerError`)."""

API_ERROR_CODES: frozenset[str] = frozenset(
    {
        "unauthorized",
        "not_found",
        "deadline_exceeded",
        "payload_too_large",
        "rate_limited",
        "invalid_argument",
        "runtime_error",
    }
)
"""The ``code`` values of :class:`AgentAPIError` (seed section 8)."""


class AgentAPIError(BaseModel):
    """A host API error as it travels (forward compatible: unknown keys are ignored).

    Attributes:
        code: One of :data:`API_ERROR_CODES` (hosts may add their own, ``host.*``).
        message: What failed, for a person.
        retryable: Whether the same call may succeed later.
        details: Structured extras (the resource, the operation).
    """

    model_config = ConfigDict(extra="ignore")

    code: str
    message: str
    retryable: bool = False
    details: dict[str, Any] = Field(default_factory=dict)


class RunnerError(CodeactError):
    """A runner-level failure (``code`` is one of :data:`RUNNER_ERROR_CODES`).

    Args:
        message: What failed and what to do.
        code: The protocol code.
        retryable: Whether retrying the same run may succeed.
    """

    code = "runner.error"

    def __init__(self, message: str, *, code: str = "runner.error", retryable: bool = False) -> None:
        super().__init__(message, code=code)
        self.retryable = retryable


class RunnerAPIError(RunnerError):
    """A run-scoped host API call failed or was refused before it left (``error`` is the wire form)."""

    def __init__(self, error: AgentAPIError) -> None:
        super().__init__(error.message, code=error.code, retryable=error.retryable)
        self.error = error

    @classmethod
    def make(cls, code: str, message: str, *, retryable: bool = False, **details: Any) -> RunnerAPIError:
        """Build one from its parts."""
        return cls(AgentAPIError(code=code, message=message, retryable=retryable, details=details))
