"""``codeact mcp serve`` driven by the official ``mcp`` client, over stdio and streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.ports import free_port, wait_listening

REPO = Path(__file__).resolve().parents[3]
DEVOPS = f"{REPO / 'examples' / 'devops' / 'toolkit.py'}:DevOps"
CODEACT = str(Path(sys.executable).parent / "codeact")
SERVE = ["mcp", "serve", "--toolkit", DEVOPS, "--isolation", "process"]


@asynccontextmanager
async def stdio_session() -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=CODEACT, args=SERVE, env={**os.environ, "CODEACT_HOME": "/nonexistent"})
    with open(os.devnull, "w") as errlog:  # noqa: PTH123
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([CODEACT, *SERVE, "--port", str(port)], stderr=subprocess.DEVNULL)
    try:
        wait_listening(proc, port, timeout=60, what="codeact mcp serve --port")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _payload(result: Any) -> Any:
    assert not result.isError, result.content
    if result.structuredContent is not None:
        return result.structuredContent
    return json.loads(result.content[0].text)


async def _exercise(session: ClientSession) -> None:
    tools = {t.name: t for t in (await session.list_tools()).tools}
    assert "run_python" in tools and "devops__get_project_info" in tools
    assert tools["devops__get_project_info"].inputSchema["required"] == ["project_id"]

    info = _payload(await session.call_tool("devops__get_project_info", {"project_id": "P-123"}))
    assert info["name"] == "Checkout"
    bad = await session.call_tool("devops__get_project_info", {})
    assert bad.isError and "invalid arguments for devops.get_project_info()" in bad.content[0].text

    first = _payload(
        await session.call_tool(
            "run_python",
            {"code": "apps = await devops.get_app_list(project_id='P-123')\nprint(len(apps), 'apps')"},
        )
    )
    assert first == {"stdout": "2 apps\n", "error": None, "changed": ["apps"], "removed": []}
    # Variables stay in this MCP session.
    second = _payload(await session.call_tool("run_python", {"code": "ids = sorted(a['id'] for a in apps)\n1 / 0"}))
    assert second["error"].startswith("ZeroDivisionError")
    assert second["changed"] == ["ids"]


async def test_stdio_tools_and_run_python() -> None:
    async with stdio_session() as session:
        await _exercise(session)


async def test_streamable_http_sessions_keep_their_own_variables(http_url: str) -> None:
    async with streamable_http_client(http_url) as (read, write, _), ClientSession(read, write) as session:
        await session.initialize()
        await _exercise(session)
    async with streamable_http_client(http_url) as (read, write, _), ClientSession(read, write) as other:
        await other.initialize()
        code = "try:\n    print(len(apps))\nexcept NameError:\n    print('no apps here')"
        fresh = _payload(await other.call_tool("run_python", {"code": code}))
        assert fresh["stdout"] == "no apps here\n"
