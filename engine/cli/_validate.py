"""``codeact validate FILE [--toolkit MOD:OBJ ...] [--json] [--strict]``: load and validate a blueprint.

Exit 0 when valid, 1 when the report holds an error (with ``--strict``: or a warning), 2 when the
file (or a ``--toolkit``) cannot be loaded (``Blueprint load error [<code>]: <message>`` on stderr;
with ``--json`` also ``{"valid": false, "error": {"code", "message"}, "issues": []}`` on stdout).

With ``--toolkit`` the toolkits the blueprint grants (``toolkits[].ref``, ``tools[].ref``) are
checked against the installed toolkits plus the given ones, as ``codeact run`` will resolve them.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from codeact.engine.blueprint import Blueprint, ValidationIssue


def register(app: typer.Typer) -> None:
    """Register ``validate`` on ``app``."""
    app.command("validate")(validate)


def validate(
    file: Annotated[Path, typer.Argument(help="The blueprint YAML file.", show_default=False)],
    toolkit: Annotated[
        list[str] | None,
        typer.Option("--toolkit", help="MODULE:OBJECT (repeatable): also check the blueprint's toolkit refs."),
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help='Print {"valid": bool, "issues": [...]} as JSON.')
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings are errors (exit 1 on any warning).")] = False,
) -> None:
    """Load and validate a blueprint; exit 0 valid, 1 invalid, 2 load error."""
    from codeact.engine.blueprint import (
        Severity,
        ValidationIssue,
        ValidationReport,
        format_load_error,
        load_path,
        ungranted_error,
        validate_blueprint,
    )
    from codeact.engine.errors import BlueprintLoadError

    try:
        blueprint = load_path(file)
        names, offered = _registry_names(list(toolkit)) if toolkit else (None, ())
    except BlueprintLoadError as exc:
        _load_error(format_load_error(exc), exc.code, exc.message, json_output)
        raise typer.Exit(2) from None
    except _ToolkitRefError as exc:
        _load_error(f"--toolkit: {exc.message}", exc.code, exc.message, json_output)
        raise typer.Exit(2) from None
    report = validate_blueprint(blueprint)
    if names is not None:
        report = ValidationReport(issues=(*report.issues, *_unknown_toolkits(blueprint, names)))
    ungranted = ungranted_error(blueprint, offered) if offered else None
    if ungranted is not None:  # as codeact run refuses it: loaded by --toolkit, granted nowhere
        report = ValidationReport(
            issues=(*report.issues, ValidationIssue.error("$.toolkits", ungranted.code, ungranted.message))
        )
    if strict:  # --strict: every warning counts as an error (the codes and messages stay)
        report = ValidationReport(issues=tuple(replace(issue, severity=Severity.ERROR) for issue in report.issues))
    if json_output:
        typer.echo(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        errors, warnings = len(report.errors), len(report.warnings)
        counts = f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}"
        verdict = "valid" if report.valid else "invalid"
        typer.echo(f"Blueprint {file} is {verdict} ({counts}).")
        for issue in report.issues:
            typer.echo(f"  {issue.format()}")
    raise typer.Exit(0 if report.valid else 1)


class _ToolkitRefError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _load_error(text: str, code: str, message: str, json_output: bool) -> None:
    typer.echo(text, err=True)
    if json_output:
        payload: dict[str, Any] = {"valid": False, "error": {"code": code, "message": message}, "issues": []}
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))


def _registry_names(refs: list[str]) -> tuple[list[str], tuple[str, ...]]:
    """The names the host's registry with ``refs`` knows, and those ``refs`` loaded."""
    from codeact.toolkits import ToolkitError, load_registry, load_toolkit_ref

    try:
        registry = load_registry()
        offered = tuple(registry.register(load_toolkit_ref(ref), replace=True).name for ref in refs)
        return registry.names(), offered
    except ToolkitError as exc:
        raise _ToolkitRefError(getattr(exc, "code", "toolkit.load"), exc.message) from None


def _unknown_toolkits(blueprint: Blueprint, names: list[str]) -> list[ValidationIssue]:
    from codeact.engine.blueprint import ValidationIssue

    known = set(names) | ({"agents"} if blueprint.subagents else set())
    refs = [(f"$.toolkits[{i}].ref", e.ref) for i, e in enumerate(blueprint.toolkits) if e is not None]
    refs += [(f"$.tools[{i}].ref", (e.ref or "").partition(".")[0]) for i, e in enumerate(blueprint.tools) if e]
    issues = []
    for where, ref in refs:
        ref = (ref or "").strip()
        if not ref or ref in known:
            continue
        close = difflib.get_close_matches(ref, sorted(known), n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        issues.append(
            ValidationIssue.error(
                where,
                "blueprint.toolkit.notFound",
                f"toolkit {ref!r} is not installed nor given with --toolkit (loaded: {', '.join(sorted(known))}); "
                f"{hint}pass --toolkit MODULE:OBJECT for it.",
            )
        )
    return issues
