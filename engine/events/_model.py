"""The event records, their JSON form and the per-run sequence that stamps them."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from codeact.engine.errors import CodeactError, ErrorInfo

_E = TypeVar("_E", bound="Event")
_ENVELOPE = ("type", "run_id", "sequence", "timestamp", "parent_run_id")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every event: the envelope.

    Attributes:
        type: The protocol name (``"round.started"``), fixed per class.
        run_id: The run this event belongs to.
        sequence: 1, 2, 3, ... within the run.
        timestamp: Unix time (seconds) at which the event was emitted.
        parent_run_id: The run of the flow this run is a step of (``codeact.engine.flow``), None for a
            top-level run; in JSON only when set.
    """

    type: ClassVar[str] = ""

    run_id: str
    sequence: int
    timestamp: float
    parent_run_id: str | None = None

    def payload(self) -> dict[str, Any]:
        """The event's own fields (everything but the envelope), JSON-able."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name not in _ENVELOPE}

    def to_json(self) -> dict[str, Any]:
        """``{"type", "run_id", "sequence", "timestamp", **payload}``."""
        return {
            "type": self.type,
            "run_id": self.run_id,
            "sequence": self.sequence,
            "timestamp": self.timestamp,
            **({"parent_run_id": self.parent_run_id} if self.parent_run_id is not None else {}),
            **self.payload(),
        }

    def to_json_line(self) -> str:
        """``to_json()`` as one compact line of JSON (no trailing newline); non-JSON values become strings."""
        return json.dumps(self.to_json(), separators=(",", ":"), ensure_ascii=False, default=str)


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(item) for item in value]
    return value


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    """A run began (first event of every run).

    Attributes:
        session_id: The session the run records into.
        blueprint_id: The agent's blueprint id.
        model: The model used for code.
        input: The user's input.
        resumed: True when the session already had rounds (``--session`` of an existing one).
        tags: The run's tags (``RunConfig.tags``, ``--tag``).
        metadata: The run's metadata (``RunConfig.metadata``, ``--meta k=v``).
        trace_id: The run's trace: its OpenTelemetry trace id (32 hex digits) when tracing is on, else
            the run id; toolkits see it as ``ToolkitContext.trace_id``, the session record as
            ``extra["trace_id"]`` (of its latest run).
        layout: The chat code prompt's layout (``frame`` or ``turns``); empty for react and raw completion.
        layout_reason: Why that layout (``workflow.codeact.layout``, ``qwen2.5-coder-1.5b, a known model``).
    """

    type: ClassVar[str] = "run.started"

    session_id: str
    blueprint_id: str = ""
    model: str = ""
    input: str = ""
    resumed: bool = False
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    layout: str = ""
    layout_reason: str = ""


@dataclass(frozen=True, kw_only=True)
class RoundStarted(Event):
    """A round began.

    Attributes:
        round: The 1-based round index within the session.
    """

    type: ClassVar[str] = "round.started"

    round: int


@dataclass(frozen=True, kw_only=True)
class SegmentCreated(Event):
    """A segment (User, Thought, Code, Evaluation, ...) was added to the session.

    Attributes:
        segment: The segment as its JSON dict (has ``"id"`` and ``"kind"``).
        round: The round it belongs to, if any.
    """

    type: ClassVar[str] = "segment.created"

    segment: dict[str, Any]
    round: int | None = None


@dataclass(frozen=True, kw_only=True)
class MessageDelta(Event):
    """A chunk of a streamed model reply.

    Attributes:
        text: The new text.
        purpose: Which model route produced it (``"code"``, ``"thought"``, ``"utility"``, ``"answer"``).
        round: The round, if any.
    """

    type: ClassVar[str] = "message.delta"

    text: str
    purpose: str = "code"
    round: int | None = None


@dataclass(frozen=True, kw_only=True)
class MessageCompleted(Event):
    """A complete model reply (or the final message to the user).

    Attributes:
        text: The whole reply.
        purpose: As in ``MessageDelta``.
        round: The round, if any.
        model: The model that produced it.
        usage: Tokens/cost of the call when known (``prompt_tokens``, ``completion_tokens``, ``cost``).
    """

    type: ClassVar[str] = "message.completed"

    text: str
    purpose: str = "code"
    round: int | None = None
    model: str | None = None
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    """The code called a toolkit operation through the bridge.

    Attributes:
        call_id: Identifies the call (pairs with ``ToolCallCompleted``).
        toolkit: The toolkit name.
        operation: The operation name.
        arguments: Codec-encoded arguments by name.
        round: The round, if any.
    """

    type: ClassVar[str] = "tool.call.started"

    call_id: str
    toolkit: str
    operation: str
    arguments: dict[str, Any] = field(default_factory=dict)
    round: int | None = None


@dataclass(frozen=True, kw_only=True)
class ToolCallCompleted(Event):
    """A toolkit operation returned or failed.

    Attributes:
        call_id: As in ``ToolCallStarted``.
        toolkit: The toolkit name.
        operation: The operation name.
        result: The codec-encoded result (None on error).
        error: ``{"code", "message"}`` when the call failed, else None.
        duration_s: Wall time of the call.
        round: The round, if any.
        from_record: The call id of the interrupted round's call whose recorded result this is: a run resuming
            that round made the same call again, and it was answered from the record, not done again
            (docs/store.md, "Recovery"); "" when the call ran.
    """

    type: ClassVar[str] = "tool.call.completed"

    call_id: str
    toolkit: str
    operation: str
    result: Any = None
    error: dict[str, Any] | None = None
    duration_s: float = 0.0
    round: int | None = None
    from_record: str = ""


@dataclass(frozen=True, kw_only=True)
class CodeStarted(Event):
    """The sandbox started running a round's code.

    Attributes:
        round: The round.
        code: The code as the model wrote it.
        notes: How the code was read from the reply when that was not plain (several blocks joined,
            an earlier attempt skipped, ...); the model reads the same notes in its Evaluation.
    """

    type: ClassVar[str] = "code.started"

    round: int
    code: str
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class CodeCompleted(Event):
    """The sandbox finished a round's code: a summary of its ``ExecutionResult``.

    Attributes:
        round: The round.
        status: ``ok``, ``error``, ``deadline_exceeded`` or ``crashed``; for a round in which no code
            ran, ``parse_error`` (the code does not parse, or the reply was cut off) or ``no_code``.
        stdout: Printed output (truncated).
        stderr: Standard error (truncated).
        error: ``{"type", "message", "line", "program_line", "source", "traceback"}`` or None; ``line`` is
            the line of the model's code, ``program_line`` the line of the program the sandbox ran
            (frame included), ``source`` the model's line of code. Without code run: ``type``
            ``SyntaxError`` (with ``line`` and ``source`` when known) or ``NoCode``, and ``reason``.
        variables_changed: Names added or changed by the round.
        duration_s: Sandbox wall time.
        reply: For a round in which no code ran, what the model said (trimmed); else empty.
    """

    type: ClassVar[str] = "code.completed"

    round: int
    status: str = "ok"
    stdout: str = ""
    stderr: str = ""
    error: dict[str, Any] | None = None
    variables_changed: tuple[str, ...] = ()
    duration_s: float = 0.0
    reply: str = ""


@dataclass(frozen=True, kw_only=True)
class StateUpdated(Event):
    """The session's captured variables changed.

    Attributes:
        round: The round.
        changed: Codec-encoded values of the variables added or changed, by name.
        removed: Names that no longer exist.
        uncaptured: ``{"name", "type", "reason"[, "live"]}`` for values the codec could not carry
            (``live``: still in the run's warm sandbox, not saved).
    """

    type: ClassVar[str] = "state.updated"

    round: int
    changed: dict[str, Any] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    uncaptured: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class ArtifactCreated(Event):
    """A round's code wrote a file into ``outputs/`` (or showed a matplotlib figure).

    Attributes:
        round: The round.
        session_id: The session whose round record stores the file.
        name: The file's path relative to ``outputs/``.
        mime: Its MIME type (decided by the host).
        size: Its size in bytes.
        refused: Why it was not kept (over a size cap), or None when it is stored.
        uri: Where to fetch it: ``codeact://sessions/<session>/rounds/<n>/artifacts/<name>``
            (``codeact sessions show SESSION --artifacts DIR`` writes it to DIR).
    """

    type: ClassVar[str] = "artifact.created"

    round: int
    session_id: str
    name: str
    mime: str
    size: int
    refused: str | None = None
    uri: str = ""


@dataclass(frozen=True, kw_only=True)
class ActionRequested(Event):
    """The run needs the host's decision (a tool call that requires approval).

    Attributes:
        request_id: Identifies the request; the host answers through its approval callback.
        kind: What is requested (``"approval"``).
        toolkit: The toolkit name.
        operation: The operation name.
        arguments: Codec-encoded arguments by name.
        round: The round, if any.
    """

    type: ClassVar[str] = "action.requested"

    request_id: str
    kind: str = "approval"
    toolkit: str = ""
    operation: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    round: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunCompleted(Event):
    """The run ended normally (last event).

    Attributes:
        answer: The final answer (codec-encoded when it is not a string), or None.
        reason: Why it ended (``"finished"``, ``"self_check"``, ``"max_turns"``, ``"stuck"``, ...).
        rounds: Rounds recorded in the session after this run.
        run_rounds: Rounds this run recorded (a continued session's earlier rounds not counted); None when
            not known (an event made before the field existed).
    """

    type: ClassVar[str] = "run.completed"

    answer: Any = None
    reason: str = "finished"
    rounds: int = 0
    run_rounds: int | None = None


@dataclass(frozen=True, kw_only=True)
class RunFailed(Event):
    """The run failed (last event).

    Attributes:
        error: ``{"code", "message"}`` (the ``CodeactError.code`` and message).
        retryable: Whether retrying the same run may succeed (store or model outage).
        rounds: Rounds recorded in the session (all intact).
        run_rounds: Rounds this run recorded (None: not known).
    """

    type: ClassVar[str] = "run.failed"

    error: dict[str, Any]
    retryable: bool = False
    rounds: int = 0
    run_rounds: int | None = None

    @property
    def error_info(self) -> ErrorInfo:
        """``error`` as a value."""
        return ErrorInfo.from_dict(self.error)


@dataclass(frozen=True, kw_only=True)
class FlowStepStarted(Event):
    """A step of a flow (``codeact.engine.flow``) began: a sub-agent's run, recorded in a session of its own.

    ``run_id`` is the step's run (its events carry it), ``parent_run_id`` the flow's run.

    Attributes:
        agent: The sub-agent's name.
        position: Where in the flow (``1``, ``2``, ``branch 2``, ``iteration 3``, ``route 1``).
        session_id: The step's session (linked to the flow's session).
        input: What the sub-agent was asked.
    """

    type: ClassVar[str] = "flow.step.started"

    agent: str
    position: str = ""
    session_id: str = ""
    input: str = ""


@dataclass(frozen=True, kw_only=True)
class FlowStepCompleted(Event):
    """A step of a flow ended (its sub-agent's ``run.completed`` or ``run.failed``).

    Attributes:
        agent: The sub-agent's name.
        position: As in ``FlowStepStarted``.
        session_id: The step's session.
        status: ``completed``, ``paused`` or ``failed``.
        answer: The sub-agent's answer.
        output_key: The flow state key the answer was stored under, if any.
        error: ``{"code", "message"}`` when failed.
    """

    type: ClassVar[str] = "flow.step.completed"

    agent: str
    position: str = ""
    session_id: str = ""
    status: str = "completed"
    answer: Any = None
    output_key: str | None = None
    error: dict[str, Any] | None = None

    @property
    def error_info(self) -> ErrorInfo | None:
        """``error`` as a value (None when the step did not fail)."""
        return None if self.error is None else ErrorInfo.from_dict(self.error)


EVENT_TYPES: Mapping[str, type[Event]] = {
    cls.type: cls
    for cls in (
        RunStarted,
        RoundStarted,
        SegmentCreated,
        MessageDelta,
        MessageCompleted,
        ToolCallStarted,
        ToolCallCompleted,
        CodeStarted,
        CodeCompleted,
        StateUpdated,
        ArtifactCreated,
        ActionRequested,
        RunCompleted,
        RunFailed,
        FlowStepStarted,
        FlowStepCompleted,
    )
}
"""Event classes by their protocol ``type`` name."""


def event_from_json(data: Mapping[str, Any]) -> Event:
    """Rebuild an event from ``Event.to_json()`` output; unknown payload keys are ignored.

    Raises:
        CodeactError: ``code="event.invalid"`` for an unknown ``type`` or a missing field.
    """
    kind = data.get("type")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise CodeactError(f"unknown event type {kind!r}; known types: {sorted(EVENT_TYPES)}", code="event.invalid")
    known = {f.name: f for f in fields(cls)}
    values = {k: v for k, v in data.items() if k in known}
    for name, value in values.items():
        if isinstance(value, list) and str(known[name].type).startswith("tuple"):
            values[name] = tuple(value)
    try:
        return cls(**values)
    except TypeError as exc:
        raise CodeactError(f"malformed {kind!r} event: {exc}", code="event.invalid") from exc


class EventSequence:
    """Stamps the events of one run with its ``run_id``, the next ``sequence`` and the time.

    Args:
        run_id: The run's id; a random hex id when omitted.
    """

    def __init__(self, run_id: str | None = None) -> None:
        self.run_id = run_id or uuid.uuid4().hex
        self.last = 0

    def emit(self, cls: type[_E], /, **payload: Any) -> _E:
        """Build the next event of type ``cls`` with ``payload`` (sequence = previous + 1)."""
        self.last += 1
        return cls(run_id=self.run_id, sequence=self.last, timestamp=time.time(), **payload)


class Emitter:
    """A run's events: stamped in order (:class:`EventSequence`), queued for the stream ``Agent.run`` yields.

    ``None`` on the queue ends the stream. The run's toolkit calls report through :meth:`emit` too
    (``engine.calls``), so a call's events never pass through the run's own code.
    """

    def __init__(self, run_id: str) -> None:
        self.sequence = EventSequence(run_id)
        self.events: asyncio.Queue[Event | None] = asyncio.Queue()

    def emit(self, cls: type[Event], /, **payload: object) -> Event:
        """Stamp the run's next event and queue it for the stream."""
        event = self.sequence.emit(cls, **payload)
        self.events.put_nowait(event)
        return event
