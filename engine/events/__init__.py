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

from codeact.engine.events._model import (
    EVENT_TYPES,
    ActionRequested,
    ArtifactCreated,
    CodeCompleted,
    CodeStarted,
    Emitter,
    Event,
    EventSequence,
    FlowStepCompleted,
    FlowStepStarted,
    MessageCompleted,
    MessageDelta,
    RoundStarted,
    RunCompleted,
    RunFailed,
    RunStarted,
    SegmentCreated,
    StateUpdated,
    ToolCallCompleted,
    ToolCallStarted,
    event_from_json,
)
from codeact.engine.events._render import error_summary, render_event, reply_excerpt, without_frame_error

__all__ = [
    "EVENT_TYPES",
    "ActionRequested",
    "ArtifactCreated",
    "CodeCompleted",
    "CodeStarted",
    "Event",
    "Emitter",
    "EventSequence",
    "FlowStepCompleted",
    "FlowStepStarted",
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
    "error_summary",
    "event_from_json",
    "render_event",
    "reply_excerpt",
    "without_frame_error",
]
