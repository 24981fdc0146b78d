"""Errors raised by toolkit registration and the host side of the bridge."""

from __future__ import annotations

from codeact.prompts.errors import CodeactError

__all__ = [
    "DuplicateToolkitError",
    "ToolkitDefinitionError",
    "ToolkitError",
    "ToolkitLoadError",
    "ToolkitNotFoundError",
]


class ToolkitError(CodeactError):
    """Base class of toolkit errors."""

    code = "toolkit.error"


class ToolkitDefinitionError(ToolkitError):
    """A toolkit or operation is declared wrongly (raised at definition time, names the method)."""

    code = "toolkit.definition"


class ToolkitNotFoundError(ToolkitError):
    """A toolkit name is not in the registry."""

    code = "toolkit.notFound"


class DuplicateToolkitError(ToolkitError):
    """Two toolkits claim the same name in one registry (the message names both)."""

    code = "toolkit.duplicate"


class ToolkitLoadError(ToolkitError):
    """A ``MODULE:OBJECT`` reference or an entry point could not be loaded as a toolkit."""

    code = "toolkit.load"
