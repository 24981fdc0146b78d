"""Structured interaction requests (an approval, a question), sent as ``action.requested``.

As in the ``langbot-plugin`` SDK, a runner requests an interaction with an ``action.requested``
result whose ``action`` is ``interaction.requested`` and whose ``payload`` is an
:class:`InteractionRequest`; the answer comes back as an ``InteractionSubmission``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "INTERACTION_REQUESTED_ACTION",
    "INTERACTION_SUBMITTED_EVENT",
    "InteractionAction",
    "InteractionField",
    "InteractionOption",
    "InteractionRequest",
]

INTERACTION_REQUESTED_ACTION = "interaction.requested"
"""The ``action`` of an ``action.requested`` result that asks the user something."""

INTERACTION_SUBMITTED_EVENT = "interaction.submitted"
"""The ``event.event_type`` of a run that carries the user's answer (``input.interaction``)."""

_STRICT = ConfigDict(extra="forbid")

FieldType = Literal["text", "textarea", "select", "multiselect", "number", "boolean", "file"]


class InteractionOption(BaseModel):
    """One choice of a select field."""

    model_config = _STRICT

    value: str = Field(min_length=1, max_length=512)
    label: str = Field(min_length=1, max_length=512)
    description: str | None = Field(default=None, max_length=2000)


class InteractionField(BaseModel):
    """A field the host renders (the answer's ``values[id]``)."""

    model_config = _STRICT

    id: str = Field(min_length=1, max_length=128)
    label: str = Field(min_length=1, max_length=512)
    type: FieldType
    required: bool = False
    options: list[InteractionOption] = Field(default_factory=list, max_length=100)
    placeholder: str | None = Field(default=None, max_length=1000)
    default: JsonValue = None


class InteractionAction(BaseModel):
    """A button the host renders (the answer's ``action_id``)."""

    model_config = _STRICT

    id: str = Field(min_length=1, max_length=128)
    label: str = Field(min_length=1, max_length=512)
    style: Literal["default", "primary", "danger"] = "default"


class InteractionRequest(BaseModel):
    """What the runner asks the user.

    Attributes:
        interaction_id: Identifies the request (``Interactions.submit(interaction_id, ...)``).
        kind: ``confirmation`` (an approval), ``form`` (a question) or ``choice``.
        title: One line.
        description: Details (the call's arguments, the question).
        fields: Inputs to fill.
        actions: Buttons.
        expires_at: Unix time after which no answer is taken (the run's deadline).
        fallback_text: What a surface without structured interactions shows instead.
    """

    model_config = _STRICT

    interaction_id: str = Field(min_length=1, max_length=255)
    kind: Literal["form", "confirmation", "choice"] = "form"
    title: str = Field(min_length=1, max_length=1000)
    description: str | None = Field(default=None, max_length=10000)
    fields: list[InteractionField] = Field(default_factory=list, max_length=50)
    actions: list[InteractionAction] = Field(default_factory=list, max_length=20)
    expires_at: int | None = None
    fallback_text: str = Field(min_length=1, max_length=20000)
