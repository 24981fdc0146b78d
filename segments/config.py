"""Prompt configuration: which system sections, in which order, from which templates.

A blueprint's ``instructions`` (``system``, ``developer``, ``variables``) feed it: ``system`` becomes
the Role section, ``developer`` its own section, and ``variables`` are substituted into both (and
into ``overrides``) wherever ``{{ name }}`` appears, and are visible to every section template.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from codeact import prompts
from codeact.prompts.errors import TemplateError
from codeact.segments.fim import FIM_FAMILIES, FimTokens, fim_tokens_for, validate_imports

__all__ = [
    "DEFAULT_SECTIONS",
    "SECTION_NAMES",
    "Experience",
    "Instructions",
    "PromptConfig",
    "Protocol",
    "Purpose",
    "substitute",
]

Protocol = Literal["chat", "completion"]
Layout = Literal["frame", "turns"]
Purpose = str  # "thought", "code", "reflect" or a custom builder's purpose

SECTION_NAMES: tuple[str, ...] = (
    "platform",
    "role",
    "mechanism",
    "input_format",
    "output_format",
    "toolkits",
    "principles",
    "common_errors",
    "developer",
    "knowledge",
    "experience",
)
DEFAULT_SECTIONS: tuple[str, ...] = SECTION_NAMES

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
Scalar = str | int | float | bool


def substitute(text: str, variables: dict[str, Scalar], *, where: str) -> str:
    """Replace ``{{ name }}`` in ``text`` with ``variables[name]`` (nothing else is evaluated).

    Blueprint text is not rendered as a Jinja template on purpose: a shared blueprint must not be
    able to run template code on the host.

    Raises:
        TemplateError: a placeholder names a variable that is not defined (``template`` is ``where``).
    """

    def _value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in variables:
            raise TemplateError(
                f"{where} uses undefined variable {name!r}: define it under instructions.variables",
                template=where,
                variable=name,
            )
        return str(variables[name])

    return _PLACEHOLDER.sub(_value, text)


class Instructions(BaseModel):
    """A blueprint's ``instructions`` block.

    ``literal``: ``system`` and ``developer`` are final text, used as they are (no ``{{ name }}``
    substitution). An agent built from a blueprint sets it: the blueprint factory has rendered a
    ``codeact.agent/v1`` file's instructions already, and an ``ai4j.agent/v1`` file's are never
    templated (its ``{{ }}`` is text, as in ai4j).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    system: str | None = None
    developer: str | None = None
    variables: dict[str, Scalar] = Field(default_factory=dict)
    literal: bool = False

    def text(self, name: Literal["system", "developer"]) -> str:
        """``system`` or ``developer`` as the prompt shows it (substituted unless ``literal``)."""
        value = getattr(self, name) or ""
        return value if self.literal else substitute(value, self.variables, where=f"instructions.{name}")


class Experience(BaseModel):
    """A few-shot example for the Experience section: a task and the code that solved it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    code: str
    note: str = ""


class PromptConfig(BaseModel):
    """How an agent's prompts are assembled.

    Attributes:
        protocol: ``chat`` (messages; the FIM frame is the last user segment) or ``completion`` (one raw
            FIM text for a ``/v1/completions`` endpoint).
        model: The model name, used to guess the FIM family when ``fim`` is ``auto``.
        fim: A family of :data:`~codeact.segments.fim.FIM_FAMILIES` or ``auto``: with ``chat`` auto means the
            Qwen markers (the seed's), with ``completion`` the family guessed from ``model``.
        fim_tokens: Explicit markers; override ``fim``.
        sections: The system sections, in order (names from :data:`SECTION_NAMES`).
        templates: Per-section template file overrides (``{"role": "my_role.j2"}``); ``output_format``
            maps to ``system_output_<purpose>.j2`` unless overridden.
        overrides: Per-section literal text replacing the template (``{{ name }}`` substituted).
        instructions: The blueprint's instructions.
        platform: The platform the agent works for (Platform section).
        knowledge: Static knowledge points (Knowledge section; dynamic ones go in Knowledge segments).
        experiences: Few-shot examples (Experience section).
        imports: Import statements placed in the frame before ``try:``.
        reraise: The frame's handler re-raises after printing, so errors keep their line numbers.
        max_repr: Longest variable repr shown in the frame header.
        layout: How a ``chat`` code prompt lays out the rounds: ``frame`` (every segment in one user
            message, ending with the round's program to fill in) or ``turns`` (each round's code is an
            assistant message, what it printed the next user message, which ends with the variables
            and what to reply: how chat models are trained; small ones follow it far better).
        next_goal: The code prompt invites the reply to state the next round's goal (``NextGoal:``),
            which the next frame's header shows (``# Goal:``); the agent sets it in the inline
            thought mode, where the code reply is the round's only reply.
        restate_task: The ``turns`` layout's last user message says the latest request again just above
            what to reply (``The task: ...``): a small model that read one output checks it against the
            task instead of finishing with it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: Protocol = "chat"
    model: str = ""
    fim: str = "auto"
    fim_tokens: FimTokens | None = None
    sections: tuple[str, ...] = DEFAULT_SECTIONS
    templates: dict[str, str] = Field(default_factory=dict)
    overrides: dict[str, str] = Field(default_factory=dict)
    instructions: Instructions = Field(default_factory=Instructions)
    platform: str = "codeact, a code-driven agent engine"
    knowledge: tuple[str, ...] = ()
    experiences: tuple[Experience, ...] = ()
    imports: tuple[str, ...] = ()
    reraise: bool = True
    max_repr: int = Field(default=80, ge=10, le=400)
    next_goal: bool = False
    layout: Layout = "frame"
    restate_task: bool = False

    @field_validator("sections")
    @classmethod
    def _known_sections(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [s for s in value if s not in SECTION_NAMES]
        if unknown:
            raise ValueError(f"unknown system section(s) {unknown}: use names from {list(SECTION_NAMES)}")
        if len(set(value)) != len(value):
            raise ValueError(f"system sections {list(value)} repeat a name: list each section once")
        return value

    @field_validator("templates")
    @classmethod
    def _known_templates(cls, value: dict[str, str]) -> dict[str, str]:
        shipped = set(prompts.template_names())
        for section, name in value.items():
            if section not in SECTION_NAMES:
                raise ValueError(f"templates.{section}: unknown section; use names from {list(SECTION_NAMES)}")
            if name not in shipped:
                raise ValueError(f"templates.{section}: template {name!r} does not exist in the prompts package")
        return value

    @field_validator("overrides")
    @classmethod
    def _known_overrides(cls, value: dict[str, str]) -> dict[str, str]:
        for section in value:
            if section not in SECTION_NAMES:
                raise ValueError(f"overrides.{section}: unknown section; use names from {list(SECTION_NAMES)}")
        return value

    @field_validator("fim")
    @classmethod
    def _known_family(cls, value: str) -> str:
        if value != "auto" and value not in FIM_FAMILIES:
            raise ValueError(f"unknown FIM family {value!r}: use 'auto' or one of {sorted(FIM_FAMILIES)}")
        return value

    @field_validator("imports")
    @classmethod
    def _valid_imports(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        try:
            validate_imports(value)
        except Exception as exc:  # PromptConfigError -> ValueError, so pydantic reports the field
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _variables_defined(self) -> PromptConfig:
        variables = self.instructions.variables
        self.instructions.text("system")
        self.instructions.text("developer")
        for section, text in self.overrides.items():
            substitute(text, variables, where=f"overrides.{section}")
        return self

    @classmethod
    def from_blueprint(cls, *, instructions: dict[str, Any] | None = None, **fields: Any) -> PromptConfig:
        """Build from a blueprint's ``instructions`` mapping plus any other field."""
        return cls.model_validate({"instructions": instructions or {}, **fields})

    def tokens(self) -> FimTokens:
        """The FIM markers this configuration uses."""
        if self.fim_tokens is not None:
            return self.fim_tokens
        if self.fim == "auto" and self.protocol == "chat":
            return FIM_FAMILIES["qwen"]
        return fim_tokens_for(self.model, family=self.fim)
