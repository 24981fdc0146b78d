"""The root of codeact's exception hierarchy.

It lives in ``prompts`` because ``prompts`` is the one package every other package may import
(ARCHITECTURE.md section 2): ``segments`` imports only ``prompts``, and ``sandbox`` and ``toolkits``
never import ``engine``. The whole tree is drawn in ``engine/errors.py``.
"""

from __future__ import annotations

__all__ = ["CodeactError", "TemplateError"]


class CodeactError(Exception):
    """Base class of every error codeact raises on purpose.

    Args:
        message: What failed, where, and what to do about it.
        code: A stable, dotted machine-readable code (for example ``blueprint.yaml.invalid``).
    """

    code: str = "codeact.error"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class TemplateError(CodeactError):
    """A prompt template failed to load or render (a missing variable names the template)."""

    code = "prompt.template"

    def __init__(self, message: str, *, template: str, variable: str | None = None) -> None:
        super().__init__(message)
        self.template = template
        self.variable = variable
