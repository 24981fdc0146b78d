"""sandbox.runtime.capture: what survives a round, and restoring it in a fresh namespace."""

from __future__ import annotations

import asyncio
import marshal
import textwrap
from typing import Any

import pytest

from codeact.sandbox.policy import DEFAULT_IMPORTS, Policy, compile_code
from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime.capture import capture, collect_definitions, definition_sources, split_restorable
from codeact.sandbox.runtime.guards import restricted_globals


def execute(source: str, namespace: dict[str, Any] | None = None, *, filename: str = "<code>") -> dict[str, Any]:
    compiled = compile_code(source, policy=Policy(), filename=filename)
    ns = namespace if namespace is not None else restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    code = marshal.loads(compiled.code)

    async def main() -> None:
        result = eval(code, ns)  # noqa: S307 - the code object under test
        if compiled.is_async:
            await result

    asyncio.run(main())
    return ns


def round_of(source: str) -> tuple[dict[str, Any], list[dict[str, str]], dict[str, Any]]:
    source = textwrap.dedent(source)
    namespace = execute(source)
    baseline = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    found = collect_definitions(source, filename="<code>")
    defs = {d.name: d.source for d in found}
    variables, uncaptured = capture(namespace, source_defs=defs, definitions=found, baseline=baseline)
    return variables, uncaptured, namespace


def test_data_functions_and_classes() -> None:
    variables, uncaptured, _ = round_of(
        """
        import json
        from collections import Counter
        x = 1
        names = ("a", "b")

        def helper(n):
            return n * 2

        @json_safe if False else (lambda f: f)
        async def fetch():
            return 1

        class Box:
            def __init__(self, v):
                self.v = v
        """
    )
    assert uncaptured == []
    assert list(variables) == ["json", "Counter", "x", "names", "helper", "fetch", "Box"]
    assert variables["x"] == 1
    assert variables["names"] == {"$type": "tuple", "v": ["a", "b"]}
    assert variables["helper"] == {
        "$type": "source",
        "kind": "function",
        "v": "def helper(n):\n    return n * 2\n",
    }
    assert variables["fetch"]["v"].startswith("@json_safe if False else (lambda f: f)\nasync def fetch():")
    assert variables["Box"]["kind"] == "class"


def test_builtins_underscores_and_baseline_are_skipped_silently() -> None:
    namespace = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    baseline = dict(namespace)
    namespace.update({"devops": object(), "_hidden": 1, "kept": 2, "length": len})
    variables, uncaptured = capture(namespace, source_defs={}, baseline=[*baseline, "devops"])
    assert variables == {"kept": 2}
    assert uncaptured == []


def test_modules_and_imported_names_are_kept_as_imports() -> None:
    variables, uncaptured, _ = round_of(
        """
        import json
        import json as j
        import collections.abc
        from collections import abc
        from collections.abc import Mapping
        from dataclasses import dataclass, field as fld
        from functools import reduce
        from heapq import heappush
        from asyncio import gather
        from random import randint
        from typing import Optional
        from math import pi
        """
    )
    assert uncaptured == []
    imports = {name: value["v"] for name, value in variables.items() if isinstance(value, dict)}
    assert imports == {
        "json": "import json",
        "j": "import json as j",
        "collections": "import collections",
        "abc": "import collections.abc as abc",
        "Mapping": "from collections.abc import Mapping",
        "dataclass": "from dataclasses import dataclass",
        "fld": "from dataclasses import field as fld",
        "reduce": "from functools import reduce",
        "heappush": "from heapq import heappush",
        "gather": "from asyncio import gather",
        "randint": "from random import randint",
        "Optional": "from typing import Optional",
    }
    assert variables["pi"] == 3.141592653589793  # data stays data


@pytest.mark.parametrize(
    ("source", "name", "type_name", "reason"),
    [
        pytest.param(
            "f = lambda x: x",
            "f",
            "function",
            "a lambda cannot be stored; write it as a function (def f(...): return ...) to keep it",
            id="lambda",
        ),
        pytest.param(
            "def outer():\n    def inner():\n        pass\n    return inner\ng = outer()",
            "g",
            "function",
            "function 'outer.<locals>.inner' was made inside outer() and uses its local variables (a closure), "
            "which cannot be stored; keep outer and call it again in the next round",
            id="closure",
        ),
        pytest.param(
            "def gen():\n    yield 1\nit = gen()",
            "it",
            "generator",
            "a generator cannot be stored; keep the list instead (it = list(...)): <generator object gen at 0x",
            id="generator",
        ),
        pytest.param(
            "class Thing:\n    def __repr__(self):\n        return 'T' * 200\nthing = Thing()",
            "thing",
            "Thing",
            "an instance of Thing, a class the code defined, cannot be stored; make Thing a @dataclass (its fields "
            "are stored) or keep its data in a dict: " + "T" * 77 + "...",
            id="object-with-long-repr",
        ),
        pytest.param(
            "loop = [1]\nloop.append(loop)",
            "loop",
            "list",
            "it contains itself (a circular reference), which cannot be stored; keep a copy without the cycle: "
            "[1, [...]]",
            id="circular",
        ),
        pytest.param(
            "class Bad:\n    def __repr__(self):\n        raise ValueError('no')\nbad = Bad()",
            "bad",
            "Bad",
            "an instance of Bad, a class the code defined, cannot be stored; make Bad a @dataclass (its fields are "
            "stored) or keep its data in a dict: <Bad object (repr failed)>",
            id="failing-repr",
        ),
    ],
)
def test_uncaptured_values_say_why(source: str, name: str, type_name: str, reason: str) -> None:
    variables, uncaptured, _ = round_of(source)
    assert name not in variables or isinstance(variables[name], str)  # dropped (a callable) or kept as repr()
    missed = [u for u in uncaptured if u["name"] == name]
    assert len(missed) == 1
    assert missed[0]["type"] == type_name
    assert missed[0]["reason"].startswith(reason)


def test_per_variable_cap() -> None:
    namespace = {"small": "x" * 10, "big": "y" * 3400, "after": 1}
    variables, uncaptured = capture(namespace, source_defs={}, max_var_bytes=1024)
    assert variables == {"small": "x" * 10, "after": 1}
    assert uncaptured == [{"name": "big", "type": "str", "reason": "exceeds the 1 KiB per-variable cap (3.3 KiB)"}]


def test_per_variable_cap_in_mib() -> None:
    _, uncaptured = capture({"big": ["z" * 1024] * 3300}, source_defs={})
    assert uncaptured[0]["reason"] == "exceeds the 1 MiB per-variable cap (3.2 MiB)"


def test_per_session_cap() -> None:
    namespace = {"a": "x" * 600, "b": "y" * 600, "c": 1}
    variables, uncaptured = capture(namespace, source_defs={}, max_total_bytes=1024)
    assert list(variables) == ["a", "c"]
    assert uncaptured == [
        {
            "name": "b",
            "type": "str",
            "reason": "exceeds the 1 KiB per-session cap (1.2 KiB with the variables before it)",
        }
    ]


def test_capture_does_not_change_the_namespace() -> None:
    namespace: dict[str, Any] = {"a": [1, (2,)]}
    before = repr(namespace)
    capture(namespace, source_defs={})
    assert repr(namespace) == before


# -- definition_sources -----------------------------------------------------------------------------


def test_definition_sources_are_exact_segments_with_decorators() -> None:
    source = textwrap.dedent(
        """\
        import functools
        x = 1

        @functools.lru_cache(
            maxsize=None,
        )
        def cached(n):  # trailing comment
            return n

        async def fetch(): return 1
        class A(
            object,
        ):
            '''Doc.'''

            def m(self):
                return 1
        if x:
            def hidden():
                pass
        def cached(n):
            return -n
        """
    )
    defs = definition_sources(source)
    assert list(defs) == ["fetch", "A", "hidden", "cached"]  # `if` bodies are module level too
    assert defs["hidden"] == "def hidden():\n    pass\n"
    assert defs["fetch"] == "async def fetch(): return 1\n"
    assert defs["A"] == "class A(\n    object,\n):\n    '''Doc.'''\n\n    def m(self):\n        return 1\n"
    assert defs["cached"] == "def cached(n):\n    return -n\n"


def test_definition_sources_of_bad_syntax_is_empty() -> None:
    assert definition_sources("def f(:\n") == {}


def test_split_restorable_keeps_order() -> None:
    variables = {
        "x": 1,
        "f": {"$type": "source", "kind": "function", "v": "def f():\n    return 1\n"},
        "t": {"$type": "tuple", "v": [1]},
        "C": {"$type": "source", "kind": "class", "v": "class C:\n    pass"},
        "json": {"$type": "source", "kind": "import", "v": "import json"},
    }
    data, prelude = split_restorable(variables)
    assert data == {"x": 1, "t": {"$type": "tuple", "v": [1]}}
    assert prelude == (
        "try:\n    import json\nexcept ImportError:\n    pass\n\ndef f():\n    return 1\n\n\nclass C:\n    pass\n"
    )
    assert split_restorable({"x": 1}) == ({"x": 1}, "")


# -- full rounds: capture, replace the sandbox, restore ---------------------------------------------


def restore(variables: dict[str, Any]) -> dict[str, Any]:
    """What the runtime does in a fresh sandbox: data, then the prelude, then classes for the registry."""
    data, prelude = split_restorable(variables)
    namespace = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    for name, value in data.items():
        namespace[name] = codec.decode(value)
    if prelude:
        execute(prelude, namespace, filename="<prelude>")
    registry = {name: value for name, value in namespace.items() if isinstance(value, type)}
    for name, value in data.items():
        namespace[name] = codec.decode(value, registry=registry)
    return namespace


def test_definitions_survive_sandbox_replacement_across_rounds() -> None:
    round1 = textwrap.dedent(
        """
        import dataclasses
        LIMIT = 10

        @dataclasses.dataclass
        class Item:
            name: str
            qty: int = 1

        def helper(x):
            return min(x * 2, LIMIT)
        items = [Item("a", 2)]
        """
    )
    namespace = execute(round1)
    defs = definition_sources(round1)
    baseline = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    variables, uncaptured = capture(namespace, source_defs=defs, baseline=baseline)
    assert uncaptured == []

    for round_number in range(2, 6):  # every round in a brand-new namespace ("the sandbox was replaced")
        namespace = restore(variables)
        source = f"total = helper({round_number}) + items[0].qty\nround_{round_number} = total\n"
        execute(source, namespace)
        data, prelude = split_restorable(variables)
        defs = definition_sources(prelude)
        defs.update(definition_sources(source))
        variables, uncaptured = capture(namespace, source_defs=defs, baseline=baseline)
        assert uncaptured == []
    assert variables["total"] == 10 + 2
    assert variables["round_2"] == 6
    assert variables["helper"]["kind"] == "function"
    assert variables["items"] == [{"$type": "dataclass", "class": "Item", "v": {"name": "a", "qty": 2}}]
    assert type(restore(variables)["items"][0]).__name__ == "Item"


def test_a_value_the_codec_cannot_keep_is_kept_as_its_repr() -> None:
    variables, uncaptured, _ = round_of(
        """
        class Point:
            def __init__(self, x, y):
                self.x, self.y = x, y
            def __repr__(self):
                return f"Point(x={self.x}, y={self.y})"
        p = Point(1, 2)
        gen = (i for i in range(3))
        square = lambda v: v * v
        """
    )
    assert variables["p"] == "Point(x=1, y=2)"
    assert variables["gen"] == "<generator object <genexpr>>"  # no address: replay compares it
    assert "square" not in variables  # a callable is not replaced by a str: its note says how to keep it
    notes = {u["name"]: u["reason"] for u in uncaptured}
    assert notes["p"].endswith("; the next round has its repr() as a str instead")
    assert notes["gen"].endswith("; the next round has its repr() as a str instead")
    assert not notes["square"].endswith("instead")


def test_a_kept_repr_is_cut_and_respects_the_caps() -> None:
    class Wide:
        def __repr__(self) -> str:
            return "W" * 10_000

    variables, _ = capture({"w": Wide()}, source_defs={})
    assert len(variables["w"]) == 4000 and variables["w"].endswith("...")
    variables, uncaptured = capture({"w": Wide()}, source_defs={}, max_var_bytes=100)
    assert variables == {} and not uncaptured[0]["reason"].endswith("instead")
