"""The one exception hierarchy of codeact.

::

    CodeactError                      prompts.errors (the root every package may import)
    ├── TemplateError                 a prompt template failed to render
    ├── BlueprintError                configuration: a blueprint failed to load/validate/build
    │   ├── BlueprintLoadError        YAML/IO/type errors (codes blueprint.yaml.*, blueprint.type.*)
    │   └── BlueprintFactoryError     validation failed or the host context is incomplete
    ├── ModelError                    the language model call failed (after retries)
    ├── CodeParseError                segments.errors: a reply holds no runnable code
    ├── SandboxError                  sandbox.errors: the sandbox could not run the code
    │   ├── IsolationUnavailableError
    │   └── SandboxImageMissingError
    ├── ToolkitError                  toolkits.errors: toolkit registration / bridge host side
    │   ├── ToolkitDefinitionError
    │   └── ToolkitNotFoundError
    └── StoreError                    the session store (Redis/SQLite) failed

``sandbox``, ``toolkits`` and ``segments`` may not import ``engine`` (ARCHITECTURE.md section 2),
so their errors are defined in those packages and re-exported here. Exceptions carry structured
attributes (``code`` always) and never log.
"""

from __future__ import annotations

from typing import Any

from prompts.errors import CodeactError, TemplateError
from sandbox.errors import IsolationUnavailableError, SandboxError, SandboxImageMissingError
from segments.errors import CodeParseError
from toolkits.errors import ToolkitDefinitionError, ToolkitError, ToolkitNotFoundError

__all__ = [
    "BlueprintError",
    "BlueprintFactoryError",
    "BlueprintLoadError",
    "CodeParseError",
    "CodeactError",
    "IsolationUnavailableError",
    "ModelError",
    "SandboxError",
    "SandboxImageMissingError",
    "StoreError",
    "TemplateError",
    "ToolkitDefinitionError",
    "ToolkitError",
    "ToolkitNotFoundError",
]


class BlueprintError(CodeactError):
    """A blueprint could not be loaded, validated or turned into an agent."""

    code = "blueprint.error"


class BlueprintLoadError(BlueprintError):
    """The blueprint file could not be read or parsed.

    Args:
        message: The problem and its fix.
        code: The stable ai4j-compatible code, e.g. ``blueprint.yaml.invalid``.
        path: JSON-path-like location (``$.tools[1]``) or None.
    """

    def __init__(self, message: str, *, code: str, path: str | None = None) -> None:
        super().__init__(message, code=code)
        self.path = path


class BlueprintFactoryError(BlueprintError):
    """The factory refused to build an agent; ``report`` holds validation issues if any."""

    def __init__(self, message: str, *, code: str, report: Any = None) -> None:
        super().__init__(message, code=code)
        self.report = report


class ModelError(CodeactError):
    """The model call failed after retries (provider error, bad configuration, no model)."""

    code = "model.error"


class StoreError(CodeactError):
    """The session store failed; the message names the store URL (without credentials)."""

    code = "store.error"
