"""``codeact sandbox ...``: maintenance of the sandbox backends (``gc`` removes orphan containers)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from sandbox.errors import SandboxError

_sandbox_app = typer.Typer(
    name="sandbox",
    help="Maintain the sandbox backends (Docker containers left behind by crashed hosts).",
    no_args_is_help=True,
)


@_sandbox_app.command("gc")
def gc(
    all_: Annotated[
        bool, typer.Option("--all", help="Remove every codeact sandbox container, also those of running hosts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the removed containers as one JSON array.")] = False,
) -> None:
    """Remove sandbox containers whose host process is no longer alive (found by label).

    Exit 0 when the collection ran (also when nothing was removed), 3 when Docker failed.
    """
    # The docker SDK loads only here, never for other commands.
    from sandbox.docker_sandbox import remove_orphans

    try:
        removed = remove_orphans(include_live=all_)
    except SandboxError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(3) from None
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {"id": c.id, "name": c.name, "session": c.session, "host_pid": c.host_pid, "status": c.status}
                    for c in removed
                ]
            )
        )
        return
    for c in removed:
        typer.echo(f"removed {c.id} {c.name} (session {c.session!r}, host pid {c.host_pid}, {c.status})")
    scope = "sandbox containers" if all_ else "orphan sandbox containers"
    typer.echo(f"{len(removed)} {scope} removed")


def register(app: typer.Typer) -> None:
    """Register the ``sandbox`` command group on ``app``."""
    app.add_typer(_sandbox_app)
