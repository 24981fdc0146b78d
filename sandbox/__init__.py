"""Where generated code runs: subprocess and Docker backends, the policy, and the in-sandbox runtime."""

from __future__ import annotations

from codeact.sandbox.artifacts import Artifact
from codeact.sandbox.base import Limits, RuntimeWorker, Sandbox
from codeact.sandbox.channel import Channel, RpcHandler
from codeact.sandbox.docker_sandbox import DockerSandbox
from codeact.sandbox.errors import IsolationUnavailableError, SandboxError, SandboxImageMissingError
from codeact.sandbox.open import SandboxSpec, open_sandbox
from codeact.sandbox.policy import DEFAULT_IMPORTS, CompiledCode, CompileFailure, Policy, compile_code
from codeact.sandbox.result import ExecutionError, ExecutionResult, Uncaptured
from codeact.sandbox.subprocess_sandbox import SubprocessSandbox

__all__ = [
    "Artifact",
    "Channel",
    "CompileFailure",
    "CompiledCode",
    "DEFAULT_IMPORTS",
    "DockerSandbox",
    "ExecutionError",
    "ExecutionResult",
    "IsolationUnavailableError",
    "Limits",
    "Policy",
    "RpcHandler",
    "RuntimeWorker",
    "Sandbox",
    "SandboxError",
    "SandboxImageMissingError",
    "SandboxSpec",
    "SubprocessSandbox",
    "Uncaptured",
    "compile_code",
    "open_sandbox",
]
