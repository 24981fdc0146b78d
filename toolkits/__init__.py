"""Host side of tools: decorators, registry, the JSON-RPC bridge dispatcher, stubs, built-ins."""

from __future__ import annotations

from toolkits.errors import ToolkitDefinitionError, ToolkitError, ToolkitNotFoundError

__all__ = ["ToolkitDefinitionError", "ToolkitError", "ToolkitNotFoundError"]
