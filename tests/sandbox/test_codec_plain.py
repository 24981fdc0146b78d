"""sandbox.runtime.codec.plain: codec data as plain JSON for readers outside the sandbox (no ``$type`` left)."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import json
import uuid
from typing import Any

import pydantic
import pytest

from codeact.sandbox.runtime.codec import encode, plain


class Ticket(pydantic.BaseModel):
    id: int
    due: datetime.date
    tags: set[str]


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            Ticket(id=7, due=datetime.date(2026, 1, 2), tags={"a"}),
            {"id": 7, "due": "2026-01-02", "tags": ["a"]},
            id="model",
        ),
        pytest.param(Point(1, 2), {"x": 1, "y": 2}, id="dataclass"),
        pytest.param((1, (2, 3)), [1, [2, 3]], id="tuple"),
        pytest.param(collections.deque([1]), [1], id="deque"),
        pytest.param({1: "a", "b": {2}}, {"1": "a", "b": [2]}, id="dict-int-keys"),
        pytest.param({"$type": "x"}, {"$type": "x"}, id="escaped-dict"),
        pytest.param(Color.RED, "red", id="enum"),
        pytest.param(datetime.datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05", id="datetime"),
        pytest.param(datetime.timedelta(minutes=1, microseconds=500000), 60.5, id="timedelta"),
        pytest.param(decimal.Decimal("1.50"), "1.50", id="decimal"),
        pytest.param(uuid.UUID(int=1), "00000000-0000-0000-0000-000000000001", id="uuid"),
        pytest.param(b"hi", "aGk=", id="bytes"),
        pytest.param(float("inf"), "inf", id="inf"),
        pytest.param([{"k": Point(0, 1)}], [{"k": {"x": 0, "y": 1}}], id="nested"),
    ],
)
def test_plain_decodes_every_tag_to_plain_json(value: Any, expected: Any) -> None:
    encoded = encode(value)
    assert plain(encoded) == expected
    assert "$type" not in json.dumps(plain(encoded)) or value == {"$type": "x"}
