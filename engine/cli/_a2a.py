"""``codeact a2a serve BLUEPRINT --port P``: a blueprint published as an A2A agent.

The agent card is at ``http://HOST:PORT/.well-known/agent-card.json``; each A2A task is one run
of the blueprint (its context is the session), streamed as status updates; ``tasks/cancel``
cancels the run. Exit 2 when the blueprint or a toolkit cannot be loaded.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from codeact.prompts.errors import require_extra

_a2a_app = typer.Typer(name="a2a", help="codeact and the Agent2Agent (A2A) protocol.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Register the ``a2a`` command group on ``app``."""
    app.add_typer(_a2a_app)


@_a2a_app.command("serve")
def serve(
    blueprint: Annotated[Path, typer.Argument(help="The blueprint to publish.")],
    port: Annotated[int, typer.Option("--port", help="The HTTP port.")] = 9999,
    host: Annotated[str, typer.Option("--host", help="The interface to bind.")] = "127.0.0.1",
    toolkit: Annotated[
        list[str] | None, typer.Option("--toolkit", help="A toolkit: MODULE:OBJECT (repeatable).", show_default=False)
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="The model (default: the blueprint's).")] = None,
    store: Annotated[str | None, typer.Option("--store", help="The session store URL.")] = None,
    isolation: Annotated[str, typer.Option("--isolation", help="bwrap (default) or process.")] = "bwrap",
) -> None:
    """Serve BLUEPRINT as an A2A agent (card, tasks, streaming, cancel)."""
    from codeact.engine.errors import CodeactError

    if isolation not in ("bwrap", "process"):
        typer.echo(f"error: --isolation must be 'bwrap' or 'process', got {isolation!r}", err=True)
        raise typer.Exit(2)
    require_extra("codeact a2a serve", "a2a", "a2a", "uvicorn")
    try:
        asyncio.run(
            _serve(
                blueprint, host=host, port=port, toolkits=toolkit or [], model=model, store=store, isolation=isolation
            )
        )
    except CodeactError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None
    except KeyboardInterrupt:
        pass


async def _serve(
    blueprint: Path, *, host: str, port: int, toolkits: list[str], model: str | None, store: str | None, isolation: str
) -> None:
    import uvicorn

    from codeact.engine.a2a import build_app
    from codeact.engine.agent import Agent

    agent = Agent.from_blueprint(
        blueprint,
        toolkits=toolkits,
        model=model,
        store=store,
        isolation="process" if isolation == "process" else "bwrap",
        stream=False,
    )
    try:
        app = build_app(agent, url=f"http://{host}:{port}/")
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")
        await uvicorn.Server(config).serve()
    finally:
        await agent.aclose()
