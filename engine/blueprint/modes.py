"""The fixed choices of a blueprint as enums: what the loaded spec carries instead of bare strings.

A blueprint file still spells them as strings (``workflow.mode: codeact``); the validator accepts
exactly the values below (``validator.WORKFLOW_MODES`` ... are these enums' values, in this order)
and the factory turns them into members. Each enum is a ``StrEnum``: a member equals, formats and
serializes (``json.dumps``) as its value, so records, events and API JSON keep the same strings.

Imports nothing of the product.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["SandboxBackend", "ThoughtMode", "WorkflowMode"]


class WorkflowMode(StrEnum):
    """``workflow.mode``: how the agent works (no ``workflow`` block means ``react``)."""

    REACT = "react"
    """JSON function calling, no sandbox."""
    CODEACT = "codeact"
    """The model writes Python each round; it runs in the sandbox."""
    FLOW = "flow"
    """A flow of sub-agents (``codeact.agent/v1`` only; ``engine.flow``)."""

    @classmethod
    def of(cls, value: str | None) -> WorkflowMode | None:
        """The mode a (validated) ``workflow.mode`` names, surrounding blanks ignored; None when unset or unknown."""
        try:
            return cls((value or "").strip())
        except ValueError:
            return None


class ThoughtMode(StrEnum):
    """``workflow.codeact.thought``: where the model's reasoning goes."""

    SEPARATE = "separate"
    """A thought call, then a code call."""
    INLINE = "inline"
    """One call: thought and code together."""
    OFF = "off"
    """No thought."""


class SandboxBackend(StrEnum):
    """``sandbox.backend``: where generated code runs."""

    SUBPROCESS = "subprocess"
    DOCKER = "docker"
