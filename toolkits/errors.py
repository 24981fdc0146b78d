"""Errors raised by toolkit registration and the host side of the bridge."""

from __future__ import annotations

from prompts.errors import CodeactError

__all__ = ["ToolkitDefinitionError", "ToolkitError", "ToolkitNotFoundError"]


class ToolkitError(CodeactError):
    """Base class of toolkit errors."""

    code = "toolkit.error"


class ToolkitDefinitionError(ToolkitError):
    """A toolkit or operation is declared wrongly (raised at definition time, names the method)."""

    code = "toolkit.definition"


class ToolkitNotFoundError(ToolkitError):
    """A toolkit name is not in the registry."""

    code = "toolkit.notFound"
