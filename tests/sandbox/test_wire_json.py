"""The wire's JSON (``protocol.dumps``/``compact_json``/``loads``), built on ``_json`` alone, is ``json``'s.

The runtime does not import ``json`` (whose Python modules import ``re``) to start: ``protocol`` drives the
C scanner and encoder itself. Everything here is compared with what ``json`` gives for the same input,
errors included (their type and message).
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable

import pytest

from codeact.sandbox.runtime import protocol

_STRICT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def _outcome(fn: Callable[[object], object], arg: object) -> tuple[str, ...]:
    try:
        value = fn(arg)
    except Exception as exc:  # noqa: BLE001 - the outcome compared is the error itself
        return ("error", type(exc).__name__, str(exc))
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return ("ok", json.dumps(value, allow_nan=True))


TEXTS = [
    '{"a":1}',
    '[1,2.5,-0.0,1e400,-1e400,"x\\u00e9\\ud83d\\ude00",null,true,false]',
    "NaN",
    "[Infinity,-Infinity,NaN]",
    ' {"a":1}',
    '{"a":1} ',
    '{"a":1}\n',
    '{"a":1}x',
    "",
    " ",
    '{"a":',
    '"\\ud800"',
    '"a\x01"',
    "123456789012345678901234567890",
    '{"a":1,"a":2}',
    "[" * 50 + "]" * 50,
    "-",
    '"\\x"',
    "tru",
    '{"\u00e9":"\u2028"}',
    "0123",
    "[1,]",
    '{"a" : 1 , "b":[ 1 , 2 ] }',
]


@pytest.mark.parametrize("text", [pytest.param(t, id=repr(t)[:40]) for t in TEXTS])
def test_loads_is_json_loads(text: str) -> None:
    assert _outcome(protocol.loads, text) == _outcome(json.loads, text)
    data = text.encode("utf-8", "surrogatepass")
    assert _outcome(protocol.loads, data) == _outcome(json.loads, data)


def test_loads_of_bytes_that_are_not_utf8_fails_like_json_loads() -> None:
    assert _outcome(protocol.loads, b"\xff") == _outcome(json.loads, b"\xff")


class _F(float):
    pass


class _I(int):
    pass


class _S(str):
    pass


def _values() -> list[object]:
    cycle: list[object] = []
    cycle.append(cycle)
    loop: dict[str, object] = {}
    loop["d"] = loop
    return [
        "x",
        "é\u2028\ud800",
        1,
        2.5,
        -0.0,
        1e300,
        True,
        None,
        [1, {"a": [2]}],
        {"k": "v", 1: 2, 2.5: 3, False: 4, None: 5},
        float("nan"),
        float("inf"),
        {(1,): 2},
        object(),
        [b"x"],
        {"a": set()},
        _F(1.5),
        _I(3),
        _S("s"),
        {_S("k"): _I(1)},
        cycle,
        loop,
    ]


@pytest.mark.parametrize("dumps", [protocol.dumps, protocol.compact_json], ids=["dumps", "compact_json"])
def test_dumps_is_the_strict_compact_json_encoder(dumps: Callable[[object], str]) -> None:
    for value in _values():
        assert _outcome(dumps, value) == _outcome(_STRICT, value), value
        assert dumps([1, [2]]) == "[1,[2]]"  # usable again after a failure (its cycle markers are cleared)


def test_random_documents_round_trip_like_json() -> None:
    rng = random.Random(38)

    def value(depth: int = 0) -> object:
        pick = rng.randrange(8 if depth < 4 else 5)
        if pick == 0:
            return rng.randint(-(10**20), 10**20)
        if pick == 1:
            return rng.random() * 10 ** rng.randint(-300, 300)
        if pick == 2:
            return "".join(chr(rng.randrange(0, 0x3000)) for _ in range(rng.randrange(10)))
        if pick == 3:
            return None
        if pick == 4:
            return rng.random() < 0.5
        if pick == 5:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        if pick == 6:
            return {str(value(depth + 1)): value(depth + 1) for _ in range(rng.randrange(4))}
        return (1, 2)

    for _ in range(2000):
        doc = value()
        text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
        assert protocol.dumps(doc) == text == protocol.compact_json(doc)
        assert _outcome(protocol.loads, text) == _outcome(json.loads, text)
        assert _outcome(protocol.loads, text.encode()) == _outcome(json.loads, text.encode())
