"""The runner manifest (AgentRunner protocol v1, ``LIST_AGENT_RUNNERS``).

Field names follow the protocol seed and the ``langbot-plugin`` SDK (0.7), which names these
``RunnerManifest``, ``RunnerCapabilities`` and ``RunnerPermissions``. The manifest is strict
(``extra="forbid"``): a key the protocol does not know is an error, as in the SDK. The seed's
context policy has no field of its own in the SDK's manifest; it travels in
``metadata["context_policy"]`` (:class:`ContextPolicy`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ConfigField",
    "ContextPolicy",
    "I18nText",
    "RunnerCapabilities",
    "RunnerManifest",
    "RunnerPermissions",
]

I18nText = dict[str, str]
"""A localized string: locale code (``en_US``, ``zh_Hans``) -> text."""

_STRICT = ConfigDict(extra="forbid")


class ConfigField(BaseModel):
    """One item of the binding configuration form (``DynamicFormItemSchema``).

    Form items may carry extra display keys (the SDK allows them), so this model does too.

    Attributes:
        type: The field type (``text``, ``integer``, ``boolean``, ``select``, ``llm-model-selector``, ...).
        name: The config key it sets (``context.config[name]``).
        label: Localized label.
        description: Localized help text.
        required: Whether the host must ask for it.
        default: Its default value.
        options: Choices for ``select`` types.
        allow_custom: Allow a free value beside the choices.
    """

    model_config = ConfigDict(extra="allow")

    type: str
    name: str
    label: I18nText = Field(default_factory=dict)
    description: I18nText | None = None
    required: bool = False
    default: Any = None
    options: list[dict[str, Any]] | None = None
    allow_custom: bool = False


class RunnerCapabilities(BaseModel):
    """What the runner can do (the SDK's set; each defaults to False).

    Attributes:
        streaming: It may return ``message.delta``.
        tool_calling: It calls host tool APIs.
        knowledge_retrieval: It calls host knowledge APIs.
        multimodal_input: It handles non-text input and attachments.
        skill_authoring: It wants host skill-authoring tools.
        interrupt: It supports cancellation.
        steering: It pulls follow-up input at turn boundaries.
        interactions: It requests structured interactions (approvals, questions) and consumes answers.
    """

    model_config = _STRICT

    streaming: bool = False
    tool_calling: bool = False
    knowledge_retrieval: bool = False
    multimodal_input: bool = False
    skill_authoring: bool = False
    interrupt: bool = False
    steering: bool = False
    interactions: bool = False


class RunnerPermissions(BaseModel):
    """The most the runner may use of the host's resources (the host intersects it with the binding)."""

    model_config = _STRICT

    models: list[Literal["invoke", "stream", "rerank", "count_tokens"]] = Field(default_factory=list)
    tools: list[Literal["detail", "call"]] = Field(default_factory=list)
    knowledge_bases: list[Literal["list", "retrieve"]] = Field(default_factory=list)
    history: list[Literal["page", "search"]] = Field(default_factory=list)
    events: list[Literal["get", "page"]] = Field(default_factory=list)
    storage: list[Literal["plugin", "workspace"]] = Field(default_factory=list)
    interactions: list[Literal["request"]] = Field(default_factory=list)


class ContextPolicy(BaseModel):
    """How the runner wants its context (seed section 3.5); codeact manages its own (sessions)."""

    model_config = _STRICT

    ownership: Literal["self_managed", "host_bootstrap", "hybrid"] = "self_managed"
    bootstrap: Literal["none", "current_event", "recent_tail", "summary_tail"] = "current_event"
    max_inline_events: int = 0
    max_inline_bytes: int = 0
    supports_history_pull: bool = True
    supports_history_search: bool = False
    supports_artifact_pull: bool = True
    owns_compaction: bool = True
    wants_static_context_refs: bool = True


def _agent_usage() -> list[Literal["agent", "event"]]:
    return ["agent"]


class RunnerManifest(BaseModel):
    """A runner as the host discovers it.

    Attributes:
        id: Stable id (for a blueprint: its ``id``; a LangBot plugin uses ``plugin:author/name/runner``).
        name: The runner's name within its plugin or service.
        label: Localized display name.
        component_kind: Always ``Runner``.
        usages: What the host may bind it to (``agent``, ``event``).
        supported_event_patterns: Event types it accepts (``*``, ``message.*``).
        description: Localized description.
        capabilities: What it can do.
        permissions: The host resources it may use at most.
        config_schema: The binding configuration form.
        metadata: Display, diagnostic, non-stable information (codeact puts its toolkits and the
            context policy here).
    """

    model_config = _STRICT

    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    label: I18nText
    component_kind: Literal["Runner"] = "Runner"
    usages: list[Literal["agent", "event"]] = Field(default_factory=_agent_usage, min_length=1)
    supported_event_patterns: list[str] = Field(default_factory=lambda: ["*"])
    description: I18nText | None = None
    capabilities: RunnerCapabilities = Field(default_factory=RunnerCapabilities)
    permissions: RunnerPermissions = Field(default_factory=RunnerPermissions)
    config_schema: list[ConfigField] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
