"""Structured types in stubs: what the model reads says what a pydantic/TypedDict parameter holds."""

from __future__ import annotations

import ast
from typing import Any

from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from codeact.toolkits import DynamicToolkit, OperationSpec, ToolkitContext, operation, render_stubs, toolkit
from codeact.toolkits._stub_types import MAX_DEPTH, MAX_FIELDS


class Dim(BaseModel):
    """Size of a parcel, in cm."""

    w: float
    h: float = 1.0


class Item(BaseModel):
    """An order line."""

    sku: str = Field(description="Stock-keeping unit.")
    name: str
    qty: int = Field(1, description="How many.")
    dims: list[Dim] = []


class Tree(BaseModel):
    label: str
    children: list[Tree] = []


class Address(TypedDict):
    street: str
    city: str


@toolkit(name="shop", description="The shop")
class Shop:
    @operation
    async def order(self, item: Item, note: str | None = None) -> Item:
        """Order an item.

        Args:
            item: What to order.
            note: A note.
        """
        return item

    @operation
    async def ship(self, to: Address, items: list[Item]) -> dict[str, Dim]:
        """Ship items."""
        return {}

    @operation
    async def tree(self, t: Tree | None = None) -> list[Tree]:
        """A tree."""
        return []


ITEM_STUB = '''\
class Item(TypedDict):
    """An order line."""

    sku: str  # Stock-keeping unit.
    name: str
    qty: NotRequired[int]  # default 1; How many.
    dims: NotRequired[list[Dim]]  # default []
'''


def test_pydantic_parameter_is_shown_with_its_fields() -> None:
    source = render_stubs([Shop])
    ast.parse(source)
    assert ITEM_STUB in source
    assert 'class Dim(TypedDict):\n    """Size of a parcel, in cm."""\n\n    w: float\n' in source
    assert "async def order(self, item: Item, note: str | None = None) -> Item:" in source
    # declared once, before first use, dependencies first
    assert source.count("class Item(TypedDict)") == 1
    assert source.index("class Dim(") < source.index("class Item(") < source.index("class shop:")


def test_typeddict_lists_and_dict_values() -> None:
    source = render_stubs([Shop])
    assert "class Address(TypedDict):\n    street: str\n    city: str\n" in source
    assert "async def ship(self, to: Address, items: list[Item]) -> dict[str, Dim]:" in source


def test_recursive_model_refers_to_itself() -> None:
    source = render_stubs([Shop])
    assert "class Tree(TypedDict):\n    label: str\n    children: NotRequired[list[Tree]]  # default []\n" in source
    assert "async def tree(self, t: Tree | None = None) -> list[Tree]:" in source


def _nested(depth: int) -> type[BaseModel]:
    model: type[BaseModel] = type("L0", (BaseModel,), {"__annotations__": {"v": int}})
    for i in range(1, depth + 1):
        model = type(f"L{i}", (BaseModel,), {"__annotations__": {"inner": model}})
    return model


DEEP = _nested(MAX_DEPTH + 2)
WIDE = type("Wide", (BaseModel,), {"__annotations__": {f"f{i}": int for i in range(MAX_FIELDS + 5)}})


def test_depth_and_width_are_bounded() -> None:
    @toolkit(name="big", description="Big")
    class Big:
        @operation
        async def deep(self, x: DEEP) -> None:  # type: ignore[valid-type]
            """Deep."""

        @operation
        async def wide(self, x: WIDE) -> None:  # type: ignore[valid-type]
            """Wide."""

    source = render_stubs([Big])
    ast.parse(source)
    top = MAX_DEPTH + 2
    shown = [f"L{i}" for i in range(top + 1) if f"class L{i}(TypedDict)" in source]
    assert shown == [f"L{i}" for i in range(top - MAX_DEPTH + 1, top + 1)]
    assert "    inner: dict\n" in source  # the level past the bound
    assert "    # ... 5 more fields\n" in source


def test_same_name_different_types_in_two_toolkits() -> None:
    class Item(BaseModel):  # noqa: F811 - another toolkit's type named Item
        code: int

    @toolkit(name="other", description="Other")
    class Other:
        @operation
        async def put(self, item: Item) -> None:
            """Put."""

    source = render_stubs([Shop, Other])
    ast.parse(source)
    assert "class other_Item(TypedDict):\n    code: int\n" in source
    assert "async def put(self, item: other_Item) -> None:" in source


def test_dynamic_toolkit_defs_are_rendered() -> None:
    class Remote(DynamicToolkit):
        name = "remote"
        description = "Remote tools"

        def operations(self) -> list[OperationSpec]:
            return [
                OperationSpec.from_json_schema(
                    "add",
                    description="Add a point.",
                    schema={
                        "type": "object",
                        "properties": {"p": {"$ref": "#/$defs/Point"}},
                        "required": ["p"],
                        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
                    },
                )
            ]

        async def execute(self, operation: str, params: dict[str, Any], context: ToolkitContext) -> Any:
            return None

    source = render_stubs([Remote()])
    assert "class Point(TypedDict):\n    x: NotRequired[float]\n" in source
    assert "async def add(self, p: Point) -> Any:" in source


def test_cli_toolkits_list_shows_the_fields() -> None:
    from typer.testing import CliRunner

    from codeact.engine.cli import app

    result = CliRunner().invoke(app, ["toolkits", "list", "--toolkit", f"{__file__}:Shop"])
    assert result.exit_code == 0, result.output
    assert ITEM_STUB in result.stdout
    assert "async def order(self, item: Item, note: str | None = None) -> Item:" in result.stdout
