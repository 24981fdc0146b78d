"""Where generated code runs: subprocess and Docker backends, the policy, and the in-sandbox runtime."""

from __future__ import annotations

from sandbox.artifacts import Artifact
from sandbox.base import Limits, RuntimeWorker, Sandbox
from sandbox.channel import Channel, RpcHandler
from sandbox.docker_sandbox import DockerSandbox
from sandbox.errors import IsolationUnavailableError, SandboxError, SandboxImageMissingError
from sandbox.policy import DEFAULT_IMPORTS, CompiledCode, CompileFailure, Policy, compile_code
from sandbox.result import ExecutionError, ExecutionResult, Uncaptured
from sandbox.subprocess_sandbox import SubprocessSandbox

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
    "SubprocessSandbox",
    "Uncaptured",
    "compile_code",
]
