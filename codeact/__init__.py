"""codeact: a code-driven agent engine.

Each round a language model writes Python; a sandbox runs it; host toolkits are proxied into that code
over JSON-RPC; what the code defines is kept for the next round, a resume or a replay.

The public face::

    from codeact import Agent, operation, toolkit

    @toolkit(name="devops", description="DevOps platform")
    class DevOps:
        @operation
        async def get_project_info(self, project_id: str) -> dict:
            \"\"\"Basic info of a project.\"\"\"
            ...

    with Agent.from_blueprint("agent.yaml", toolkits=[DevOps()], model="openai/gpt-4.1-mini") as agent:
        print(agent.run_sync("Which login requirements of P-123 are open?").answer)

The subpackages (``codeact.engine``, ``codeact.toolkits``, ``codeact.sandbox``, ``codeact.segments``,
``codeact.prompts``) are the repository's top-level folders of the same names (docs/design.md, "One
namespace"). Every name here is imported on first use, so ``import codeact`` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, RunConfig, RunResult
    from codeact.engine.errors import (
        BlueprintError,
        CodeactError,
        ModelError,
        SandboxError,
        StoreError,
        ToolkitError,
    )
    from codeact.engine.events import Event
    from codeact.engine.flow import FlowAgent
    from codeact.toolkits import DynamicToolkit, ToolkitContext, operation, toolkit

__all__ = [
    "Agent",
    "BlueprintError",
    "CodeactError",
    "DynamicToolkit",
    "Event",
    "FlowAgent",
    "ModelError",
    "RunConfig",
    "RunResult",
    "SandboxError",
    "StoreError",
    "ToolkitContext",
    "ToolkitError",
    "__version__",
    "operation",
    "toolkit",
]

__version__ = "0.1.0"

_LAZY = {
    "Agent": "codeact.engine.agent",
    "BlueprintError": "codeact.engine.errors",
    "CodeactError": "codeact.engine.errors",
    "DynamicToolkit": "codeact.toolkits",
    "Event": "codeact.engine.events",
    "FlowAgent": "codeact.engine.flow",
    "ModelError": "codeact.engine.errors",
    "RunConfig": "codeact.engine.agent",
    "RunResult": "codeact.engine.agent",
    "SandboxError": "codeact.engine.errors",
    "StoreError": "codeact.engine.errors",
    "ToolkitContext": "codeact.toolkits",
    "ToolkitError": "codeact.engine.errors",
    "operation": "codeact.toolkits",
    "toolkit": "codeact.toolkits",
}


def __getattr__(name: str) -> Any:
    """Import a public name on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'codeact' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
