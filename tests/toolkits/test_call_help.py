"""A refused call's help: the operation's signature and one correct call (issue 39; ``prompts/call_help.j2``)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from codeact import prompts
from codeact.toolkits import ToolkitBridge, bind_toolkit, operation, toolkit
from codeact.toolkits._call_help import example_call, example_value, refused_operation
from codeact.toolkits._docstring import parse_docstring
from codeact.toolkits.stubs import call_signature
from tests.toolkits.signatures_toolkit import Dna, Stats


class Line(BaseModel):
    sku: Annotated[str, Field(pattern=r"^v\d+\.\d+$")]
    qty: Annotated[int, Field(gt=10, multiple_of=5)]
    size: Literal["S", "M"] = "S"


@toolkit(name="shop", description="A shop")
class Shop:
    @operation
    def add(
        self, line: Line, tags: list[str], *, when: Annotated[str, Field(json_schema_extra={"format": "date"})]
    ) -> str:
        """Add a line."""
        return "ok"

    @operation
    def pick(self, first: int, /, rate: float = 0.5, *more: float) -> float:
        """Pick.

        Examples:
            shop.pick(3)  # the third
        """
        return rate


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(
            {"type": "ToolError", "message": "invalid arguments for dna.transcribe(): seq: Input should be a string"},
            ("dna", "transcribe"),
            id="bridge",
        ),
        pytest.param(
            {"type": "TypeError", "message": "stats.order() missing required argument(s): 'sku'"},
            ("stats", "order"),
            id="missing",
        ),
        pytest.param(
            {"type": "TypeError", "message": "stats.order() got an unexpected keyword argument 'qty'; parameters: sku"},
            ("stats", "order"),
            id="unexpected",
        ),
        pytest.param(
            {"type": "TypeError", "message": "stats.order() takes 2 positional argument(s) (a, b) but 3 were given"},
            ("stats", "order"),
            id="too-many",
        ),
        pytest.param({"type": "ToolError", "message": "the project does not exist"}, None, id="tool-failure"),
        pytest.param({"type": "TypeError", "message": "unsupported operand type(s)"}, None, id="other-type-error"),
        pytest.param(
            {"type": "KeyError", "message": "invalid arguments for dna.transcribe(): x"}, None, id="other-type"
        ),
        pytest.param(None, None, id="none"),
    ],
)
def test_refused_operation(error: dict[str, Any] | None, expected: tuple[str, str] | None) -> None:
    assert refused_operation(error) == expected


def test_examples_come_from_the_docstring_first() -> None:
    doc = parse_docstring(
        """Do it.

        Example:
            >>> dna.transcribe_dna_to_mrna(dna_sequence="ATGC")
            'AUGC'
        """
    )
    assert doc.examples == ('dna.transcribe_dna_to_mrna(dna_sequence="ATGC")',)
    spec = bind_toolkit(Dna).operations["transcribe_dna_to_mrna"]
    assert example_call(spec, toolkit="dna") == 'dna.transcribe_dna_to_mrna(dna_sequence="ATGC")'
    pick = bind_toolkit(Shop).operations["pick"]
    assert example_call(pick, toolkit="shop") == "shop.pick(3)"  # the comment left out


def test_examples_from_the_schema_fit_its_bounds_and_pass_the_check() -> None:
    shop = bind_toolkit(Shop)
    call = example_call(shop.operations["add"], toolkit="shop")
    assert call == "shop.add(line={'sku': 'v1.1', 'qty': 15}, tags=['text'], when='2025-01-31')"
    arguments = eval("dict" + call.removeprefix("shop.add"))  # noqa: S307 -- the text the test just built
    shop.validate("add", arguments)  # a correct call indeed
    stats = bind_toolkit(Stats)
    assert example_call(stats.operations["minimum_value"], toolkit="stats") == "stats.minimum_value(1, 2)"
    assert example_call(stats.operations["order"], toolkit="stats") == "stats.order(sku='AAA-111', quantity=1)"
    assert example_call(stats.operations["book_hotel"], toolkit="stats") == "stats.book_hotel('text', 'text', 'text')"
    assert example_call(stats.operations["reserve"], toolkit="stats") == "stats.reserve(room={'guests': 1})"


@pytest.mark.parametrize(
    ("schema", "value"),
    [
        pytest.param({"type": "integer", "minimum": 5}, 5, id="min"),
        pytest.param({"type": "integer", "exclusiveMinimum": 10, "maximum": 19, "multipleOf": 5}, 15, id="multiple"),
        pytest.param({"type": "integer", "exclusiveMaximum": 0}, -1, id="below-zero"),
        pytest.param({"type": "number", "exclusiveMinimum": 2}, 2.5, id="number"),
        pytest.param({"type": "string", "minLength": 6}, "textte", id="long-enough"),
        pytest.param({"type": "string", "maxLength": 2}, "te", id="short-enough"),
        pytest.param({"type": "string", "pattern": "^(a|b)$"}, "text", id="pattern-too-hard"),
        pytest.param({"enum": ["x", "y"]}, "x", id="enum"),
        pytest.param({"type": "array", "items": {"type": "boolean"}, "minItems": 2}, [True, True], id="items"),
        pytest.param({"anyOf": [{"type": "null"}, {"type": "integer"}]}, 1, id="optional"),
        pytest.param({}, "text", id="any"),
    ],
)
def test_example_value(schema: dict[str, Any], value: Any) -> None:
    assert example_value(schema, {}) == value


def test_the_bridge_helps_only_with_granted_operations() -> None:
    bridge = ToolkitBridge([Stats, Dna], grants={"stats": ["order"], "dna": "*"}, session_id="s")
    refused = {"type": "ToolError", "message": "invalid arguments for stats.order(): quantity: too big"}
    assert bridge.call_help(refused) == (
        "`stats.order` is `stats.order(sku: str, quantity: int, note: str = '') -> str` (sku: matches "
        "r'^[A-Z]{3}-\\d{3}$'; 1 <= quantity <= 100; note: at most 20 characters). A correct call: "
        "`await stats.order(sku='AAA-111', quantity=1)`; pass the arguments with the types shown"
    )
    not_granted = {"type": "TypeError", "message": "stats.minimum_value() got an unexpected keyword argument 'x'"}
    assert bridge.call_help(not_granted) is None
    assert bridge.call_help({"type": "ToolError", "message": "invalid arguments for nope.order(): x"}) is None


def test_call_signature_is_one_line() -> None:
    spec = bind_toolkit(Shop).operations["pick"]
    assert call_signature(spec, toolkit="shop") == "shop.pick(first: int, /, rate: float = 0.5, *more: float) -> float"


def test_the_template_renders_every_variable() -> None:
    text = prompts.render(
        "call_help.j2",
        operation="t.op",
        signature="t.op(a: int) -> str",
        bounds=["1 <= a <= 9"],
        example="t.op(a=1)",
        documented=True,
    )
    assert text == (
        "`t.op` is `t.op(a: int) -> str` (1 <= a <= 9). A correct call, from its docstring: `await t.op(a=1)`; "
        "pass the arguments with the types shown\n"
    )
    assert re.search(r"\(\d", prompts.render("call_help.j2", operation="t.op", signature="s", bounds=[],
                                               example="t.op()", documented=False)) is None  # fmt: skip
