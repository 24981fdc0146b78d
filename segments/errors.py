"""Errors raised while building prompts or reading model replies.

::

    CodeactError                 prompts.errors
    ├── PromptConfigError        a prompt configuration is invalid (unknown section, FIM family, ...)
    └── ReplyParseError          a model reply could not be read
        ├── CodeParseError       the reply holds no runnable Python code
        └── ThoughtParseError    a Thought/Plan/NextGoal reply is empty or unreadable

A :class:`ReplyParseError` message is written FOR THE MODEL: the engine turns it into an
Evaluation segment, so it says what was wrong with the reply and how to write the next one.
"""

from __future__ import annotations

from codeact.prompts.errors import CodeactError

__all__ = ["CodeParseError", "PromptConfigError", "ReplyParseError", "ThoughtParseError"]


class PromptConfigError(CodeactError):
    """A prompt configuration is invalid (unknown section, template, FIM family or variable).

    Args:
        message: What is wrong, where (the config field), and the fix.
        field: The configuration field at fault, for example ``templates.role``.
    """

    code = "prompt.config.invalid"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


class ReplyParseError(CodeactError):
    """A model reply could not be read; the message tells the model what to fix.

    Args:
        message: The feedback for the model (becomes an Evaluation segment).
        reason: A stable machine-readable reason (``empty``, ``no_code``, ``syntax``, ...).
        reply: The raw reply, kept for the round record.
    """

    code = "reply.invalid"

    def __init__(self, message: str, *, reason: str = "invalid", reply: str = "") -> None:
        super().__init__(message)
        self.reason = reason
        self.reply = reply


class CodeParseError(ReplyParseError):
    """A model reply holds no runnable code; the message tells the model what to fix.

    Args:
        message: The feedback for the model.
        reason: ``empty``, ``no_code``, ``wrong_language`` or ``syntax``.
        reply: The raw reply.
        line: For ``syntax``: the line of the model's code (1-based) the error is on, when known.
        text: For ``syntax``: that line's text, stripped.
        detail: For ``syntax``: Python's own message (``'(' was never closed``).
    """

    code = "reply.code.missing"

    def __init__(
        self,
        message: str,
        *,
        reason: str = "invalid",
        reply: str = "",
        line: int | None = None,
        text: str = "",
        detail: str = "",
    ) -> None:
        super().__init__(message, reason=reason, reply=reply)
        self.line = line
        self.text = text
        self.detail = detail


class ThoughtParseError(ReplyParseError):
    """A Thought/Plan/NextGoal reply is empty or holds none of the expected segments."""

    code = "reply.thought.missing"
