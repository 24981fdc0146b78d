"""sandbox.runtime.codec: the tagged JSON codec (round trips, tags, registry, limits, hostile input)."""

from __future__ import annotations

import collections
import dataclasses
import datetime
import decimal
import enum
import fractions
import json
import math
import uuid
from typing import Any, NamedTuple

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime.codec import Record, TooLarge, Undecodable, Unencodable, decode, dumps, encode, loads


def json_round_trip(value: Any, **kwargs: Any) -> Any:
    """encode -> JSON text -> decode, as variables and toolkit values travel."""
    return decode(json.loads(json.dumps(encode(value), allow_nan=False)), **kwargs)


def same(a: Any, b: Any) -> bool:
    """Equal AND of the same types all the way down (1 == 1.0 == True is not good enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple, collections.deque)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return len(a) == len(b) and all(k in b and same(v, b[k]) for k, v in a.items())
    return bool(a == b)


# -- hypothesis round trip --------------------------------------------------------------------------

_tz = st.sampled_from(
    [None, datetime.UTC, datetime.timezone(datetime.timedelta(hours=5, minutes=30)),
     datetime.timezone(-datetime.timedelta(hours=8))]
)  # fmt: skip
hashable = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(max_size=20),
    st.dates(),
    st.datetimes(timezones=_tz),
    st.times(timezones=_tz),
    st.timedeltas(),
    st.decimals(allow_nan=False),
    st.complex_numbers(allow_nan=False),
    st.fractions(),
    st.uuids(),
)
scalars = st.one_of(hashable, st.just(float("nan")), st.just(float("inf")), st.just(float("-inf")))
keys = st.one_of(st.text(), st.sampled_from(["$type", "v", "class"]))
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=5),
        st.lists(children, max_size=5).map(tuple),
        st.dictionaries(keys, children, max_size=5),
        st.dictionaries(st.one_of(st.integers(), st.tuples(st.integers(), st.text())), children, max_size=4),
        st.frozensets(hashable, max_size=4),
        st.sets(hashable, max_size=4),
        st.lists(children, max_size=3).map(collections.deque),
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_round_trip_property(value: Any) -> None:
    assert same(json_round_trip(value), value)


@settings(max_examples=100, deadline=None)
@given(values)
def test_encoding_is_plain_json(value: Any) -> None:
    encoded = encode(value)
    assert json.loads(json.dumps(encoded, allow_nan=False)) == encoded
    assert dumps(value) == json.dumps(encoded, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    assert same(loads(dumps(value)), value)


# -- the tags ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        pytest.param((1, "a"), {"$type": "tuple", "v": [1, "a"]}, id="tuple"),
        pytest.param({3}, {"$type": "set", "v": [3]}, id="set"),
        pytest.param(frozenset({3}), {"$type": "frozenset", "v": [3]}, id="frozenset"),
        pytest.param({1: "a"}, {"$type": "dict", "v": [[1, "a"]]}, id="int-keys"),
        pytest.param({"$type": "x"}, {"$type": "dict", "v": [["$type", "x"]]}, id="escape"),
        pytest.param(float("nan"), {"$type": "float", "v": "nan"}, id="nan"),
        pytest.param(float("-inf"), {"$type": "float", "v": "-inf"}, id="-inf"),
        pytest.param(b"\x00\xff", {"$type": "bytes", "v": "AP8="}, id="bytes"),
        pytest.param(bytearray(b"a"), {"$type": "bytearray", "v": "YQ=="}, id="bytearray"),
        pytest.param(
            datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
            {"$type": "datetime", "v": "2024-01-02T03:04:05+00:00"},
            id="datetime-aware",
        ),
        pytest.param(datetime.datetime(2024, 1, 2), {"$type": "datetime", "v": "2024-01-02T00:00:00"}, id="naive"),
        pytest.param(datetime.date(2024, 1, 2), {"$type": "date", "v": "2024-01-02"}, id="date"),
        pytest.param(datetime.time(3, 4), {"$type": "time", "v": "03:04:00"}, id="time"),
        pytest.param(datetime.timedelta(days=1, seconds=2), {"$type": "timedelta", "v": [1, 2, 0]}, id="timedelta"),
        pytest.param(decimal.Decimal("1.10"), {"$type": "decimal", "v": "1.10"}, id="decimal"),
        pytest.param(1 + 2j, {"$type": "complex", "v": [1.0, 2.0]}, id="complex"),
        pytest.param(fractions.Fraction(1, 3), {"$type": "fraction", "v": [1, 3]}, id="fraction"),
        pytest.param(
            uuid.UUID("12345678-1234-5678-1234-567812345678"),
            {"$type": "uuid", "v": "12345678-1234-5678-1234-567812345678"},
            id="uuid",
        ),
        pytest.param(range(1, 9, 2), {"$type": "range", "v": [1, 9, 2]}, id="range"),
        pytest.param(collections.deque([1]), {"$type": "deque", "v": [1]}, id="deque"),
        pytest.param([1, {"a": (2,)}], [1, {"a": {"$type": "tuple", "v": [2]}}], id="nested"),
    ],
)
def test_tags(value: Any, encoded: Any) -> None:
    assert encode(value) == encoded
    assert same(decode(encoded), value)


@dataclasses.dataclass
class Point:
    x: int
    y: list[Any] = dataclasses.field(default_factory=list)
    label: str = dataclasses.field(default="", init=False)


class Color(enum.Enum):
    RED = "red"
    BLUE = (1, 2)


class Level(enum.IntEnum):
    LOW = 1


class Pair(NamedTuple):
    a: int
    b: Any = None


class Deploy(pydantic.BaseModel):
    service: str
    when: datetime.datetime


def test_dataclass_as_data_without_a_registry() -> None:
    point = Point(1, [Color.RED])
    point.label = "p"
    encoded = encode(point)
    assert encoded == {
        "$type": "dataclass",
        "class": "Point",
        "v": {"x": 1, "y": [{"$type": "enum", "class": "Color", "name": "RED", "v": "red"}], "label": "p"},
    }
    record = decode(encoded)
    assert isinstance(record, Record)
    assert record == {"x": 1, "y": ["red"], "label": "p"}
    assert (record.x, record["label"]) == (1, "p")
    assert repr(record) == "Point(x=1, y=['red'], label='p')"
    with pytest.raises(AttributeError, match="'Point' record has no field 'z'"):
        _ = record.z
    assert encode(record) == {**encoded, "v": {**encoded["v"], "y": ["red"]}}


def test_registry_recreates_dataclasses_enums_and_namedtuples() -> None:
    point = Point(1, [Color.BLUE, Pair(2, Level.LOW)])
    point.label = "p"
    registry = {"Point": Point, "Color": Color, "Pair": Pair, "Level": Level}
    restored = json_round_trip(point, registry=registry)
    assert restored == point
    assert restored.label == "p"
    assert restored.y[0] is Color.BLUE
    assert type(restored.y[1]) is Pair
    assert restored.y[1].b is Level.LOW


def test_without_a_registry_enums_are_values_and_namedtuples_tuples() -> None:
    assert json_round_trip([Color.BLUE, Pair(1, 2), Level.LOW]) == [(1, 2), (1, 2), 1]
    assert json_round_trip({"n": Level.LOW}) == {"n": 1}


def test_registry_mismatch_keeps_the_data() -> None:
    @dataclasses.dataclass
    class Point:  # same name, different fields: the class changed between rounds
        other: int

    restored = json_round_trip(globals()["Point"](1), registry={"Point": Point})
    assert isinstance(restored, Record)
    assert restored == {"x": 1, "y": [], "label": ""}


def test_pydantic_models_as_data() -> None:
    model = Deploy(service="api", when=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC))
    encoded = encode(model)
    assert encoded == {
        "$type": "model",
        "class": "Deploy",
        "v": {"service": "api", "when": {"$type": "datetime", "v": "2024-01-01T00:00:00+00:00"}},
    }
    record = decode(encoded)
    assert isinstance(record, Record)
    assert record.service == "api"
    assert json_round_trip(model, registry={"Deploy": Deploy}) == model


def test_subclasses_encode_as_their_base_type() -> None:
    class Name(str):
        pass

    counter = collections.Counter("aab")
    ordered = collections.OrderedDict(b=1)
    assert json_round_trip([Name("x"), counter, ordered, collections.defaultdict(list, a=[1])]) == [
        "x",
        {"a": 2, "b": 1},
        {"b": 1},
        {"a": [1]},
    ]


def test_plain_json_is_returned_as_is() -> None:
    value = [{"a": 1, "b": [1.5, None, True, "x"]}]
    assert encode(value) is value


def test_decode_builds_fresh_containers() -> None:
    encoded = [{"a": [1]}, {"$type": "tuple", "v": [[2]]}]
    decoded = decode(encoded)
    decoded[0]["a"].append(9)
    assert encoded == [{"a": [1]}, {"$type": "tuple", "v": [[2]]}]


# -- what cannot be encoded -------------------------------------------------------------------------


def test_circular_reference() -> None:
    items: list[Any] = [1]
    items.append(items)
    with pytest.raises(Unencodable) as info:
        encode(items)
    assert info.value.reason == "circular reference"
    loop: dict[str, Any] = {}
    loop["self"] = (loop,)
    with pytest.raises(Unencodable, match="circular reference"):
        encode(loop)


def test_shared_but_acyclic_values_are_fine() -> None:
    shared = [1]
    assert encode((shared, shared)) == {"$type": "tuple", "v": [[1], [1]]}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        pytest.param(lambda: 1, "cannot encode object of type 'function'", id="function"),
        pytest.param((x for x in []), "cannot encode object of type 'generator'", id="generator"),
        pytest.param([1, {"a": object()}], "cannot encode object of type 'object'", id="nested-object"),
        pytest.param({(1, 2): json}, "cannot encode object of type 'module'", id="module-in-dict"),
    ],
)
def test_unencodable_values_say_why(value: Any, reason: str) -> None:
    with pytest.raises(Unencodable) as info:
        encode(value)
    assert info.value.reason == reason


def test_too_deep() -> None:
    value: list[Any] = []
    for _ in range(5000):
        value = [value]
    with pytest.raises(Unencodable, match="nesting too deep"):
        encode(value)


def test_max_bytes() -> None:
    value = {"text": "é" * 600}
    assert encode(value, max_bytes=2000) is value
    with pytest.raises(TooLarge) as info:
        encode(value, max_bytes=1000)
    assert (info.value.size, info.value.limit) == (len(dumps(value).encode()), 1000)
    assert info.value.reason == f"encoded size of {info.value.size} bytes exceeds the limit of 1000 bytes"
    with pytest.raises(TooLarge):
        dumps((1, "x" * 100), max_bytes=50)


def test_encode_sized_reports_utf8_bytes() -> None:
    data, size = codec.encode_sized({"k": "é"})
    assert data == {"k": "é"}
    assert size == len('{"k":"é"}'.encode())


# -- hostile input to decode ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param({"$type": "os.system", "v": "id"}, "unknown codec tag 'os.system'", id="unknown-tag"),
        pytest.param({"$type": ["x"], "v": 1}, "unknown codec tag ['x']", id="tag-not-text"),
        pytest.param({"$type": "tuple"}, "codec tag 'tuple' without a payload", id="no-payload"),
        pytest.param({"$type": "tuple", "v": "abc"}, "expected a list payload", id="tuple-of-text"),
        pytest.param({"$type": "bytes", "v": "***"}, "bad base64 payload", id="bad-base64"),
        pytest.param({"$type": "float", "v": "1e999"}, "unknown float '1e999'", id="bad-float"),
        pytest.param({"$type": "dict", "v": [[1]]}, "expected [key, value] pairs", id="bad-pairs"),
        pytest.param({"$type": "set", "v": [[1]]}, "malformed codec data: TypeError", id="unhashable"),
        pytest.param({"$type": "timedelta", "v": [10**12, 0, 0]}, "malformed codec data: OverflowError", id="huge"),
        pytest.param({"$type": "datetime", "v": "yesterday"}, "malformed codec data: ValueError", id="bad-date"),
        pytest.param({"$type": "decimal", "v": "one"}, "malformed codec data: InvalidOperation", id="bad-decimal"),
        pytest.param({"$type": "dataclass", "v": {}}, "without a class name", id="no-class"),
        pytest.param({"$type": "dataclass", "class": "P", "v": [1]}, "expected an object of fields", id="bad-fields"),
        pytest.param({"$type": "range", "v": [1, 2]}, "expected three integers", id="short-range"),
        pytest.param({"$type": "fraction", "v": [1, 0]}, "malformed codec data: ZeroDivisionError", id="zero"),
    ],
)
def test_malformed_input_raises_undecodable(data: Any, message: str) -> None:
    with pytest.raises(Undecodable) as info:
        decode(data)
    assert message in str(info.value)


def test_decode_never_looks_classes_up_by_name() -> None:
    data = {"$type": "dataclass", "class": "subprocess.Popen", "v": {"args": ["id"]}}
    assert decode(data) == {"args": ["id"]}
    assert type(decode(data)) is Record


def test_loads_rejects_non_json() -> None:
    with pytest.raises(Undecodable, match="malformed codec data"):
        loads("{nope")
