"""The agent runtime: the CodeAct loop (and ReAct), hooks and interceptors, run results."""

from __future__ import annotations

from codeact.engine.agent._assemble import (
    BuildOptions,
    assemble,
    assemble_spec,
    close_now,
    load_blueprint,
    mcp_toolkits,
    model_routes,
    open_owned,
    toolkit_registry,
)
from codeact.engine.agent._input import RunConfig, context_text, resolve_run
from codeact.engine.agent.agent import KEEP, Agent, RunResult, SandboxFactory, default_sandbox_factory, grants_for
from codeact.engine.agent.context import Outcome, RunContext
from codeact.engine.agent.hooks import (
    Hook,
    HookContext,
    HookResult,
    Jump,
    ModelCall,
    ModelInterceptor,
    ToolCall,
    ToolInterceptor,
)

__all__ = [
    "Agent",
    "BuildOptions",
    "Hook",
    "HookContext",
    "HookResult",
    "Jump",
    "KEEP",
    "ModelCall",
    "ModelInterceptor",
    "Outcome",
    "RunConfig",
    "RunContext",
    "RunResult",
    "SandboxFactory",
    "ToolCall",
    "ToolInterceptor",
    "assemble",
    "assemble_spec",
    "close_now",
    "context_text",
    "default_sandbox_factory",
    "grants_for",
    "load_blueprint",
    "mcp_toolkits",
    "model_routes",
    "open_owned",
    "resolve_run",
    "toolkit_registry",
]
