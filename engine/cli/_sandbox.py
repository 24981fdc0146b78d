"""``codeact sandbox ...``: maintenance of the sandbox backends (``gc`` removes what crashed hosts left)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

_sandbox_app = typer.Typer(
    name="sandbox",
    help="Maintain the sandbox backends (containers, runtimes and directories left behind by crashed hosts).",
    no_args_is_help=True,
)


@_sandbox_app.command("gc")
def gc(
    all_: Annotated[
        bool, typer.Option("--all", help="Remove every codeact sandbox leftover, also those of running hosts.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was removed as one JSON array.")] = False,
) -> None:
    """Remove what crashed hosts left behind: containers, runtimes, bridge socket and work directories.

    Each resource names its host process (container labels, the runtime's command line, the
    directory name); those whose host is no longer alive are removed, with their session.
    Exit 0 when the collection ran (also when nothing was removed), 3 when Docker failed.
    """
    from sandbox.leftovers import remove_leftovers

    removed, docker_error = remove_leftovers(include_live=all_)
    if as_json:
        typer.echo(
            json.dumps(
                [
                    {
                        "kind": c.kind,
                        "id": c.id,
                        "name": c.name,
                        "session": c.session,
                        "host_pid": c.host_pid,
                        "status": c.status,
                    }
                    for c in removed
                ]
            )
        )
    else:
        for c in removed:
            what = f"{c.id} {c.name}" if c.kind == "container" else f"{_KINDS[c.kind]} {c.id}"
            session = f"session {c.session!r}, " if c.session and c.session != "-" else ""
            typer.echo(f"removed {what} ({session}host pid {c.host_pid or '?'}, {c.status})")
        scope = "sandbox leftovers" if all_ else "orphan sandbox leftovers"
        typer.echo(f"{len(removed)} {scope} removed")
    if docker_error is not None and not docker_error.startswith("the docker SDK is not installed"):
        typer.echo(f"error: {docker_error}", err=True)
        raise typer.Exit(3)


_KINDS = {"runtime": "runtime process", "socket_dir": "bridge socket directory", "work_dir": "work directory"}


def register(app: typer.Typer) -> None:
    """Register the ``sandbox`` command group on ``app``."""
    app.add_typer(_sandbox_app)
