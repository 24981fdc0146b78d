"""MCP servers as toolkits: a blueprint's ``toolkits[].mcp`` entry, the host's client session, result mapping.

::

    toolkits:
      - ref: fs
        mcp: {command: npx, args: ["-y", "@modelcontextprotocol/server-filesystem", "./data"]}
      - ref: tracker
        mcp: {url: "http://127.0.0.1:8931/mcp", headers: {Authorization: TRACKER_AUTH}}

The official ``mcp`` SDK is imported only when a server starts (``pip install codeact[mcp]``).
"""

from __future__ import annotations

from codeact.toolkits.mcp._client import McpConnection, McpServerError
from codeact.toolkits.mcp._config import McpServerConfig, config_problems
from codeact.toolkits.mcp.toolkit import McpToolError, McpToolkit, map_result, operation_name

__all__ = [
    "McpConnection",
    "McpServerConfig",
    "McpServerError",
    "McpToolError",
    "McpToolkit",
    "config_problems",
    "map_result",
    "operation_name",
]
