"""codeact as an MCP server: every toolkit operation as an MCP tool, plus ``run_python`` (code mode).

``codeact mcp serve`` builds it with :func:`build_server` and serves it over stdio or streamable
HTTP. The official ``mcp`` SDK is imported only here, lazily (``pip install codeact[mcp]``).
"""

from __future__ import annotations

from codeact.engine.mcp.server import CodeSessions, build_server, serve_http, serve_stdio, tool_name

__all__ = ["CodeSessions", "build_server", "serve_http", "serve_stdio", "tool_name"]
