"""The runner manifest (AgentRunner protocol v1, ``LIST_AGENT_RUNNERS``).

Field names follow the protocol seed and the ``langbot-plugin`` SDK (0.7), which names these
``RunnerManifest``, ``RunnerCapabilities`` and ``RunnerPermissions``. The manifest is strict
(``extra="forbid"``): a key the protocol does not know is an error, as in the SDK. The seed's
context policy has no field of its own in the SDK's manifest; it travels in
``metadata["context_policy"]`` (:class:`ContextPolicy`).

The permission kinds are the seed's (section 3.4: ``models``, ``tools``, ``knowledge_bases``, ``history``,
``events``, ``artifacts``, ``storage`` with ``binding``, ``platform_api``) plus the SDK's (``count_tokens``,
``interactions``). The SDK 0.7 has no ``artifacts`` or ``platform_api`` kind: a manifest leaves them out
when they are empty, so a runner that declares neither validates as the SDK's too.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

__all__ = [
    "ConfigField",
    "ContextPolicy",
    "I18nText",
    "PERMISSION_KINDS",
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


PERMISSION_KINDS: Final = (
    "models",
    "tools",
    "knowledge_bases",
    "history",
    "events",
    "artifacts",
    "storage",
    "platform_api",
    "interactions",
)
"""The permission kinds a manifest may declare (the seed's section 3.4, then the SDK's ``interactions``)."""

_SDK_ABSENT: Final = ("artifacts", "platform_api")  # kinds langbot-plugin 0.7's strict manifest lacks
_ACTION: Final = re.compile(r"[A-Za-z][A-Za-z0-9_.:-]{0,127}")
_RESERVED_ACTIONS: Final = frozenset({"interaction.requested"})  # the protocol's own use of action.requested


class RunnerPermissions(BaseModel):
    """The most the runner may use of the host's resources (the host intersects it with the binding).

    Attributes:
        models: Model operations (``invoke``, ``stream``, ``rerank``; the SDK's ``count_tokens``).
        tools: Tool operations (``detail``, ``call``).
        knowledge_bases: Knowledge base operations (``list``, ``retrieve``).
        history: Transcript reads (``page``, ``search``).
        events: Event reads (``get``, ``page``).
        artifacts: Artifact reads (``metadata``, ``read``: a range or the whole stream).
        storage: Storage areas (``plugin``, ``workspace``, ``binding``).
        platform_api: The platform actions the runner may request (``message.edit``, ...), by name.
        interactions: Structured interactions (``request``; the SDK's).
    """

    model_config = _STRICT

    models: list[Literal["invoke", "stream", "rerank", "count_tokens"]] = Field(default_factory=list)
    tools: list[Literal["detail", "call"]] = Field(default_factory=list)
    knowledge_bases: list[Literal["list", "retrieve"]] = Field(default_factory=list)
    history: list[Literal["page", "search"]] = Field(default_factory=list)
    events: list[Literal["get", "page"]] = Field(default_factory=list)
    artifacts: list[Literal["metadata", "read"]] = Field(default_factory=list)
    storage: list[Literal["plugin", "workspace", "binding"]] = Field(default_factory=list)
    platform_api: list[str] = Field(default_factory=list)
    interactions: list[Literal["request"]] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _known_kinds(cls, data: object) -> object:
        if isinstance(data, dict):
            unknown = sorted(str(k) for k in data if k not in PERMISSION_KINDS)
            if unknown:
                raise ValueError(
                    f"unknown permission kind{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; "
                    f"the kinds are {', '.join(PERMISSION_KINDS)}"
                )
            actions = data.get("platform_api")
            for action in actions if isinstance(actions, list) else ():
                if not isinstance(action, str) or not _ACTION.fullmatch(action):
                    raise ValueError(
                        f"platform_api action {action!r} is not an action name: 1-128 letters, digits or '_.:-', "
                        "starting with a letter (e.g. 'message.edit')"
                    )
                if action in _RESERVED_ACTIONS:
                    raise ValueError(
                        f"platform_api action {action!r} is the protocol's own (an interaction request); "
                        "name a platform action instead"
                    )
        return data

    @model_serializer(mode="wrap")
    def _without_empty_seed_kinds(self, handler: SerializerFunctionWrapHandler) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        for kind in _SDK_ABSENT:
            if not data.get(kind):
                data.pop(kind, None)
        return data

    def declares(self, kind: str, operation: str) -> bool:
        """Whether ``operation`` of ``kind`` is declared (for ``storage`` the area, for ``platform_api`` the action)."""
        declared = getattr(self, kind, None) if kind in PERMISSION_KINDS else None
        return isinstance(declared, list) and operation in declared


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
