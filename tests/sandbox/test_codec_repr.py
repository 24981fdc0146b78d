"""sandbox.runtime.codec.python_repr / display_text: codec data as Python shows the value (issue 39).

``python_repr(encode(v))`` is ``repr(v)`` for every type the codec tags, without decoding anything.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import typing
import uuid
from typing import Any

import pydantic
import pytest

from codeact.sandbox.runtime.codec import display_text, encode, has_tags, python_repr


class Ticket(pydantic.BaseModel):
    id: int
    due: datetime.date


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"


class Pair(typing.NamedTuple):
    name: str
    rating: int


VALUES = [
    pytest.param(("A", 4), id="tuple"),
    pytest.param((1,), id="one-tuple"),
    pytest.param((), id="empty-tuple"),
    pytest.param({1, 2}, id="set"),
    pytest.param(set(), id="empty-set"),
    pytest.param(frozenset({"a"}), id="frozenset"),
    pytest.param({1: "a", (1, 2): ["b", None, True]}, id="dict-keys"),
    pytest.param({"$type": "not a tag"}, id="dict-escape"),
    pytest.param([float("nan"), float("inf"), float("-inf"), 1.5], id="floats"),
    pytest.param(b"ab\x00", id="bytes"),
    pytest.param(bytearray(b"x"), id="bytearray"),
    pytest.param(datetime.datetime(2026, 1, 2, 9, 30), id="datetime"),
    pytest.param(datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC), id="datetime-utc"),
    pytest.param(datetime.date(2026, 1, 2), id="date"),
    pytest.param(datetime.time(9, 30, 15), id="time"),
    pytest.param(datetime.timedelta(days=1, seconds=5, microseconds=7), id="timedelta"),
    pytest.param(decimal.Decimal("1.10"), id="decimal"),
    pytest.param(fractions.Fraction(1, 3), id="fraction"),
    pytest.param(complex(1, -2), id="complex"),
    pytest.param(uuid.UUID(int=5), id="uuid"),
    pytest.param(range(0, 10, 2), id="range"),
    pytest.param(collections.deque([1, 2]), id="deque"),
    pytest.param(Color.RED, id="enum"),
    pytest.param(Point(1, 2), id="dataclass"),
    pytest.param(Ticket(id=7, due=datetime.date(2026, 1, 2)), id="model"),
    pytest.param(Pair("A", 4), id="namedtuple"),
    pytest.param({"best": ("A", 4), "when": [datetime.date(2026, 1, 2)], "ok": True, "x": None}, id="nested"),
    pytest.param("it's\n'quoted'", id="string"),
]


@pytest.mark.parametrize("value", VALUES)
def test_python_repr_is_the_values_repr(value: Any) -> None:
    assert python_repr(encode(value)) == repr(value)


def test_python_repr_cuts_at_its_limit_without_rendering_everything() -> None:
    assert python_repr(encode(list(range(100_000))), limit=20) == "[0, 1, 2, 3, 4, 5..."
    assert python_repr("x" * 1_000_000, limit=8) == "'xxxx..."
    assert python_repr(encode(("A", 4)), limit=20) == "('A', 4)"


@pytest.mark.parametrize(
    ("data", "text"),
    [
        pytest.param({"$type": "tuple", "v": "not a list"}, "'not a list'", id="bad-payload"),
        pytest.param({"$type": "bytes", "v": "!!"}, "'!!'", id="bad-base64"),
        pytest.param({"$type": "date", "v": "soon"}, "'soon'", id="bad-date"),
        pytest.param({"$type": "unknown", "v": [1]}, "[1]", id="unknown-tag"),
        pytest.param(
            {"$type": "ndarray", "class": "ndarray", "repr": "array([1, 2])", "v": {}}, "array([1, 2])", id="data"
        ),
        pytest.param(
            {"$type": "source", "kind": "function", "v": "def total(xs):\n    return 1"}, "<function total>", id="fn"
        ),
        pytest.param({"$type": "source", "kind": "class", "v": "class P:\n    pass"}, "<class P>", id="class"),
        pytest.param({"$type": "source", "kind": "import", "v": "import datetime"}, "import datetime", id="import"),
    ],
)  # fmt: skip
def test_python_repr_of_odd_or_hostile_data(data: dict[str, Any], text: str) -> None:
    assert python_repr(data) == text


def test_display_text_keeps_plain_json_and_shows_the_rest_as_python() -> None:
    assert display_text({"ok": True, "n": None}) == '{"ok": true, "n": null}'
    assert display_text("as is") == "as is"
    assert display_text(encode({"pair": ("A", 4)})) == "{'pair': ('A', 4)}"
    assert display_text(encode([1] * 50), limit=10) == "[1, 1, ..."
    assert has_tags(encode([[{"a": {1}}]])) and not has_tags([[{"a": [1]}]])
