"""A FastMCP server for the error, crash, timeout and credential cases (run as a script).

``python flaky_server.py`` serves over stdio; ``python flaky_server.py --port P`` over streamable HTTP;
``--pidfile PATH`` writes the server's process id there first.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TypedDict

import anyio
from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("flaky", instructions="Arithmetic, failures on purpose, and credentials checks.")


class Stats(TypedDict):
    """Summary statistics."""

    count: int
    mean: float


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def stats(values: list[float]) -> Stats:
    """Count and mean of some numbers."""
    return {"count": len(values), "mean": sum(values) / len(values)}


@server.tool()
def fail(reason: str) -> str:
    """Always fails with ``reason``."""
    raise ValueError(f"refused: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await anyio.sleep(seconds)
    return "late"


@server.tool()
async def hang() -> str:
    """Blocks the server's event loop: it answers nothing any more (not even a ping)."""
    time.sleep(3600)
    return "never"


@server.tool()
def crash() -> str:
    """The server process exits at once."""
    os._exit(3)


@server.tool()
def secrets() -> dict[str, str | None]:
    """Which of the test variables the server process sees."""
    return {name: os.environ.get(name) for name in ("FLAKY_TOKEN", "FLAKY_NOT_NAMED")}


@server.tool()
def header(ctx: Context) -> str:  # type: ignore[type-arg]
    """The Authorization header of the HTTP request (streamable HTTP only)."""
    request = ctx.request_context.request
    return "" if request is None else str(request.headers.get("authorization", ""))


if __name__ == "__main__":
    if "--pidfile" in sys.argv:
        with open(sys.argv[sys.argv.index("--pidfile") + 1], "w", encoding="utf-8") as pidfile:
            pidfile.write(str(os.getpid()))
    if "--port" in sys.argv:
        server.settings.port = int(sys.argv[sys.argv.index("--port") + 1])
        server.settings.host = "127.0.0.1"
        server.settings.log_level = "WARNING"
        server.run("streamable-http")
    else:
        server.run("stdio")
