"""Errors raised by the sandbox backends (re-exported by ``engine.errors``)."""

from __future__ import annotations

from prompts.errors import CodeactError

__all__ = ["IsolationUnavailableError", "SandboxError", "SandboxImageMissingError"]


class SandboxError(CodeactError):
    """The sandbox could not run the code (not: the code raised; that is a normal result)."""

    code = "sandbox.error"


class IsolationUnavailableError(SandboxError):
    """The OS isolation layer is unavailable and the host did not name a weaker mode."""

    code = "sandbox.isolation.unavailable"


class SandboxImageMissingError(SandboxError):
    """The Docker sandbox image is not built."""

    code = "sandbox.image.missing"
