"""The host's tools as the ``host`` toolkit in the sandbox (stubs from their JSON schemas).

Each tool the run's ``resources.tools`` grants for ``call`` becomes an operation of the ``host``
toolkit (its name made a Python identifier); calling it from the code sends ``call_tool``
through the run's proxy (checked, carrying ``run_id``, bounded by the deadline).
"""

from __future__ import annotations

import keyword
import re

from codeact.engine.runner.entities import KnowledgeBaseResource, ToolResource
from codeact.engine.runner.proxy.client import RunAPIProxy
from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext
from codeact.toolkits.errors import ToolkitDefinitionError

__all__ = ["HOST_TOOLKIT", "KNOWLEDGE_TOOLKIT", "HostKnowledge", "HostTools"]

HOST_TOOLKIT = "host"
KNOWLEDGE_TOOLKIT = "knowledge"

_EMPTY_SCHEMA: dict[str, object] = {"type": "object", "properties": {}}


def _identifier(name: str, taken: set[str]) -> str:
    base = re.sub(r"\W", "_", name).strip("_") or "tool"
    if base[0].isdigit() or keyword.iskeyword(base):
        base = f"tool_{base}"
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


class HostTools(DynamicToolkit):
    """The run's host tools (``host.<tool>(...)`` in the code).

    Args:
        proxy: The run's API proxy.
        tools: The granted tools (``resources.tools``); tools without ``call`` are left out.
    """

    name = HOST_TOOLKIT
    description = "Tools of the platform this agent runs on"

    def __init__(self, proxy: RunAPIProxy, tools: list[ToolResource]) -> None:
        self.proxy = proxy
        self._specs: list[OperationSpec] = []
        self._names: dict[str, str] = {}
        taken: set[str] = set()
        for tool in tools:
            if tool.operations and "call" not in tool.operations:
                continue
            op = _identifier(tool.tool_name, taken)
            schema = tool.parameters if isinstance(tool.parameters, dict) else _EMPTY_SCHEMA
            description = (tool.description or f"The host tool {tool.tool_name!r}.").strip()
            try:
                spec = OperationSpec.from_json_schema(op, description=description, schema=schema)
            except ToolkitDefinitionError:
                spec = OperationSpec.from_json_schema(op, description=description, schema=_EMPTY_SCHEMA)
            self._specs.append(spec)
            self._names[op] = tool.tool_name

    def operations(self) -> list[OperationSpec]:
        """One operation per callable host tool."""
        return list(self._specs)

    async def execute(self, operation: str, params: dict[str, object], context: ToolkitContext) -> object:
        """Call the host tool behind ``operation`` through the proxy."""
        return await self.proxy.call_tool(self._names[operation], params)


class HostKnowledge(DynamicToolkit):
    """The run's host knowledge bases (``knowledge.retrieve(kb_id, query)``, ``knowledge.list()`` in the code).

    Args:
        proxy: The run's API proxy.
        bases: The granted knowledge bases (``resources.knowledge_bases``).
    """

    name = KNOWLEDGE_TOOLKIT
    description = "Knowledge bases of the platform this agent runs on"

    def __init__(self, proxy: RunAPIProxy, bases: list[KnowledgeBaseResource]) -> None:
        self.proxy = proxy
        listed = ", ".join(f"{kb.kb_id!r}" + (f" ({kb.kb_name})" if kb.kb_name else "") for kb in bases)
        self._spec = OperationSpec.from_json_schema(
            "retrieve",
            description=f"Search a knowledge base for passages about `query`. Knowledge bases: {listed}.",
            schema={
                "type": "object",
                "properties": {
                    "kb_id": {"type": "string", "description": "The knowledge base id."},
                    "query": {"type": "string", "description": "What to search for."},
                    "top_k": {"type": "integer", "description": "How many passages at most."},
                },
                "required": ["kb_id", "query"],
            },
            returns="list",
            returns_description="The passages found, best first.",
        )

        self._list = OperationSpec.from_json_schema(
            "list",
            description="The knowledge bases this run may list: their uuid, name and type.",
            schema={"type": "object", "properties": {}},
            returns="list",
            returns_description="One {uuid, name, type} per knowledge base.",
        )

    def operations(self) -> list[OperationSpec]:
        """``retrieve`` and ``list``."""
        return [self._spec, self._list]

    async def execute(self, operation: str, params: dict[str, object], context: ToolkitContext) -> object:
        """Search (or list the granted knowledge bases) through the proxy."""
        if operation == "list":
            return self.proxy.list_knowledge_bases()
        top_k = params.get("top_k")
        return await self.proxy.retrieve_knowledge(
            str(params["kb_id"]), str(params["query"]), top_k=top_k if isinstance(top_k, int) else 5
        )
