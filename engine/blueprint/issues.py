"""Validation issues and the report the validator returns (records, not errors)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["Severity", "ValidationIssue", "ValidationReport"]


class Severity(enum.StrEnum):
    """How bad an issue is; the report is valid iff it holds no ``ERROR``."""

    ERROR = "ERROR"
    WARNING = "WARNING"


@dataclass(frozen=True, kw_only=True)
class ValidationIssue:
    """One finding of the validator.

    Attributes:
        severity: ``ERROR`` blocks the factory, ``WARNING`` does not.
        path: JSON-path-like location in the blueprint, e.g. ``$.tools[1].ref``.
        code: The stable machine-readable code, e.g. ``blueprint.tool.ref.required``.
        message: What is wrong and how to fix it.
    """

    severity: Severity
    path: str
    code: str
    message: str

    @classmethod
    def error(cls, path: str, code: str, message: str) -> ValidationIssue:
        """Build an ``ERROR`` issue."""
        return cls(severity=Severity.ERROR, path=path, code=code, message=message)

    @classmethod
    def warning(cls, path: str, code: str, message: str) -> ValidationIssue:
        """Build a ``WARNING`` issue."""
        return cls(severity=Severity.WARNING, path=path, code=code, message=message)

    def to_dict(self) -> dict[str, str]:
        """The issue as JSON-able data (``severity``, ``path``, ``code``, ``message``)."""
        return {"severity": self.severity.value, "path": self.path, "code": self.code, "message": self.message}

    def format(self) -> str:
        """One line, ai4j style: ``ERROR $.model.provider blueprint.model.provider.required: ...``."""
        return f"{self.severity.value} {self.path} {self.code}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class ValidationReport:
    """The ordered issues of one validation run."""

    issues: tuple[ValidationIssue, ...] = ()

    @property
    def valid(self) -> bool:
        """True when no issue is an ``ERROR``."""
        return not self.errors

    @property
    def errors(self) -> tuple[ValidationIssue, ...]:
        """The ``ERROR`` issues, in report order."""
        return tuple(issue for issue in self.issues if issue.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[ValidationIssue, ...]:
        """The ``WARNING`` issues, in report order."""
        return tuple(issue for issue in self.issues if issue.severity is Severity.WARNING)

    def codes(self) -> list[str]:
        """The codes of all issues, in report order (handy in tests and logs)."""
        return [issue.code for issue in self.issues]

    def to_dict(self) -> dict[str, object]:
        """``{"valid": bool, "issues": [...]}`` as printed by ``codeact validate --json``."""
        return {"valid": self.valid, "issues": [issue.to_dict() for issue in self.issues]}
