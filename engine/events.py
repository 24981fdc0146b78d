"""The events a run yields (ARCHITECTURE.md section 7), named after the AgentRunner protocol v1.

Every event carries ``run_id``, a per-run ``sequence`` starting at 1 and a ``timestamp`` (unix
seconds, float), plus a typed payload. ``EventSequence(run_id)`` stamps them::

    events = EventSequence(run_id)
    yield events.emit(RoundStarted, round=1)

``event.to_json()`` is one flat JSON object with a stable schema,
``{"type", "run_id", "sequence", "timestamp", **payload}`` (``--json`` prints one per line, see
``to_json_line``); ``event_from_json`` reads it back. Consumers must ignore unknown keys.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from engine.errors import CodeactError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "EVENT_TYPES",
    "ActionRequested",
    "CodeCompleted",
    "CodeStarted",
    "Event",
    "EventSequence",
    "MessageCompleted",
    "MessageDelta",
    "RoundStarted",
    "RunCompleted",
    "RunFailed",
    "RunStarted",
    "SegmentCreated",
    "StateUpdated",
    "ToolCallCompleted",
    "ToolCallStarted",
    "event_from_json",
    "render_event",
]

_E = TypeVar("_E", bound="Event")
_ENVELOPE = ("type", "run_id", "sequence", "timestamp")


@dataclass(frozen=True, kw_only=True)
class Event:
    """Base of every event: the envelope.

    Attributes:
        type: The protocol name (``"round.started"``), fixed per class.
        run_id: The run this event belongs to.
        sequence: 1, 2, 3, ... within the run.
        timestamp: Unix time (seconds) at which the event was emitted.
    """

    type: ClassVar[str] = ""

    run_id: str
    sequence: int
    timestamp: float

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
    """

    type: ClassVar[str] = "run.started"

    session_id: str
    blueprint_id: str = ""
    model: str = ""
    input: str = ""
    resumed: bool = False


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
    """

    type: ClassVar[str] = "tool.call.completed"

    call_id: str
    toolkit: str
    operation: str
    result: Any = None
    error: dict[str, Any] | None = None
    duration_s: float = 0.0
    round: int | None = None


@dataclass(frozen=True, kw_only=True)
class CodeStarted(Event):
    """The sandbox started running a round's code.

    Attributes:
        round: The round.
        code: The code as the model wrote it.
    """

    type: ClassVar[str] = "code.started"

    round: int
    code: str


@dataclass(frozen=True, kw_only=True)
class CodeCompleted(Event):
    """The sandbox finished a round's code: a summary of its ``ExecutionResult``.

    Attributes:
        round: The round.
        status: ``ok``, ``error``, ``deadline_exceeded`` or ``crashed``.
        stdout: Printed output (truncated).
        stderr: Standard error (truncated).
        error: ``{"type", "message", "line", "traceback"}`` or None.
        variables_changed: Names added or changed by the round.
        duration_s: Sandbox wall time.
    """

    type: ClassVar[str] = "code.completed"

    round: int
    status: str = "ok"
    stdout: str = ""
    stderr: str = ""
    error: dict[str, Any] | None = None
    variables_changed: tuple[str, ...] = ()
    duration_s: float = 0.0


@dataclass(frozen=True, kw_only=True)
class StateUpdated(Event):
    """The session's captured variables changed.

    Attributes:
        round: The round.
        changed: Codec-encoded values of the variables added or changed, by name.
        removed: Names that no longer exist.
        uncaptured: ``{"name", "type", "reason"}`` for values the codec could not carry.
    """

    type: ClassVar[str] = "state.updated"

    round: int
    changed: dict[str, Any] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    uncaptured: tuple[dict[str, str], ...] = ()


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
    """

    type: ClassVar[str] = "run.completed"

    answer: Any = None
    reason: str = "finished"
    rounds: int = 0


@dataclass(frozen=True, kw_only=True)
class RunFailed(Event):
    """The run failed (last event).

    Attributes:
        error: ``{"code", "message"}`` (the ``CodeactError.code`` and message).
        retryable: Whether retrying the same run may succeed (store or model outage).
        rounds: Rounds recorded in the session (all intact).
    """

    type: ClassVar[str] = "run.failed"

    error: dict[str, Any]
    retryable: bool = False
    rounds: int = 0


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
        ActionRequested,
        RunCompleted,
        RunFailed,
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


_SHOWN_SEGMENTS = {"Thought": "magenta", "Plan": "magenta", "NextGoal": "magenta", "Express": "bold"}


def render_event(event: Event, console: Console) -> None:
    """Print a compact, human view of ``event`` on a rich ``console`` (streaming deltas print nothing).

    Code is syntax-highlighted on a terminal and printed plain otherwise; tool calls, output,
    errors and the end of the run get one line each. A full-screen renderer (spinner, live
    streaming) is the CLI's business; this is the plain building block.
    """
    from rich.text import Text

    def short(value: Any, limit: int = 120) -> str:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return text if len(text) <= limit else text[: limit - 1] + "…"

    def call_args(arguments: Mapping[str, Any]) -> str:
        return ", ".join(
            f"{name}={short(json.dumps(value, ensure_ascii=False, default=str), 40)}"
            for name, value in arguments.items()
        )

    if isinstance(event, RunStarted):
        console.print(Text(f"run {event.run_id[:8]} · session {event.session_id} · {event.model}", style="dim"))
    elif isinstance(event, RoundStarted):
        console.rule(f"round {event.round}", style="dim")
    elif isinstance(event, SegmentCreated):
        kind = str(event.segment.get("kind", ""))
        style = _SHOWN_SEGMENTS.get(kind)
        if style is not None:
            console.print(Text.assemble((f"{kind}: ", "bold"), (str(event.segment.get("content", "")), style)))
    elif isinstance(event, CodeStarted):
        if console.is_terminal:
            from rich.syntax import Syntax

            console.print(Syntax(event.code, "python", theme="ansi_dark", background_color="default", word_wrap=True))
        else:
            console.print(Text(event.code.rstrip("\n")))
    elif isinstance(event, ToolCallStarted):
        args = call_args(event.arguments)
        console.print(Text(f"→ {event.toolkit}.{event.operation}({args})", style="cyan"))
    elif isinstance(event, ToolCallCompleted):
        if event.error is not None:
            message = short(event.error.get("message", event.error))
            console.print(Text(f"← {event.toolkit}.{event.operation}: {message}", style="red"))
        else:
            console.print(Text(f"← {event.toolkit}.{event.operation} -> {short(event.result)}", style="cyan"))
    elif isinstance(event, CodeCompleted):
        if event.stdout:
            console.print(Text(event.stdout.rstrip("\n"), style="dim"))
        if event.error:
            line = f" (line {event.error['line']})" if event.error.get("line") is not None else ""
            console.print(Text(f"{event.error.get('type')}: {event.error.get('message')}{line}", style="red"))
        if event.variables_changed:
            console.print(Text("variables: " + ", ".join(event.variables_changed), style="green"))
    elif isinstance(event, StateUpdated):
        # A variable the store will not keep (too large, not encodable) must be visible now, not only
        # in `sessions show`: the next round will not find it.
        for item in event.uncaptured:
            kind = f" ({item['type']})" if item.get("type") else ""
            reason = f": {item['reason']}" if item.get("reason") else ""
            console.print(Text(f"! variable {item.get('name')}{kind} is not kept for the next round{reason}", "yellow"))
    elif isinstance(event, ActionRequested):
        args = call_args(event.arguments)
        console.print(Text(f"? {event.kind} needed: {event.toolkit}.{event.operation}({args})", style="yellow"))
    elif isinstance(event, RunCompleted):
        plural = "s" if event.rounds != 1 else ""
        console.print(Text(f"✔ {event.reason} after {event.rounds} round{plural}", style="green"))
    elif isinstance(event, RunFailed):
        console.print(Text(f"✖ [{event.error.get('code')}] {event.error.get('message')}", style="bold red"))
    # message.delta / message.completed: shown through the events above.
