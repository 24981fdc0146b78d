"""An MCP server as a toolkit: its tools are the operations, called on the host's client session."""

from __future__ import annotations

import asyncio
import base64
import json
import keyword
import mimetypes
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from codeact.toolkits._schema import annotation_from_schema
from codeact.toolkits.context import ToolkitContext
from codeact.toolkits.dynamic import DynamicToolkit
from codeact.toolkits.errors import ToolkitDefinitionError, ToolkitError
from codeact.toolkits.mcp._client import McpConnection
from codeact.toolkits.mcp._config import McpServerConfig
from codeact.toolkits.spec import OperationSpec

if TYPE_CHECKING:
    from mcp.types import CallToolResult, Tool

__all__ = ["McpToolError", "McpToolkit", "operation_name"]

_NOT_IDENT = re.compile(r"[^0-9A-Za-z_]")
_RESULTS_NOTE = (
    "results: text as str, JSON as dict/list, an image as {'type': 'image', 'mime_type': str, 'data': bytes, "
    "'artifact': file name in outputs/}, several content blocks as a list"
)


class McpToolError(ToolkitError):
    """An MCP tool answered with ``isError``: the server's message, as the code sees it."""

    code = "toolkit.mcp.tool"


def operation_name(tool: str) -> str:
    """An MCP tool name as a Python identifier (``get-sum`` -> ``get_sum``)."""
    ident = _NOT_IDENT.sub("_", tool).strip("_") or "tool"
    if ident[0].isdigit():
        ident = f"tool_{ident}"
    return f"{ident}_" if keyword.iskeyword(ident) else ident


class McpToolkit(DynamicToolkit):
    """The tools of one MCP server as the operations of a toolkit named ``config.name``.

    The server starts when the toolkit's operations are first needed (registration, which the
    prompt's stubs need) and stays up until :meth:`aclose`. Calls go through the bridge like any
    toolkit's (grants, approvals, timeouts, records); the client session, and the credentials
    passed to the server, stay on the host.

    Args:
        config: The server.
        description: Shown to the model; defaults to the server's instructions or name.
    """

    def __init__(self, config: McpServerConfig, *, description: str | None = None) -> None:
        if not config.name.isidentifier() or config.name.startswith("_") or keyword.iskeyword(config.name):
            raise ToolkitDefinitionError(
                f"MCP toolkit name {config.name!r} must be a Python identifier not starting with '_' "
                "(it is the object's name in the sandbox); change the blueprint's ref"
            )
        self.name = config.name
        self._description = description
        self.connection = McpConnection(config)
        self._tools: dict[str, Tool] = {}
        self.skipped: dict[str, str] = {}
        self._calls = 0

    @property
    def description(self) -> str:  # type: ignore[override]
        """The server's instructions (first line) or its name."""
        if self._description:
            return self._description
        started = self.connection.start()  # the bridge reads the description before the operations
        first = (started.instructions.strip().splitlines() or [""])[0]
        server = started.server_name
        return f"{first or f'Tools of the MCP server {server!r}'} ({_RESULTS_NOTE})"

    def operations(self) -> list[OperationSpec]:
        """One operation per tool the server lists (starting the server if needed).

        Raises:
            McpServerError: the server did not start.
        """
        started = self.connection.start()
        specs: list[OperationSpec] = []
        self._tools = {}
        for tool in started.tools:
            op = operation_name(tool.name)
            if op in self._tools:
                self.skipped[tool.name] = f"its Python name {op!r} is taken by {self._tools[op].name!r}"
                continue
            try:
                specs.append(self._spec(op, tool))
            except ToolkitDefinitionError as exc:
                self.skipped[tool.name] = exc.message
                continue
            self._tools[op] = tool
        return specs

    def _spec(self, op: str, tool: Tool) -> OperationSpec:
        schema = dict(tool.inputSchema or {"type": "object", "properties": {}})
        schema.pop("$schema", None)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        description = (tool.description or tool.title or f"The MCP tool {tool.name!r}.").strip()
        spec = OperationSpec.from_json_schema(
            op,
            description=description,
            schema=schema,
            returns="Any",
            timeout=self.connection.config.call_timeout,
        )
        output = tool.outputSchema
        if not output or output.get("type") != "object":
            return spec
        out = {k: v for k, v in output.items() if k not in ("$schema", "$defs")}
        defs = dict(output.get("$defs") or {})
        if _wrapped(out):
            inner = out["properties"]["result"]
            if "$ref" in json.dumps(inner):
                return replace(spec, returns_schema={**inner, "$defs": defs})
            return replace(spec, returns=annotation_from_schema(inner))
        if not out.get("properties"):
            return replace(spec, returns="dict")
        title = str(out.get("title") or "")
        name = title if title.isidentifier() and title not in defs else _title(op)
        return replace(spec, returns="dict", returns_schema={"$ref": f"#/$defs/{name}", "$defs": {**defs, name: out}})

    async def prepare(self, operation: str) -> None:
        """(Re)start the server before the call's timeout starts: ``startTimeout`` bounds the start."""
        if not self.connection.running:
            await asyncio.to_thread(self.connection.start)

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        """Call the tool on the host's session and map its result to Python values."""
        tool = self._tools.get(operation)
        if tool is None:  # the bridge validated the name against operations(): a new server process
            raise ToolkitError(f"{self.name}.{operation}() is not a tool of {self.connection.config.where}")
        import time

        timeout = self.connection.config.call_timeout
        if context.deadline is not None:
            timeout = max(0.05, min(timeout, context.deadline - time.monotonic()))
        result = await self.connection.call(tool.name, params, timeout=timeout)
        self._calls += 1
        return map_result(
            result, tool, where=f"{self.name}.{operation}()", artifact_prefix=f"{self.name}-{operation}-{self._calls}"
        )

    async def aclose(self) -> None:
        """Stop the server (the end of the run, or the agent's close)."""
        await self.connection.aclose()

    def close(self) -> None:
        """Stop the server (from synchronous code)."""
        self.connection.close()


def _wrapped(schema: Mapping[str, Any]) -> bool:
    """FastMCP wraps a non-object return value as ``{"result": value}`` (schema titled ``<tool>Output``)."""
    props = schema.get("properties") or {}
    if list(props) != ["result"] or list(schema.get("required") or []) != ["result"]:
        return False
    return bool(schema.get("x-fastmcp-wrap-result")) or str(schema.get("title", "")).endswith("Output")


def _title(op: str) -> str:
    return "".join(part.capitalize() for part in op.split("_")) + "Result"


def map_result(result: CallToolResult, tool: Tool, *, where: str, artifact_prefix: str = "") -> Any:
    """Tool result -> Python value: text as str, structured as dict/list, images as dicts with bytes.

    With ``artifact_prefix``, each image or audio block is also named ``<prefix>-<n>.<ext>`` under
    ``artifact``: the sandbox runtime writes it into ``outputs/``, so it becomes an artifact.

    Raises:
        McpToolError: the tool answered with ``isError`` (its text is the message).
    """
    if result.isError:
        text = " ".join(_text(block) for block in result.content).strip() or "(no message)"
        raise McpToolError(f"{where} failed: {text}")
    structured = result.structuredContent
    if structured is not None:
        output = tool.outputSchema or {}
        if _wrapped(output) and isinstance(structured, Mapping) and "result" in structured:
            return structured["result"]
        return structured
    values = [_block(block) for block in result.content]
    if artifact_prefix:
        media = [v for v in values if isinstance(v, dict) and v.get("type") in ("image", "audio")]
        for n, value in enumerate(media, 1):
            ext = (mimetypes.guess_extension(str(value["mime_type"])) or ".bin").lstrip(".")
            value["artifact"] = f"{artifact_prefix}-{n}.{ext}" if len(media) > 1 else f"{artifact_prefix}.{ext}"
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _text(block: Any) -> str:
    return str(getattr(block, "text", "") or "")


def _block(block: Any) -> Any:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return {"type": kind, "mime_type": block.mimeType, "data": base64.b64decode(block.data)}
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        if text is not None:
            return {"type": "resource", "uri": str(resource.uri), "mime_type": resource.mimeType, "text": text}
        return {
            "type": "resource",
            "uri": str(resource.uri),
            "mime_type": resource.mimeType,
            "data": base64.b64decode(resource.blob),
        }
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(block.uri), "name": block.name, "mime_type": block.mimeType}
    return block.model_dump(mode="json") if hasattr(block, "model_dump") else str(block)
