"""The run context (AgentRunner protocol v1, ``RUN_AGENT``): event-first input of one run.

Field names follow the protocol seed and the ``langbot-plugin`` SDK (0.7, ``RunnerContext``).
The context is forward compatible: a host may add fields, and unknown keys are ignored
(``extra="ignore"``), so a context built with a newer SDK still parses. ``event``, ``trigger``,
``input``, ``delivery``, ``resources`` and ``runtime`` are required, as in the SDK.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "ActorContext",
    "AdapterContext",
    "AgentEventContext",
    "AgentInput",
    "AgentResources",
    "AgentRunState",
    "AgentRuntimeContext",
    "AgentTrigger",
    "BootstrapContext",
    "ContentElement",
    "ContextAPICapabilities",
    "ContextAccess",
    "ConversationContext",
    "DeliveryContext",
    "InlineContextPolicy",
    "InputAttachment",
    "InteractionDeliveryCapabilities",
    "InteractionSubmission",
    "KnowledgeBaseResource",
    "ModelResource",
    "RawEventRef",
    "RunnerContext",
    "SkillResource",
    "StorageResource",
    "SubjectContext",
    "ToolResource",
]

_OPEN = ConfigDict(extra="ignore")
_STRICT = ConfigDict(extra="forbid")


class AgentTrigger(BaseModel):
    """What started the run (``type`` matches ``event.event_type`` or is coarser)."""

    model_config = _OPEN

    type: str
    source: Literal["platform", "webui", "api", "scheduler", "system", "host_adapter", "pipeline_adapter"] = (
        "host_adapter"
    )
    timestamp: int | None = None


class RawEventRef(BaseModel):
    """A reference to a large raw platform payload kept by the host."""

    model_config = _OPEN

    ref_id: str | None = None
    storage_key: str | None = None


class AgentEventContext(BaseModel):
    """The event (required: protocol v1 is event-first)."""

    model_config = _OPEN

    event_id: str
    event_type: str
    event_time: int | None = None
    source: str
    source_event_type: str | None = None
    raw_ref: RawEventRef | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class ConversationContext(BaseModel):
    """Where the event happened; ``conversation_id`` maps to a codeact session."""

    model_config = _OPEN

    conversation_id: str | None = None
    thread_id: str | None = None
    launcher_type: str | None = None
    launcher_id: str | None = None
    sender_id: str | None = None
    bot_id: str | None = None
    workspace_id: str | None = None
    session_id: str | None = None


class ActorContext(BaseModel):
    """Who caused the event (a user, the system, a plugin)."""

    model_config = _OPEN

    actor_type: str
    actor_id: str | None = None
    actor_name: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class SubjectContext(BaseModel):
    """What the event is about (a message, a group, a schedule)."""

    model_config = _OPEN

    subject_type: str
    subject_id: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class ContentElement(BaseModel):
    """One element of structured input content (text, image, file)."""

    model_config = _OPEN

    type: str
    text: str | None = None
    image_url: dict[str, Any] | None = None
    image_base64: str | None = None
    file_url: str | None = None
    file_base64: str | None = None
    file_name: str | None = None


class InputAttachment(BaseModel):
    """Metadata of one attachment of the current event (large content stays outside: ``ref``/``url``).

    Attributes:
        ref: Host-issued reference (read through the host's API).
        type: ``image``, ``file``, ``voice``, ...
        mime_type: Its MIME type.
        size: Its size in bytes.
        name: Its file name.
        source: ``url``, ``base64``, ``message-chain``, ...
        url: An external URL backing it.
        path: A path on the host's side where it is staged.
        content: Small inline content: base64 or a ``data:`` URL.
        id: The platform's id for it.
    """

    model_config = _STRICT

    ref: str | None = None
    type: str | None = None
    mime_type: str | None = None
    size: int | None = None
    name: str | None = None
    source: str | None = None
    url: str | None = None
    path: str | None = None
    content: str | None = None
    id: str | None = None


class InteractionSubmission(BaseModel):
    """A user's answer to an earlier interaction request (event ``interaction.submitted``)."""

    model_config = _STRICT

    interaction_id: str = Field(min_length=1, max_length=255)
    action_id: str | None = Field(default=None, max_length=128)
    values: dict[str, JsonValue] = Field(default_factory=dict)
    submitted_at: int | None = None


class AgentInput(BaseModel):
    """The current event's input (not the history)."""

    model_config = _OPEN

    text: str | None = None
    contents: list[ContentElement] = Field(default_factory=list)
    attachments: list[InputAttachment] = Field(default_factory=list)
    message_chain: dict[str, Any] | None = None
    interaction: InteractionSubmission | None = None

    def to_text(self) -> str:
        """``text``, or the text elements of ``contents`` joined by spaces."""
        if self.text is not None:
            return self.text
        return " ".join(c.text for c in self.contents if c.type == "text" and c.text)


class InteractionDeliveryCapabilities(BaseModel):
    """The structured interactions a delivery surface can render."""

    model_config = _OPEN

    field_types: list[str] = Field(default_factory=list)
    action_styles: list[str] = Field(default_factory=list)
    supports_updates: bool = False
    max_fields: int | None = Field(default=None, ge=0)


class DeliveryContext(BaseModel):
    """The output surface: what the runner's results can become."""

    model_config = _OPEN

    surface: str
    automatic_reply: bool = False
    reply_target: dict[str, Any] | None = None
    supports_streaming: bool = False
    supports_edit: bool = False
    supports_reaction: bool = False
    max_message_size: int | None = None
    interactions: InteractionDeliveryCapabilities | None = None
    platform_capabilities: dict[str, Any] = Field(default_factory=dict)


class ModelResource(BaseModel):
    """A host model this run may use, and how."""

    model_config = _OPEN

    model_id: str
    model_type: str | None = None
    provider: str | None = None
    operations: list[Literal["invoke", "stream", "rerank", "count_tokens"]] = Field(default_factory=list)


class ToolResource(BaseModel):
    """A host tool this run may use; ``parameters`` is its JSON schema when the host inlined it."""

    model_config = _OPEN

    tool_name: str
    tool_type: str | None = None
    description: str | None = None
    operations: list[Literal["detail", "call"]] = Field(default_factory=list)
    parameters: dict[str, Any] | None = None


class KnowledgeBaseResource(BaseModel):
    """A host knowledge base this run may use."""

    model_config = _OPEN

    kb_id: str
    kb_name: str | None = None
    kb_type: str | None = None
    operations: list[Literal["list", "retrieve"]] = Field(default_factory=list)


class SkillResource(BaseModel):
    """A host skill this run may activate."""

    model_config = _OPEN

    skill_name: str
    display_name: str | None = None
    description: str | None = None


class StorageResource(BaseModel):
    """Which storage areas this run may use."""

    model_config = _OPEN

    plugin_storage: bool = False
    workspace_storage: bool = False
    binding_storage: bool = False
    """Storage of this binding (this runner in this conversation's binding), protocol v1's ``binding`` scope."""


class AgentResources(BaseModel):
    """What the host authorized for this run (the proxy checks every call against it)."""

    model_config = _OPEN

    models: list[ModelResource] = Field(default_factory=list)
    tools: list[ToolResource] = Field(default_factory=list)
    knowledge_bases: list[KnowledgeBaseResource] = Field(default_factory=list)
    skills: list[SkillResource] = Field(default_factory=list)
    storage: StorageResource = Field(default_factory=StorageResource)
    platform_capabilities: dict[str, Any] = Field(default_factory=dict)


class InlineContextPolicy(BaseModel):
    """What the host inlined into the context."""

    model_config = _OPEN

    mode: Literal["none", "current_event", "recent_tail", "summary_tail"] = "current_event"
    delivered_count: int = 0
    source_total_count: int | None = None
    messages_complete: bool = False
    reason: str | None = None


class ContextAPICapabilities(BaseModel):
    """Which context APIs the host offers this run (unknown ones are ignored)."""

    model_config = _OPEN

    history_page: bool = False
    history_search: bool = False
    event_get: bool = False
    event_page: bool = False
    artifact_metadata: bool = False
    artifact_read: bool = False
    state: bool = False
    storage: bool = False


class ContextAccess(BaseModel):
    """Where the event sits in its conversation and how to pull more context."""

    model_config = _OPEN

    conversation_id: str | None = None
    thread_id: str | None = None
    latest_cursor: str | None = None
    event_seq: int | None = None
    transcript_seq: int | None = None
    has_history_before: bool = False
    inline_policy: InlineContextPolicy = Field(default_factory=InlineContextPolicy)
    available_apis: ContextAPICapabilities = Field(default_factory=ContextAPICapabilities)


class AgentRunState(BaseModel):
    """The host's state snapshot, by scope (the runner asks for changes with ``state.updated``)."""

    model_config = _OPEN

    conversation: dict[str, Any] = Field(default_factory=dict)
    actor: dict[str, Any] = Field(default_factory=dict)
    subject: dict[str, Any] = Field(default_factory=dict)
    runner: dict[str, Any] = Field(default_factory=dict)
    binding: dict[str, Any] = Field(default_factory=dict)


class AgentRuntimeContext(BaseModel):
    """The host's runtime facts; ``deadline_at`` (unix seconds) bounds the whole run."""

    model_config = _OPEN

    host: str | None = None
    langbot_version: str | None = None
    trace_id: str | None = None
    deadline_at: float | None = None
    locale: str | None = None
    timezone: str | None = None
    static_refs: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)


class BootstrapContext(BaseModel):
    """Messages a host inlined for convenience (codeact keeps its own history and does not use them)."""

    model_config = _OPEN

    messages: list[dict[str, Any]] = Field(default_factory=list)
    summary: str | None = None
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)


class AdapterContext(BaseModel):
    """Entry-adapter fields a runner should not depend on."""

    model_config = _OPEN

    extra: dict[str, Any] = Field(default_factory=dict)


class RunnerContext(BaseModel):
    """Everything a runner gets for one run.

    Attributes:
        run_id: The host's id of the run (every proxy call carries it).
        trigger: What started the run.
        event: The event (required).
        conversation: Where it happened; its ``conversation_id`` picks the session.
        actor: Who caused it.
        subject: What it is about.
        input: The current event's text, contents, attachments, or an interaction answer.
        delivery: The output surface.
        resources: The host resources authorized for this run.
        context: How to pull more context.
        state: The host's state snapshot.
        runtime: Host facts, with ``deadline_at``.
        variables: Public invocation variables.
        config: The binding's configuration (fills the blueprint's declared inputs).
        bootstrap: Optional host-inlined messages (codeact keeps its own history).
        adapter: Entry-adapter fields.
        metadata: Anything else.
    """

    model_config = _OPEN

    run_id: str = Field(min_length=1)
    trigger: AgentTrigger
    event: AgentEventContext
    conversation: ConversationContext | None = None
    actor: ActorContext | None = None
    subject: SubjectContext | None = None
    input: AgentInput
    delivery: DeliveryContext
    resources: AgentResources = Field(default_factory=AgentResources)
    context: ContextAccess = Field(default_factory=ContextAccess)
    state: AgentRunState = Field(default_factory=AgentRunState)
    runtime: AgentRuntimeContext = Field(default_factory=AgentRuntimeContext)
    variables: dict[str, Any] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    bootstrap: BootstrapContext | None = None
    adapter: AdapterContext | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
