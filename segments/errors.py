"""Errors raised while building prompts or reading model replies."""

from __future__ import annotations

from prompts.errors import CodeactError

__all__ = ["CodeParseError"]


class CodeParseError(CodeactError):
    """A model reply holds no runnable code; the message tells the model what to fix."""

    code = "reply.code.missing"
