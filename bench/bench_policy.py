"""The cost of the code policy and the codec, in-process (no sandbox round trip).

Figures (ratios against plain ``exec`` measured in the same run, best of N). Times are CPU time of
this process (``time.process_time``): the work is single-threaded and in-process, and CPU time keeps
the ratios meaningful on a shared, loaded machine.

* ``attribute_loop_ratio``: 300,000 x ``p.x = p.x + i`` on an instance of a class the code defined,
  restricted (our guards) vs plain exec. Target <= 3.
* ``attribute_loop_stock_ratio``: the same loop with RestrictedPython's stock ``safer_getattr`` and
  ``full_write_guard`` (for comparison; the issue quotes ~5.6x).
* ``plain_loop_ratio``: a 1,000,000-iteration arithmetic loop, restricted vs plain. Target <= 1.5.
* ``codec_ms``: capture (encode) + restore (decode) of 100 variables totalling ~1 MiB.
* ``match_tree_ratio``: a tree evaluator matching dataclasses (``case Add(l, r): ... case Mul(l, r): ...
  case Num(v): ...``, recursive, 8,191 nodes), restricted vs plain; ``match_first_case_ratio``: a match whose
  subject is the class of its first of three class-pattern cases; ``match_builtin_ratio``: a match on strings,
  lists and dicts (literals, sequences, mappings, ``str()``). These are the median of the ratios of 15
  alternating pairs (the functions defined once, each call timed alone): see docs/scaling.md, "match".
"""

from __future__ import annotations

import datetime
import marshal
import statistics
import time
from collections.abc import Callable
from typing import Any

ATTRIBUTE_LOOP = """
class P:
    def __init__(self):
        self.x = 0
p = P()
for i in range(300000):
    p.x = p.x + i
"""

PLAIN_LOOP = """
total = 0
for i in range(1000000):
    total += i * 2
"""


MATCH_TREE = """
from dataclasses import dataclass

@dataclass
class Num:
    v: int

@dataclass
class Add:
    l: object
    r: object

@dataclass
class Mul:
    l: object
    r: object

def build(depth, i=0):
    if depth == 0:
        return Num(i % 7)
    return (Add if depth % 2 else Mul)(build(depth - 1, i), build(depth - 1, i + 1))

def ev(node):
    match node:
        case Add(l, r):
            return ev(l) + ev(r)
        case Mul(l, r):
            return ev(l) * ev(r) % 1000003
        case Num(v):
            return v

tree = build(12)

def run():
    return sum(ev(tree) for _ in range(5))
"""

MATCH_FIRST_CASE = MATCH_TREE.replace(
    "\ndef run():\n    return sum(ev(tree) for _ in range(5))\n",
    """
def first(node):
    match node:
        case Num(v):
            return v
        case Add(l, r):
            return 0
        case Mul(l, r):
            return 1

leaves = [Num(i) for i in range(4096)]

def run():
    return sum(first(leaf) for _ in range(5) for leaf in leaves)
""",
)

MATCH_BUILTIN = """
def handle(command):
    match command:
        case "quit" | "exit":
            return 0
        case ["go", direction]:
            return len(direction)
        case ["drop", *objects] if objects:
            return len(objects)
        case {"op": "add", "args": [a, b]}:
            return a + b
        case {"op": op, **rest}:
            return len(rest)
        case str() as text:
            return len(text)
        case _:
            return -1

items = [c.split() for c in ("go north", "drop a b c", "quit", "look")]
items += ["exit", "hello", {"op": "add", "args": [1, 2]}, {"op": "x", "k": 1}, 5]

def run():
    return sum(handle(item) for _ in range(6000) for item in items)
"""


def _best(runs: int, func: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.process_time()
        func()
        best = min(best, time.process_time() - started)
    return best


def _ratio(source: str, runs: int) -> dict[str, float]:
    from codeact.sandbox.policy import DEFAULT_IMPORTS, Policy, compile_code
    from codeact.sandbox.runtime.guards import restricted_globals

    restricted = marshal.loads(compile_code(source, policy=Policy()).code)
    plain = compile(source, "<code>", "exec")
    plain_s = restricted_s = float("inf")
    for _ in range(runs):  # interleaved, so load on the machine hits both alike
        plain_s = min(plain_s, _best(1, lambda: exec(plain, {"__name__": "__main__"})))  # noqa: S102
        restricted_s = min(
            restricted_s,
            _best(1, lambda: exec(restricted, restricted_globals(allowed_imports=DEFAULT_IMPORTS))),  # noqa: S102
        )
    return {"plain_ms": plain_s * 1e3, "restricted_ms": restricted_s * 1e3, "ratio": restricted_s / plain_s}


def _match_ratio(source: str, pairs: int) -> float:
    """Median of the ratios restricted/plain of ``run()`` (defined by ``source``), in alternating pairs."""
    from codeact.sandbox.policy import DEFAULT_IMPORTS, Policy, compile_code
    from codeact.sandbox.runtime.guards import restricted_globals

    plain: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(source, "<code>", "exec"), plain)  # noqa: S102 - the bench's own source
    restricted = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    exec(marshal.loads(compile_code(source, policy=Policy()).code), restricted)  # noqa: S102
    if plain["run"]() != restricted["run"]():  # a broken rewrite would make the figure meaningless
        raise RuntimeError("the restricted match gave another result than plain CPython")
    ratios = []
    for _ in range(pairs):
        plain_s = _best(1, plain["run"])
        ratios.append(_best(1, restricted["run"]) / plain_s)
    return statistics.median(ratios)


def _stock_ratio(runs: int) -> dict[str, float]:
    import builtins

    from RestrictedPython import compile_restricted
    from RestrictedPython.Guards import full_write_guard, safe_builtins, safer_getattr

    class GuardedBase:  # stock full_write_guard only lets objects that opt in be written
        _guarded_writes = True

    stock_builtins = dict(safe_builtins, __build_class__=builtins.__build_class__)
    code = compile_restricted(ATTRIBUTE_LOOP.replace("class P:", "class P(GuardedBase):"), "<code>", "exec")
    plain = compile(ATTRIBUTE_LOOP, "<code>", "exec")

    def stock() -> None:
        exec(  # noqa: S102
            code,
            {
                "__builtins__": stock_builtins,
                "__name__": "__main__",
                "__metaclass__": type,
                "GuardedBase": GuardedBase,
                "_getattr_": safer_getattr,
                "_write_": full_write_guard,
                "_getiter_": iter,
            },
        )

    plain_s = stock_s = float("inf")
    for _ in range(runs):
        plain_s = min(plain_s, _best(1, lambda: exec(plain, {"__name__": "__main__"})))  # noqa: S102
        stock_s = min(stock_s, _best(1, stock))
    return {"ratio": stock_s / plain_s}


def _variables() -> dict[str, Any]:
    """100 variables, ~10 KiB each: records, text, numbers, and tagged values."""
    when = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)  # noqa: UP017 - explicit for readers
    variables: dict[str, Any] = {}
    for n in range(100):
        kind = n % 4
        if kind == 0:
            variables[f"rows_{n}"] = [{"id": i, "name": f"host-{i}", "cpu": i / 7, "up": True} for i in range(190)]
        elif kind == 1:
            variables[f"text_{n}"] = "log line with some words\n" * 420
        elif kind == 2:
            variables[f"nums_{n}"] = list(range(1800))
        else:
            variables[f"tagged_{n}"] = [(i, when + datetime.timedelta(minutes=i), {i, -i}) for i in range(110)]
    return variables


def _codec(runs: int) -> dict[str, float]:
    from codeact.sandbox.runtime import codec
    from codeact.sandbox.runtime.capture import capture, split_restorable

    namespace = _variables()
    captured, uncaptured = capture(namespace, source_defs={})
    assert not uncaptured, uncaptured  # noqa: S101 - a broken fixture would make the figure meaningless
    size = len(codec.dumps(captured).encode())

    def round_trip() -> None:
        variables, _ = capture(namespace, source_defs={})
        data, _prelude = split_restorable(variables)
        for value in data.values():
            codec.decode(value)

    encode_s = _best(runs, lambda: capture(namespace, source_defs={}))
    decode_s = _best(runs, lambda: [codec.decode(v) for v in captured.values()])
    return {
        "codec_ms": _best(runs, round_trip) * 1e3,
        "codec_encode_ms": encode_s * 1e3,
        "codec_decode_ms": decode_s * 1e3,
        "codec_bytes": size,
    }


def run() -> dict[str, Any]:
    """Measure; see the module docstring for the figures."""
    attribute = _ratio(ATTRIBUTE_LOOP, runs=7)
    loop = _ratio(PLAIN_LOOP, runs=5)
    stock = _stock_ratio(runs=5)
    figures: dict[str, Any] = {
        "attribute_loop_ratio": round(attribute["ratio"], 2),
        "attribute_loop_plain_ms": round(attribute["plain_ms"], 1),
        "attribute_loop_stock_ratio": round(stock["ratio"], 2),
        "plain_loop_ratio": round(loop["ratio"], 2),
        "plain_loop_plain_ms": round(loop["plain_ms"], 1),
        "targets": {"attribute_loop_ratio": 3.0, "plain_loop_ratio": 1.5},
    }
    figures.update({k: round(v, 2) if isinstance(v, float) else v for k, v in _codec(runs=5).items()})
    figures["match_tree_ratio"] = round(_match_ratio(MATCH_TREE, pairs=15), 2)
    figures["match_first_case_ratio"] = round(_match_ratio(MATCH_FIRST_CASE, pairs=15), 2)
    figures["match_builtin_ratio"] = round(_match_ratio(MATCH_BUILTIN, pairs=15), 2)
    return figures


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
