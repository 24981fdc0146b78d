"""Pydantic field bounds reach the stub the model reads and the JSON schema (issue 39)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest
from pydantic import Field

from codeact.toolkits import (
    DynamicToolkit,
    OperationSpec,
    ToolkitContext,
    openai_tools,
    operation,
    render_stubs,
    toolkit,
)
from codeact.toolkits._constraints import constraint_text
from tests.toolkits.signatures_toolkit import Stats


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        pytest.param({"type": "integer", "minimum": 1, "maximum": 100}, "1 <= n <= 100", id="ge-le"),
        pytest.param({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1.5}, "0 < n < 1.5", id="gt-lt"),
        pytest.param({"type": "integer", "minimum": 0}, "n >= 0", id="ge"),
        pytest.param({"type": "integer", "exclusiveMinimum": 0}, "n > 0", id="gt"),
        pytest.param({"type": "integer", "maximum": 9}, "n <= 9", id="le"),
        pytest.param({"type": "integer", "multipleOf": 5}, "a multiple of 5", id="multiple-of"),
        pytest.param({"type": "string", "minLength": 1, "maxLength": 20}, "1 to 20 characters", id="length"),
        pytest.param({"type": "string", "minLength": 2, "maxLength": 2}, "exactly 2 characters", id="exact-length"),
        pytest.param({"type": "string", "maxLength": 1}, "at most 1 character", id="max-length"),
        pytest.param({"type": "string", "minLength": 0}, "", id="min-length-0"),
        pytest.param({"type": "string", "pattern": r"^[A-Z]{3}-\d{3}$"}, r"matches r'^[A-Z]{3}-\d{3}$'", id="regex"),
        pytest.param({"type": "string", "pattern": "^[a-z]+$"}, "matches '^[a-z]+$'", id="pattern"),
        pytest.param(
            {"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": 5},
            "at most 5 items; each item >= 0",
            id="items",
        ),
        pytest.param(
            {"type": "array", "items": {"type": "string", "maxLength": 3}},
            "each item: at most 3 characters",
            id="item-length",
        ),
        pytest.param({"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}, "n >= 1", id="optional"),
        pytest.param({"type": "integer"}, "", id="none"),
    ],
)
def test_constraint_text(schema: dict[str, Any], text: str) -> None:
    assert constraint_text(schema, "n") == text


def test_the_stub_shows_each_bounded_parameter_with_its_bounds() -> None:
    stubs = render_stubs([Stats])
    assert (
        "    async def order(\n"
        "        self,\n"
        "        sku: str,  # matches r'^[A-Z]{3}-\\d{3}$'\n"
        "        quantity: int,  # 1 <= quantity <= 100\n"
        "        note: str = '',  # at most 20 characters\n"
        "    ) -> str:\n"
    ) in stubs
    assert "    guests: int  # 1 <= guests <= 4; People in the room\n" in stubs  # a model's field
    assert "    async def minimum_value(self, *args: int) -> int:\n" in stubs  # no bounds: one line
    compile(stubs, "<stubs>", "exec")


def test_bounds_literal_choices_and_variadic_items_in_stub_and_schema() -> None:
    @toolkit(name="shop", description="A shop")
    class Shop:
        @operation
        def pick(
            self,
            size: Literal["S", "M", "L"],
            *counts: Annotated[int, Field(gt=0)],
            discount: Annotated[float, Field(ge=0, lt=1)] | None = None,
        ) -> str:
            """Pick a size."""
            return size

    stubs = render_stubs([Shop])
    assert (
        "    async def pick(\n"
        "        self,\n"
        "        size: Literal['S', 'M', 'L'],\n"
        "        *counts: int,  # each of counts > 0\n"
        "        discount: float | None = None,  # 0 <= discount < 1\n"
        "    ) -> str:\n"
    ) in stubs
    schema = openai_tools([Shop])[0]["function"]["parameters"]["properties"]
    assert schema["size"] == {"enum": ["S", "M", "L"], "type": "string"}
    assert schema["counts"]["items"] == {"exclusiveMinimum": 0, "type": "integer"}
    assert schema["discount"]["anyOf"] == [{"exclusiveMaximum": 1, "minimum": 0, "type": "number"}, {"type": "null"}]


class _Remote(DynamicToolkit):
    """A toolkit whose schema comes from elsewhere (an MCP server's tool, say)."""

    name = "remote"
    description = "A remote catalogue"

    def operations(self) -> list[OperationSpec]:
        schema = {
            "type": "object",
            "properties": {"limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "How many."}},
            "required": ["limit"],
        }
        return [OperationSpec.from_json_schema("top", description="Top items.", schema=schema)]

    async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
        return list(range(params["limit"]))


def test_a_dynamic_toolkits_schema_bounds_show_too() -> None:
    assert (
        "    async def top(\n        self,\n        limit: int,  # 1 <= limit <= 50\n    ) -> Any:\n"
        in render_stubs([_Remote()])
    )
