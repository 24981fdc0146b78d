"""``codeact toolkits list [--toolkit MOD:OBJ]... [--blueprint FILE]``: the toolkits as the model sees them.

Built-in toolkits come from the ``codeact.toolkits`` entry points; ``--toolkit`` adds toolkits
from a module or a ``.py`` file; ``--blueprint`` adds the blueprint's MCP servers (``toolkits[].mcp``,
started for the listing and stopped after it). Exit 0 on success, 2 when a toolkit cannot be loaded.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from codeact.toolkits import ToolkitRegistry
    from codeact.toolkits.mcp import McpToolkit

_toolkits_app = typer.Typer(
    name="toolkits",
    help="Inspect toolkits: what the model sees of them.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Register the ``toolkits`` command group on ``app``."""
    app.add_typer(_toolkits_app)


@_toolkits_app.command("list")
def list_toolkits(
    toolkit: Annotated[
        list[str] | None,
        typer.Option(
            "--toolkit",
            help="Add a toolkit: MODULE:OBJECT, where MODULE is importable or a path to a .py file (repeatable).",
            show_default=False,
        ),
    ] = None,
    builtins: Annotated[
        bool, typer.Option("--builtins/--no-builtins", help="Include the installed (entry point) toolkits.")
    ] = True,
    blueprint: Annotated[
        str | None,
        typer.Option(
            "--blueprint", help="Add the MCP servers a blueprint declares (toolkits[].mcp).", show_default=False
        ),
    ] = None,
) -> None:
    """Print the toolkits as the model sees them: Python classes of async stubs."""
    from codeact.toolkits import ToolkitError, load_registry, render_stubs

    started: list[McpToolkit] = []
    try:
        registry = load_registry(toolkit or [], builtins=builtins, replace=False)
        if blueprint is not None:
            started = _blueprint_toolkits(blueprint, registry)
        source = render_stubs(registry)
    except ToolkitError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None
    finally:
        for item in started:
            item.close()
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.syntax import Syntax

        Console().print(Syntax(source, "python", theme="ansi_dark", background_color="default"))
    else:
        typer.echo(source, nl=False)


def _blueprint_toolkits(path: str, registry: ToolkitRegistry) -> list[McpToolkit]:
    from pathlib import Path

    from codeact.engine.agent import mcp_toolkits
    from codeact.engine.blueprint import format_load_error, load_path
    from codeact.engine.errors import BlueprintLoadError

    try:
        bp = load_path(Path(path))
    except BlueprintLoadError as exc:
        typer.echo(format_load_error(exc), err=True)
        raise typer.Exit(2) from None
    return mcp_toolkits(bp, registry)
