"""Where generated code runs: subprocess and Docker backends, the policy, and the in-sandbox runtime."""

from __future__ import annotations

from sandbox.errors import IsolationUnavailableError, SandboxError, SandboxImageMissingError

__all__ = ["IsolationUnavailableError", "SandboxError", "SandboxImageMissingError"]
