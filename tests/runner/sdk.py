"""Validation against the real ``langbot-plugin`` SDK (a test dependency)."""

from __future__ import annotations

import time
from typing import Any

from langbot_plugin.api.entities.builtin.provider.message import Message as SdkMessage
from langbot_plugin.api.entities.builtin.runner import (
    ActionRequestedPayload,
    AgentEventContext,
    AgentInput,
    AgentResources,
    AgentRuntimeContext,
    AgentTrigger,
    ConversationContext,
    DeliveryContext,
    InputAttachment,
    InteractionRequest,
    MessageCompletedPayload,
    MessageDeltaPayload,
    ModelResource,
    RunCompletedPayload,
    RunFailedPayload,
    RunnerContext,
    RunnerResult,
    StateUpdatedPayload,
    ToolCallCompletedPayload,
    ToolCallStartedPayload,
    ToolResource,
)
from langbot_plugin.api.entities.builtin.runner.result import ProcessorLogPayload

from codeact.engine.runner import RunnerResult as OurResult

SDK_PAYLOADS: dict[str, Any] = {
    "message.delta": MessageDeltaPayload,
    "message.completed": MessageCompletedPayload,
    "tool.call.started": ToolCallStartedPayload,
    "tool.call.completed": ToolCallCompletedPayload,
    "state.updated": StateUpdatedPayload,
    "action.requested": ActionRequestedPayload,
    "run.completed": RunCompletedPayload,
    "run.failed": RunFailedPayload,
    "processor.log": ProcessorLogPayload,
}


def sdk_check(result: OurResult) -> RunnerResult:
    """``result`` as the SDK reads it: the envelope, its strict payload, an interaction request inside.

    The SDK gets the wire JSON as it is (``timestamp`` its int; it ignores codeact's ``at`` and ``parent_id``).
    """
    wire = result.to_json()
    assert isinstance(wire.get("timestamp", 0), int) and isinstance(wire.get("at", 0.0), float)
    parsed = RunnerResult.model_validate(wire)
    payload_model = SDK_PAYLOADS.get(result.type)
    if payload_model is not None:
        payload = payload_model.model_validate(parsed.data)
        if result.type == "action.requested" and payload.action == "interaction.requested":
            InteractionRequest.model_validate(payload.payload)
    return parsed


def sdk_context(
    text: str = "How many A-1?",
    *,
    run_id: str = "sdk-run-1",
    conversation: str = "chat-sdk",
    deadline_in: float = 60.0,
    attachments: list[InputAttachment] | None = None,
    models: list[ModelResource] | None = None,
    tools: list[ToolResource] | None = None,
) -> RunnerContext:
    """A context built with the SDK's own models, as a LangBot host builds it."""
    return RunnerContext(
        run_id=run_id,
        trigger=AgentTrigger(type="message.received", source="platform", timestamp=int(time.time())),
        event=AgentEventContext(
            event_id=f"ev-{run_id}", event_type="message.received", source="platform", data={"bot_uuid": "b-1"}
        ),
        conversation=ConversationContext(conversation_id=conversation, launcher_type="person", bot_id="b-1"),
        input=AgentInput(text=text, attachments=attachments or []),
        delivery=DeliveryContext(surface="platform", supports_streaming=True),
        resources=AgentResources(models=models or [], tools=tools or []),
        runtime=AgentRuntimeContext(trace_id="t-1", deadline_at=time.time() + deadline_in),
    )


__all__ = ["SdkMessage", "sdk_check", "sdk_context"]
