"""Shared helpers for the blueprint tests (fixture paths, issue triples)."""

from __future__ import annotations

from pathlib import Path

from codeact.engine.blueprint import ValidationReport, load_path, validate_blueprint

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def fixture(name: str) -> Path:
    return FIXTURES / name


def triples(report: ValidationReport) -> list[tuple[str, str, str]]:
    """(severity, path, code) of every issue, in report order."""
    return [(issue.severity.value, issue.path, issue.code) for issue in report.issues]


def report_for(name: str) -> ValidationReport:
    return validate_blueprint(load_path(fixture(name)))
