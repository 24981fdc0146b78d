"""Capture keeps what the code defines wherever Python binds it at module level (issue 10, item 1).

The FIM frame runs the model's code inside ``try:``; definitions inside ``try``/``if``/``with``/``for``
/``while``/``match`` blocks are module-level names all the same, so they must survive the round.
"""

from __future__ import annotations

import textwrap
from typing import Any

from codeact.sandbox.policy import DEFAULT_IMPORTS
from codeact.sandbox.runtime.capture import capture, collect_definitions, split_restorable
from codeact.sandbox.runtime.guards import restricted_globals
from codeact.segments import build_frame
from tests.sandbox.test_capture import execute, restore


def round_in(source: str, namespace: dict[str, Any] | None = None, prelude: str = "") -> tuple[dict[str, Any], list]:
    """Run ``source`` (already a full program) and capture like the runtime does."""
    namespace = namespace if namespace is not None else restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    execute(source, namespace)
    found = collect_definitions(prelude, filename="<prelude>") + collect_definitions(source, filename="<code>")
    baseline = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    return capture(namespace, source_defs={d.name: d.source for d in found}, definitions=found, baseline=baseline)


MODEL_CODE = textwrap.dedent(
    '''\
    import statistics as st
    from dataclasses import dataclass, field
    import enum

    def norm(x):
        return x.strip().lower()

    def total_qty(items, *, key="qty", start=0):
        """Sum one field."""
        return start + sum(i[key] for i in items)

    def label(name, sep=" - "):
        return norm(name) + sep + "ok"

    class Inventory:
        unit = "pcs"

        def __init__(self, items):
            self.items = items

        def total(self):
            return total_qty(self.items)

        @staticmethod
        def describe():
            return """multi
    line text"""

    @dataclass
    class Order:
        id: str
        lines: list = field(default_factory=list)

        def size(self):
            return len(self.lines)

    class Color(enum.Enum):
        RED = 1
        BLUE = 2

    order = Order("O-1", [1, 2, 3])
    favourite = Color.BLUE
    '''
)


def test_everything_defined_inside_the_frames_try_survives_a_fresh_namespace() -> None:
    program = build_frame().program(MODEL_CODE)
    assert "\n    def total_qty(" in program  # the frame indents the model's code into `try:`
    variables, uncaptured = round_in(program)
    assert uncaptured == []
    assert {"st", "dataclass", "field", "enum", "total_qty", "label", "Inventory", "Order", "Color"} <= set(variables)
    assert variables["total_qty"]["v"].startswith('def total_qty(items, *, key="qty", start=0):\n    """Sum')
    assert variables["st"]["v"] == "import statistics as st"

    namespace = restore(variables)  # a brand-new sandbox, round 3
    execute(
        "r = (total_qty([{'qty': 2}, {'qty': 3}], start=1), Inventory([{'qty': 4}]).total(), Inventory.unit,\n"
        "     order.size(), isinstance(order, Order), favourite is Color.BLUE, st.mean([1, 3]), label(' A '),\n"
        "     Inventory.describe())\n",
        namespace,
    )
    assert namespace["r"] == (6, 4, "pcs", 3, True, True, 2, "a - ok", "multi\nline text")


def test_the_definition_that_ran_is_kept_when_a_name_is_defined_twice() -> None:
    source = textwrap.dedent(
        """\
        mode = "b"
        if mode == "a":
            def pick():
                return "a"
            class Box:
                def kind(self):
                    return "a"
        else:
            def pick():
                return "b"
            class Box:
                def kind(self):
                    return "b"
        """
    )
    variables, uncaptured = round_in(source)
    assert uncaptured == []
    namespace = restore(variables)
    execute("r = pick() + Box().kind()", namespace)
    assert namespace["r"] == "bb"


def test_blocks_of_every_kind_are_walked_but_function_bodies_are_not() -> None:
    source = textwrap.dedent(
        """\
        for i in range(1):
            def in_for():
                return 1
        while True:
            def in_while():
                return 2
            break
        with open("/dev/null") as fh:
            def in_with():
                return 3
        match 1:
            case 1:
                def in_match():
                    return 4
        try:
            raise ValueError
        except ValueError:
            def in_except():
                return 5
        finally:
            def in_finally():
                return 6
        def outer():
            def inner():
                return 7
            return inner
        """
    )
    names = [d.name for d in collect_definitions(source)]
    assert names == ["in_for", "in_while", "in_with", "in_match", "in_except", "in_finally", "outer"]


def test_an_alias_of_a_defined_function_is_kept() -> None:
    variables, uncaptured = round_in("try:\n    def f():\n        return 1\n    g = f\nexcept Exception:\n    raise\n")
    assert uncaptured == []
    assert variables["g"] == {"$type": "source", "kind": "alias", "v": "g = f"}
    data, prelude = split_restorable(variables)
    assert prelude.endswith("try:\n    g = f\nexcept NameError:\n    pass\n")
    namespace = restore(variables)
    execute("r = g()", namespace)
    assert namespace["r"] == 1


def test_a_decorated_function_whose_decorator_returns_a_wrapper_is_kept() -> None:
    source = textwrap.dedent(
        """\
        try:
            def logged(fn):
                def wrapper(*args):
                    return ("logged", fn(*args))
                return wrapper

            @logged
            def add(a, b=2):
                return a + b
        except Exception:
            raise
        """
    )
    variables, uncaptured = round_in(source)
    assert uncaptured == []
    assert variables["add"]["v"].startswith("@logged\ndef add(a, b=2):")
    namespace = restore(variables)
    execute("r = add(1)", namespace)
    assert namespace["r"] == ("logged", 3)


def test_a_string_spanning_lines_keeps_its_text_when_the_definition_is_dedented() -> None:
    source = 'if True:\n    def text():\n        return """a\n    b\nc"""\n'
    (definition,) = collect_definitions(source)
    namespace: dict[str, Any] = {}
    exec(definition.source, namespace)  # noqa: S102 - our own test source
    assert namespace["text"]() == "a\n    b\nc"


def test_what_cannot_be_kept_says_what_to_do_instead() -> None:
    source = textwrap.dedent(
        """\
        try:
            def make(n):
                def add(x):
                    return x + n
                return add
            add5 = make(5)
            squares = (i * i for i in range(3))
            class Plain:
                pass
            obj = Plain()
            bound = [1].append
            nested = {"gen": (i for i in [])}
            from dataclasses import dataclass
            @dataclass
            class Holder:
                rows: object
            holder = Holder(iter([1]))
        except Exception:
            raise
        """
    )
    _, uncaptured = round_in(source)
    reasons = {u["name"]: u["reason"] for u in uncaptured}
    assert set(reasons) == {"add5", "squares", "obj", "bound", "nested", "holder"}
    assert reasons["add5"] == (
        "function 'make.<locals>.add' was made inside make() and uses its local variables (a closure), which "
        "cannot be stored; keep make and call it again in the next round"
    )
    assert reasons["squares"].startswith("a generator cannot be stored; keep the list instead (squares = list(...))")
    assert reasons["obj"].startswith("an instance of Plain, a class the code defined, cannot be stored; make Plain")
    assert reasons["bound"].startswith("a builtin_function_or_method object cannot be stored")
    assert reasons["nested"].startswith("it holds an object of type 'generator', which cannot be stored")
    assert reasons["holder"].startswith("it holds an object of type 'list_iterator', which cannot be stored")


def test_a_function_declared_global_inside_a_function_is_kept() -> None:
    source = textwrap.dedent(
        """\
        try:
            def setup(rate):
                global convert
                def convert(x):
                    return x * 2
                return rate
            setup(2)
        except Exception:
            raise
        """
    )
    variables, uncaptured = round_in(source)
    assert uncaptured == []
    assert variables["convert"]["v"] == "def convert(x):\n    return x * 2\n"
    namespace = restore(variables)
    execute("r = convert(21)", namespace)
    assert namespace["r"] == 42


def test_the_frame_keeps_the_text_of_multi_line_strings_in_both_reply_shapes() -> None:
    frame = build_frame()
    fenced = 'def f():\n    return """x\n    y"""\nz = f()\n'  # chat: flush left
    continued = 'def f():\n        return """x\n    y"""\n    z = f()\n'  # completion: after `try:\n    `
    for middle in (fenced, continued):
        namespace: dict[str, Any] = {}
        exec(frame.program(middle), namespace)  # noqa: S102 - our own test program
        assert namespace["z"] == "x\n    y", middle
