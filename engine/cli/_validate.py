"""``codeact validate FILE [--json]``: load and validate a blueprint.

Exit 0 when valid, 1 when the report holds an error, 2 when the file cannot be loaded
(``Blueprint load error [<code>]: <message>`` on stderr).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Register ``validate`` on ``app``."""
    app.command("validate")(validate)


def validate(
    file: Annotated[Path, typer.Argument(help="The blueprint YAML file.", show_default=False)],
    json_output: Annotated[
        bool, typer.Option("--json", help='Print {"valid": bool, "issues": [...]} as JSON.')
    ] = False,
) -> None:
    """Load and validate a blueprint; exit 0 valid, 1 invalid, 2 load error."""
    from engine.blueprint import format_load_error, load_path, validate_blueprint
    from engine.errors import BlueprintLoadError

    try:
        blueprint = load_path(file)
    except BlueprintLoadError as exc:
        typer.echo(format_load_error(exc), err=True)
        raise typer.Exit(2) from None
    report = validate_blueprint(blueprint)
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
