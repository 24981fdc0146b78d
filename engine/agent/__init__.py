"""The agent runtime: the CodeAct loop (and ReAct), hooks and interceptors, run results."""

from __future__ import annotations

from codeact.engine.agent._input import RunConfig, context_text, resolve_run
from codeact.engine.agent.agent import Agent, RunResult, SandboxFactory, default_sandbox_factory, grants_for
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
    "Hook",
    "HookContext",
    "HookResult",
    "Jump",
    "ModelCall",
    "ModelInterceptor",
    "Outcome",
    "RunConfig",
    "RunContext",
    "RunResult",
    "SandboxFactory",
    "ToolCall",
    "ToolInterceptor",
    "context_text",
    "default_sandbox_factory",
    "grants_for",
    "resolve_run",
]
