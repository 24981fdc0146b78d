"""``codeact toolkits list [--toolkit MOD:OBJ]...``: the toolkits as the model sees them (Python stubs).

Built-in toolkits come from the ``codeact.toolkits`` entry points; ``--toolkit`` adds toolkits
from a module or a ``.py`` file. Exit 0 on success, 2 when a toolkit cannot be loaded.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

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
) -> None:
    """Print the toolkits as the model sees them: Python classes of async stubs."""
    from toolkits import ToolkitError, load_registry, render_stubs

    try:
        registry = load_registry(toolkit or [], builtins=builtins, replace=False)
    except ToolkitError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None
    source = render_stubs(registry)
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.syntax import Syntax

        Console().print(Syntax(source, "python", theme="ansi_dark", background_color="default"))
    else:
        typer.echo(source, nl=False)
