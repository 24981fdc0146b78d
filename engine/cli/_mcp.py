"""``codeact mcp serve``: codeact's toolkits and a ``run_python`` tool as an MCP server.

Over stdio by default (for desktop assistants and other MCP clients that start a command), or
streamable HTTP at ``http://HOST:PORT/mcp`` with ``--port``. ``--blueprint`` adds the MCP servers
a blueprint declares (``toolkits[].mcp``), so a client reaches them through codeact's sandbox too.
Exit 2 when a toolkit cannot be loaded.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Annotated

import typer

from codeact.engine.cli._options import Toolkits

if TYPE_CHECKING:
    from codeact.sandbox import Sandbox
    from codeact.toolkits import ToolkitBridge
    from codeact.toolkits.mcp import McpToolkit

_mcp_app = typer.Typer(name="mcp", help="codeact and the Model Context Protocol.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Register the ``mcp`` command group on ``app``."""
    app.add_typer(_mcp_app)


@_mcp_app.command("serve")
def serve(
    toolkit: Toolkits = None,
    blueprint: Annotated[
        str | None,
        typer.Option("--blueprint", help="Also serve the MCP servers this blueprint declares.", show_default=False),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", help="Serve streamable HTTP on this port (default: stdio).", show_default=False),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="The HTTP interface to bind.")] = "127.0.0.1",
    isolation: Annotated[
        str, typer.Option("--isolation", help="run_python's sandbox: bwrap (default) or process (weaker).")
    ] = "bwrap",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per run_python call.")] = 60.0,
) -> None:
    """Serve every toolkit operation as an MCP tool, plus run_python (code mode)."""
    from codeact.engine.mcp import CodeSessions, build_server, serve_http, serve_stdio
    from codeact.toolkits import ToolkitError, load_registry

    if isolation not in ("bwrap", "process"):
        typer.echo(f"error: --isolation must be 'bwrap' or 'process', got {isolation!r}", err=True)
        raise typer.Exit(2)
    started: list[McpToolkit] = []
    try:
        registry = load_registry(toolkit or [])
        if blueprint is not None:
            from codeact.engine.cli._toolkits import _blueprint_toolkits

            started = _blueprint_toolkits(blueprint, registry)
    except ToolkitError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None

    def factory(bridge: ToolkitBridge) -> Sandbox:
        from codeact.sandbox import SandboxSpec, open_sandbox

        return open_sandbox(SandboxSpec(isolation="process" if isolation == "process" else "bwrap"), bridge=bridge)

    sessions = CodeSessions(registry, sandbox_factory=factory, timeout=timeout)
    server = build_server(registry, sessions)
    try:
        if port is None:
            asyncio.run(serve_stdio(server, sessions))
        else:
            asyncio.run(serve_http(server, sessions, host=host, port=port))
    except KeyboardInterrupt:
        pass
    finally:
        for item in started:
            item.close()
