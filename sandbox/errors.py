"""Errors raised by the sandbox backends (re-exported by ``codeact.engine.errors``)."""

from __future__ import annotations

from codeact.prompts.errors import CodeactError

__all__ = ["EnvironmentBuildError", "IsolationUnavailableError", "SandboxError", "SandboxImageMissingError"]


class SandboxError(CodeactError):
    """The sandbox could not run the code (not: the code raised; that is a normal result)."""

    code = "sandbox.error"


class IsolationUnavailableError(SandboxError):
    """The OS isolation layer is unavailable and the host did not name a weaker mode."""

    code = "sandbox.isolation.unavailable"


class SandboxImageMissingError(SandboxError):
    """The Docker sandbox image is not built."""

    code = "sandbox.image.missing"


class EnvironmentBuildError(SandboxError):
    """A declared sandbox environment (``sandbox.packages`` / ``sandbox.preset``) could not be built.

    Args:
        message: What failed (names the package and quotes pip's message) and what to do.
        package: The requirement that failed, or the whole list when pip did not say which.
        pip_message: pip's own error lines, or "" when pip did not run.
    """

    code = "sandbox.env.build"

    def __init__(self, message: str, *, package: str = "", pip_message: str = "") -> None:
        super().__init__(message)
        self.package = package
        self.pip_message = pip_message
