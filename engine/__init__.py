"""codeact engine: blueprint -> factory -> agent loop -> model client -> store -> events, CLI."""

from __future__ import annotations

from engine.errors import (
    BlueprintError,
    CodeactError,
    ModelError,
    SandboxError,
    StoreError,
    ToolkitError,
)

__all__ = ["BlueprintError", "CodeactError", "ModelError", "SandboxError", "StoreError", "ToolkitError"]
