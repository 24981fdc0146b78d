"""codeact engine: blueprint -> factory -> agent loop -> model client -> store -> events, CLI.

The Python API is :class:`Agent` (see docs/python-api.md)::

    from codeact.engine import Agent

    with Agent.from_blueprint("agent.yaml", toolkits=[DevOps()], model="openai/gpt-4.1-mini") as agent:
        result = agent.run_sync("Which login requirements of P-123 are open?")
        print(result.answer)

A blueprint that may be an agent or a flow is built by one function, with one options value::

    from codeact.engine import BuildOptions, build

    with build("agent.yaml", toolkits=[DevOps()], options=BuildOptions(model="openai/gpt-4.1-mini")) as agent:
        ...

``Agent``, ``BuildOptions``, ``build``, ``RunResult`` and ``Event`` are imported on first use, so
``import engine`` (and the ``codeact validate`` command) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from codeact.engine.errors import (
    BlueprintError,
    CodeactError,
    ModelError,
    SandboxError,
    StoreError,
    ToolkitError,
)

if TYPE_CHECKING:
    from codeact.engine.agent import Agent, RunResult
    from codeact.engine.agent import BuildOptions as BuildOptions
    from codeact.engine.builder import build as build
    from codeact.engine.events import Event

__all__ = [
    "Agent",
    "BlueprintError",
    "CodeactError",
    "Event",
    "ModelError",
    "RunResult",
    "SandboxError",
    "StoreError",
    "ToolkitError",
]
# ``build`` and ``BuildOptions`` resolve here too (lazily, below); ``__all__`` stays the three names the
# Python API documents (tests/engine/test_python_api.py pins it).

_LAZY = {
    "Agent": "codeact.engine.agent",
    "BuildOptions": "codeact.engine.agent",
    "RunResult": "codeact.engine.agent",
    "Event": "codeact.engine.events",
    "build": "codeact.engine.builder",
}


def __getattr__(name: str) -> Any:
    """Import the run-time names (``Agent``, ``RunResult``, ``Event``) on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
