"""Errors of :mod:`codeact.engine.flow` (part of the ``CodeactError`` hierarchy)."""

from __future__ import annotations

from codeact.engine.errors import CodeactError

__all__ = ["FlowError"]


class FlowError(CodeactError):
    """A flow is declared wrongly, or could not run a step.

    Codes: ``flow.*.invalid`` and the like for declarations, ``flow.step.failed``,
    ``flow.step.paused`` and ``flow.routing.failed`` at run time; the message names the flow, the
    agent and what to change.
    """

    code = "flow.invalid"
