"""The result envelope (AgentRunner protocol v1): what a run streams back, one envelope per event.

Every envelope has ``run_id``, ``type``, ``data`` (the type's payload), optional ``usage``,
``sequence`` (1, 2, ... per run), ``timestamp`` (unix seconds, whole: protocol v1's int, so an SDK host
validates the stream as it comes), ``at`` (the same instant as a float to the millisecond: codeact's one
time format, as ``GET /v1/runs``' ``started_at`` and a JSON log line's ``at``) and, on a result that
belongs to a message, ``parent_id``: the ``resp_message_id`` of the model's reply whose code made a tool
call, or from which a thought part was taken. ``at`` and ``parent_id`` are codeact's fields beside the
SDK's, which ignores envelope fields it does not know. The payload of every known type
is strict (:data:`PAYLOADS`, ``extra="forbid"``); the envelope itself is forward compatible: a
consumer accepts a ``type`` it does not know (and ignores it, as the seed says the host must).
Names and shapes follow the ``langbot-plugin`` SDK (0.7, ``RunnerResult``).
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from codeact.engine.runner.entities.errors import RUNNER_ERROR_CODES
from codeact.engine.runner.entities.interaction import INTERACTION_REQUESTED_ACTION, InteractionRequest

__all__ = [
    "PAYLOADS",
    "RESULT_TYPES",
    "ActionRequestedPayload",
    "ArtifactCreatedPayload",
    "Message",
    "MessageChunk",
    "MessageCompletedPayload",
    "MessageDeltaPayload",
    "ProcessorLogPayload",
    "RunCompletedPayload",
    "RunFailedPayload",
    "RunnerResult",
    "StateUpdatedPayload",
    "TokenUsage",
    "ToolCallCompletedPayload",
    "ToolCallStartedPayload",
]

_STRICT = ConfigDict(extra="forbid")


class TokenUsage(BaseModel):
    """Tokens a run (or one result) used; provider extras are kept. Missing means unknown, not zero."""

    model_config = ConfigDict(extra="allow")

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class Message(BaseModel):
    """A complete message (``content`` is text here; hosts may send content elements).

    ``provider_specific_fields`` is the SDK's open dict of a message; codeact puts the message's
    purpose there (``{"purpose": "answer" | "message" | "work"}``, docs/runner.md).
    """

    model_config = _STRICT

    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    tool_call_id: str | None = None
    resp_message_id: str | None = None
    provider_specific_fields: dict[str, Any] | None = None


class MessageChunk(BaseModel):
    """A piece of a streamed message (``msg_sequence`` counts the chunks of one message)."""

    model_config = _STRICT

    role: str
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None
    resp_message_id: str | None = None
    all_content: str | None = None
    is_final: bool = False
    msg_sequence: int = 0
    provider_specific_fields: dict[str, Any] | None = None


class MessageDeltaPayload(BaseModel):
    """``message.delta``: a streamed chunk."""

    model_config = _STRICT

    chunk: MessageChunk


class MessageCompletedPayload(BaseModel):
    """``message.completed``: a whole message."""

    model_config = _STRICT

    message: Message
    file_ids: list[str] = Field(default_factory=list, max_length=100)


class ToolCallStartedPayload(BaseModel):
    """``tool.call.started``: the runner began a tool call (observability)."""

    model_config = _STRICT

    tool_call_id: str
    tool_name: str
    parameters: dict[str, Any] = Field(default_factory=dict)


class ToolCallCompletedPayload(BaseModel):
    """``tool.call.completed``: the call returned (``result``) or failed (``error``)."""

    model_config = _STRICT

    tool_call_id: str
    tool_name: str
    result: dict[str, Any] | None = None
    error: str | None = None


class ArtifactCreatedPayload(BaseModel):
    """``artifact.created``: the run produced a file (seed type; fetched from ``uri``)."""

    model_config = _STRICT

    artifact_id: str
    name: str
    mime_type: str
    size: int
    uri: str = ""
    refused: str | None = None


class StateUpdatedPayload(BaseModel):
    """``state.updated``: the runner asks the host to persist a small JSON value."""

    model_config = _STRICT

    scope: Literal["conversation", "actor", "subject", "runner"]
    key: str = Field(min_length=1, max_length=255)
    value: JsonValue


class ActionRequestedPayload(BaseModel):
    """``action.requested``: the runner asks the host to act (``interaction.requested`` asks the user)."""

    model_config = _STRICT

    action: str = Field(min_length=1)
    target: dict[str, Any] | None = None
    payload: dict[str, Any] | None = None


class RunCompletedPayload(BaseModel):
    """``run.completed``: the run ended normally (``finish_reason`` ``ask_user`` = waiting for an answer)."""

    model_config = _STRICT

    finish_reason: str = "stop"
    message: Message | None = None


class RunFailedPayload(BaseModel):
    """``run.failed``: the run failed; ``code`` is a ``runner.*`` code or ``cancelled``."""

    model_config = _STRICT

    error: str
    code: str = "runner.error"
    retryable: bool = False


class ProcessorLogPayload(BaseModel):
    """``processor.log`` (SDK type): a log line for the host, never a platform message."""

    model_config = _STRICT

    text: str = Field(max_length=65536)
    level: Literal["debug", "info", "warning", "error"] = "info"


PAYLOADS: dict[str, type[BaseModel]] = {
    "message.delta": MessageDeltaPayload,
    "message.completed": MessageCompletedPayload,
    "tool.call.started": ToolCallStartedPayload,
    "tool.call.completed": ToolCallCompletedPayload,
    "artifact.created": ArtifactCreatedPayload,
    "state.updated": StateUpdatedPayload,
    "action.requested": ActionRequestedPayload,
    "run.completed": RunCompletedPayload,
    "run.failed": RunFailedPayload,
    "processor.log": ProcessorLogPayload,
}
"""The strict payload model of every known result type."""

RESULT_TYPES: frozenset[str] = frozenset(PAYLOADS)
"""The result types this package knows (the seed's v1 types and the SDK's ``processor.log``)."""

TERMINAL_TYPES = frozenset({"run.completed", "run.failed"})


class RunnerResult(BaseModel):
    """One envelope of a run's result stream.

    Build one with the constructors (``RunnerResult.run_failed(...)``), which validate the payload;
    ``RunnerResult.model_validate(data)`` accepts any ``type`` (forward compatible) and
    :meth:`payload` validates the data of a known one.

    Attributes:
        run_id: The run.
        type: The result type (``message.delta``, ..., ``run.failed``, or one this version does not know).
        data: The type's payload.
        usage: Token usage (the terminal result carries the run's total when known).
        sequence: 1, 2, ... within the run.
        timestamp: Unix seconds, whole (protocol v1's int).
        at: The same instant, unix seconds as a float to the millisecond (codeact's time format).
        parent_id: The ``resp_message_id`` of the message this result belongs to (a tool call: the reply
            whose code made it; a thought part: the reply it was taken from), None for the others.
    """

    model_config = ConfigDict(extra="ignore")

    run_id: str
    type: str
    data: dict[str, Any] = Field(default_factory=dict)
    usage: TokenUsage | None = None
    sequence: int | None = None
    timestamp: int | None = None
    at: float | None = None
    parent_id: str | None = None

    @property
    def known(self) -> bool:
        """Whether this version knows the type (unknown types are to be ignored by a consumer)."""
        return self.type in PAYLOADS

    @property
    def terminal(self) -> bool:
        """Whether this is the run's last result (``run.completed`` or ``run.failed``)."""
        return self.type in TERMINAL_TYPES

    def payload(self) -> BaseModel | None:
        """The data as its strict payload model; None for an unknown type.

        Raises:
            pydantic.ValidationError: The data does not fit the type's payload.
        """
        model = PAYLOADS.get(self.type)
        return None if model is None else model.model_validate(self.data)

    def to_json(self) -> dict[str, Any]:
        """The envelope as JSON (``usage`` left out when unknown)."""
        return self.model_dump(mode="json", exclude_none=True)

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def make(
        cls,
        run_id: str,
        type: str,
        data: BaseModel | dict[str, Any],
        *,
        sequence: int | None = None,
        usage: TokenUsage | dict[str, Any] | None = None,
        timestamp: float | None = None,
        parent_id: str | None = None,
    ) -> RunnerResult:
        """An envelope with ``data`` validated against the payload of ``type`` (when known)."""
        if isinstance(data, BaseModel):
            payload = data.model_dump(mode="json", exclude_none=type == "run.completed")
        else:
            model = PAYLOADS.get(type)
            checked = model.model_validate(data) if model is not None else None
            payload = checked.model_dump(mode="json", exclude_none=True) if checked is not None else dict(data)
        now = time.time() if timestamp is None else timestamp
        return cls(
            run_id=run_id,
            type=type,
            data=payload,
            usage=TokenUsage.model_validate(usage) if isinstance(usage, dict) else usage,
            sequence=sequence,
            timestamp=int(now),
            at=int(now * 1000) / 1000,  # truncated, as `timestamp` is: rounding up could pass the next second
            parent_id=parent_id,
        )

    @classmethod
    def run_failed(
        cls,
        run_id: str,
        error: str,
        *,
        code: str = "runner.error",
        retryable: bool = False,
        sequence: int | None = None,
        usage: TokenUsage | dict[str, Any] | None = None,
    ) -> RunnerResult:
        """A ``run.failed`` envelope (``code``: a ``runner.*`` code or ``cancelled``).

        Raises:
            ValueError: ``code`` is not one of ``RUNNER_ERROR_CODES``.
        """
        if code not in RUNNER_ERROR_CODES:
            raise ValueError(
                f"run.failed code {code!r} is not a protocol code; use one of {sorted(RUNNER_ERROR_CODES)}"
            )
        return cls.make(
            run_id,
            "run.failed",
            RunFailedPayload(error=error, code=code, retryable=retryable),
            sequence=sequence,
            usage=usage,
        )

    @classmethod
    def interaction_requested(
        cls, run_id: str, request: InteractionRequest, *, sequence: int | None = None
    ) -> RunnerResult:
        """An ``action.requested`` envelope asking the user (``action`` = ``interaction.requested``)."""
        return cls.make(
            run_id,
            "action.requested",
            ActionRequestedPayload(action=INTERACTION_REQUESTED_ACTION, payload=request.model_dump(mode="json")),
            sequence=sequence,
        )
