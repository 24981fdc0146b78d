"""The MCP server behind ``codeact mcp serve``: toolkit operations as tools, and ``run_python``.

Each operation ``toolkit.op`` is the MCP tool ``toolkit__op`` (its JSON schema and description);
calls go through a :class:`~toolkits.ToolkitBridge` like the sandbox's (validation, grants,
timeouts; operations that need approval are refused: an MCP client has no approver here).
``run_python`` runs the caller's Python in codeact's sandbox with the toolkits as objects; the
variables are kept per MCP session (one sandbox per session, closed when the server stops) and
the result is the round's stdout, error and the names of the variables it changed.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from codeact.sandbox.runtime.codec import plain

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

    from codeact.sandbox import Sandbox
    from codeact.toolkits import BoundToolkit, OperationSpec, ToolkitBridge, ToolkitRegistry

__all__ = ["RUN_PYTHON", "CodeSessions", "build_server", "serve_http", "serve_stdio", "tool_name"]

RUN_PYTHON = "run_python"
_SEP = "__"
_RUN_PYTHON_DESCRIPTION = (
    "Run Python code in codeact's sandbox. The toolkits are objects in scope ({toolkits}); call their "
    "operations with await (e.g. `x = await {example}(...)`). Top-level variables persist between calls "
    "of this MCP session. Returns stdout, the error (if any) and the names of the variables that changed."
)


def tool_name(toolkit: str, operation: str) -> str:
    """The MCP tool name of ``toolkit.operation`` (``devops__deploy_app``)."""
    return f"{toolkit}{_SEP}{operation}"


class CodeSessions:
    """One sandbox and its variables per MCP session, for ``run_python``.

    Args:
        registry: The toolkits the code sees.
        sandbox_factory: Builds a sandbox around a bridge (the subprocess sandbox by default).
        timeout: Seconds per ``run_python`` call.
    """

    def __init__(
        self,
        registry: ToolkitRegistry,
        *,
        sandbox_factory: Callable[[ToolkitBridge], Sandbox] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.registry = registry
        self.timeout = timeout
        self._factory = sandbox_factory or _subprocess_sandbox
        self._sessions: dict[object, tuple[Sandbox, dict[str, Any]]] = {}

    async def run(self, key: object, code: str) -> dict[str, Any]:
        """Run ``code`` as one round of session ``key``; returns ``{stdout, error, changed, removed}``."""
        from codeact.toolkits import ToolkitBridge

        entry = self._sessions.get(key)
        if entry is None:
            bridge = ToolkitBridge(self.registry, session_id=f"mcp-{uuid.uuid4().hex[:12]}")
            box = self._factory(bridge)
            await box.__aenter__()
            entry = (box, {})
            self._sessions[key] = entry
        box, variables = entry
        result = await box.execute(code, variables=variables, deadline=self.timeout)
        changed = sorted(k for k, v in result.variables.items() if variables.get(k, _MISSING) != v)
        removed = sorted(k for k in variables if k not in result.variables)
        variables.clear()
        variables.update(result.variables)
        error = None
        if result.error is not None:
            error = f"{result.error.type}: {result.error.message}"
        elif result.status != "ok":
            error = f"the round ended with status {result.status!r}"
        return {"stdout": result.stdout, "error": error, "changed": changed, "removed": removed}

    async def aclose(self) -> None:
        """Close every session's sandbox."""
        sessions, self._sessions = self._sessions, {}
        for box, _ in sessions.values():
            with contextlib.suppress(Exception):
                await box.__aexit__(None, None, None)


_MISSING = object()


def _subprocess_sandbox(bridge: ToolkitBridge) -> Sandbox:
    from codeact.sandbox import SandboxSpec, open_sandbox

    return open_sandbox(SandboxSpec(), bridge=bridge)


def build_server(registry: ToolkitRegistry, sessions: CodeSessions, *, name: str = "codeact") -> Server[object, object]:
    """The MCP server: one tool per operation of ``registry`` (``toolkit__op``) plus ``run_python``."""
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from codeact.sandbox.runtime.protocol import ERROR_NAMES, RpcError
    from codeact.toolkits import ToolkitBridge

    bridge = ToolkitBridge(registry, session_id="mcp", record=False)
    ops: dict[str, tuple[BoundToolkit, OperationSpec]] = {}
    for bound in registry:
        for spec in bound.operations.values():
            if spec.approval != "deny":
                ops[tool_name(bound.name, spec.name)] = (bound, spec)
    example = next(iter(ops), "toolkit__operation").replace(_SEP, ".", 1)
    server: Server[object, object] = Server(
        name, instructions="codeact's toolkits as MCP tools, and run_python to combine them in code."
    )

    @server.list_tools()  # type: ignore[no-untyped-call, untyped-decorator]
    async def list_tools() -> list[types.Tool]:
        tools = [
            types.Tool(
                name=RUN_PYTHON,
                description=_RUN_PYTHON_DESCRIPTION.format(
                    toolkits=", ".join(registry.names()) or "none", example=example
                ),
                inputSchema={
                    "type": "object",
                    "properties": {"code": {"type": "string", "description": "Python source to run."}},
                    "required": ["code"],
                },
            )
        ]
        for op_name, (bound, spec) in ops.items():
            tools.append(
                types.Tool(
                    name=op_name,
                    description=f"{bound.name}.{spec.name}: {spec.description}".strip(),
                    inputSchema=spec.json_schema,
                )
            )
        return tools

    # validate_input=False: the bridge validates, so clients get the same messages as sandbox code.
    @server.call_tool(validate_input=False)  # type: ignore[untyped-decorator]
    async def call_tool(name: str, arguments: dict[str, Any]) -> Any:
        if name == RUN_PYTHON:
            key = server.request_context.session
            result = await sessions.run(key, str(arguments.get("code", "")))
            return result
        found = ops.get(name)
        if found is None:
            raise ValueError(f"no tool named {name!r}; call list_tools")
        bound, spec = found
        if spec.approval == "ask":
            raise PermissionError(
                f"{bound.name}.{spec.name} needs approval, which an MCP client cannot give here; "
                "call it from run_python under an agent with an approver, or set its approval to auto"
            )
        try:
            value = await bridge.handle("call", {"toolkit": bound.name, "operation": spec.name, "arguments": arguments})
        except RpcError as exc:
            raise RuntimeError(f"[{ERROR_NAMES.get(exc.code, exc.code)}] {exc.message}") from None
        value = plain(value)  # the codec's tags are for the sandbox, not for an MCP client
        if isinstance(value, dict):
            return value
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return [types.TextContent(type="text", text=text)]

    return server


async def serve_stdio(server: Server[object, object], sessions: CodeSessions) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    from mcp.server.stdio import stdio_server

    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await sessions.aclose()


async def serve_http(server: Server[object, object], sessions: CodeSessions, *, host: str, port: int) -> None:
    """Serve over streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted."""
    import uvicorn
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette
    from starlette.routing import Route
    from starlette.types import Receive, Scope, Send

    manager = StreamableHTTPSessionManager(app=server)

    class _Endpoint:
        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            await manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            try:
                yield
            finally:
                await sessions.aclose()

    app = Starlette(routes=[Route("/mcp", endpoint=_Endpoint())], lifespan=lifespan)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
