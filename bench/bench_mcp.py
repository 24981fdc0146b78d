"""MCP: the per-call cost of an MCP tool called from sandbox code, and run_python via ``codeact mcp serve``.

* ``direct_call_ms``: one ``add`` call from the host's own MCP client session (stdio, a FastMCP
  server written below) - the baseline.
* ``sandbox_call_ms``: the same tool as an operation of the MCP toolkit, called from sandbox code
  (sandbox -> bridge -> the host's session -> server), per call, the round's fixed cost removed.
* ``overhead_ratio``: sandbox / direct (goal <= 1.5).
* ``run_python_round_ms``: one ``run_python`` call (a small round calling a toolkit) through
  ``codeact mcp serve`` over stdio, from the official client.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CALLS = 200
ROUNDS = 5
_SERVER = '''
from mcp.server.fastmcp import FastMCP
server = FastMCP("bench")
@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
server.run("stdio")
'''


async def _direct(script: str) -> float:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=[script])
    with open(os.devnull, "w") as errlog:  # noqa: PTH123
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for i in range(20):
                await session.call_tool("add", {"a": i, "b": 1})
            samples = []
            for _ in range(ROUNDS):
                t0 = time.perf_counter()
                for i in range(CALLS):
                    await session.call_tool("add", {"a": i, "b": 1})
                samples.append((time.perf_counter() - t0) / CALLS)
    return statistics.median(samples)


async def _sandboxed(script: str) -> float:
    from codeact.sandbox import SubprocessSandbox
    from codeact.toolkits import ToolkitBridge, ToolkitRegistry
    from codeact.toolkits.mcp import McpServerConfig, McpToolkit

    toolkit = McpToolkit(McpServerConfig(name="calc", command=sys.executable, args=(script,)))
    try:
        registry = ToolkitRegistry([toolkit])
        bridge = ToolkitBridge(registry, session_id="bench-mcp", record=False)
        calls = f"for i in range({CALLS}):\n    await calc.add(a=i, b=1)\n"
        async with SubprocessSandbox(bridge=bridge, isolation="process") as box:
            await box.execute("for i in range(20):\n    await calc.add(a=i, b=1)\n")
            samples = []
            for _ in range(ROUNDS):
                empty = await box.execute("x = 1\n")
                full = await box.execute(calls)
                if full.error is not None:
                    raise RuntimeError(f"bench round failed: {full.error.message}")
                samples.append((full.duration_s - empty.duration_s) / CALLS)
        return statistics.median(samples)
    finally:
        await toolkit.aclose()


async def _run_python() -> float:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    devops = Path(__file__).resolve().parents[1] / "examples" / "devops" / "toolkit.py"
    codeact = str(Path(sys.executable).parent / "codeact")
    params = StdioServerParameters(
        command=codeact, args=["mcp", "serve", "--toolkit", f"{devops}:DevOps", "--isolation", "process"]
    )
    code = "apps = await devops.get_app_list(project_id='P-123')\nprint(len(apps))"
    with open(os.devnull, "w") as errlog:  # noqa: PTH123
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("run_python", {"code": code})
            samples = []
            for _ in range(20):
                t0 = time.perf_counter()
                await session.call_tool("run_python", {"code": code})
                samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        script = str(Path(tmp, "bench_server.py"))
        Path(script).write_text(_SERVER)
        direct = asyncio.run(_direct(script))
        sandboxed = asyncio.run(_sandboxed(script))
    round_s = asyncio.run(_run_python())
    return {
        "calls_per_round": CALLS,
        "direct_call_ms": round(direct * 1000, 3),
        "sandbox_call_ms": round(sandboxed * 1000, 3),
        "overhead_ratio": round(sandboxed / direct, 2),
        "goal_overhead_ratio": 1.5,
        "run_python_round_ms": round(round_s * 1000, 1),
    }


if __name__ == "__main__":
    print(run())
