"""Units of the MCP toolkit: names, config checks, result mapping, files kept in outputs/."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.types import CallToolResult, ImageContent, TextContent, Tool

from codeact.sandbox.runtime import artifacts
from codeact.toolkits.errors import ToolkitLoadError
from codeact.toolkits.mcp import McpServerConfig, McpToolError, config_problems, map_result, operation_name


@pytest.mark.parametrize(
    ("tool", "op"),
    [("get-sum", "get_sum"), ("read_file", "read_file"), ("2fa.check", "tool_2fa_check"), ("import", "import_")],
)
def test_operation_names(tool: str, op: str) -> None:
    assert operation_name(tool) == op


def test_config_needs_env_names_not_values() -> None:
    assert config_problems({"command": "srv", "env": ["API_TOKEN"]}) == []
    assert config_problems({"url": "https://x.example/mcp", "headers": {"X-Api-Key": "API_KEY"}}) == []
    [problem] = config_problems({"command": "srv", "env": ["token"]})
    assert "'token' is not an environment variable name" in problem
    config = McpServerConfig.from_mapping("tracker", {"url": "http://h/mcp", "headers": {"Authorization": "TRK"}})
    assert config.header_values({"TRK": "Bearer s"}) == {"Authorization": "Bearer s"}
    with pytest.raises(ToolkitLoadError, match=r"Authorization \(from TRK\)"):
        config.header_values({})


def test_results_map_to_python_values() -> None:
    tool = Tool(name="t", inputSchema={"type": "object"})
    text = CallToolResult(content=[TextContent(type="text", text="hi")])
    assert map_result(text, tool, where="x.t()") == "hi"
    structured = CallToolResult(content=[TextContent(type="text", text="{}")], structuredContent={"a": 1})
    assert map_result(structured, tool, where="x.t()") == {"a": 1}
    image = CallToolResult(content=[ImageContent(type="image", data="iVBO", mimeType="image/png")])
    value = map_result(image, tool, where="x.t()", artifact_prefix="x-t-1")
    assert value == {"type": "image", "mime_type": "image/png", "data": b"\x89PN", "artifact": "x-t-1.png"}
    failed = CallToolResult(content=[TextContent(type="text", text="no such file")], isError=True)
    with pytest.raises(McpToolError, match=r"^x.t\(\) failed: no such file$"):
        map_result(failed, tool, where="x.t()")


def test_runtime_keeps_files_a_result_carries(tmp_path: Path) -> None:
    outputs = artifacts.prepare(str(tmp_path))
    try:
        artifacts.keep_files(["caption", {"type": "image", "artifact": "a.png", "data": b"png"}])
        artifacts.keep_files({"artifact": "../escape.png", "data": b"x"})
        artifacts.keep_files({"artifact": "b.png", "data": "not bytes"})
    finally:
        artifacts._current = None
    assert sorted(p.name for p in Path(outputs.root).iterdir()) == ["a.png"]
    assert not (tmp_path / "escape.png").exists()
