"""``match`` under the policy (sandbox/_match_rewrite.py, sandbox/runtime/_match_guard.py), in-process.

Patterns read values the transform cannot wrap: class patterns read attributes of the subject, dotted
names in patterns are attribute chains. Every hostile snippet must raise; ordinary code must give what
plain CPython gives. The out-of-process cases live in hostile_cases.py.
"""

from __future__ import annotations

import os
import textwrap
import weakref
from typing import Any

import pytest

from codeact.sandbox.policy import CompileFailure, Policy, compile_code
from tests.sandbox.test_guards import run

# A metaclass whose __instancecheck__ says yes to anything: a module then "matches" its classes.
_ANY = "M = type(int)('M', (type(int),), {'__instancecheck__': lambda c, o: True})\n"

HOSTILE = [
    pytest.param(
        "import dataclasses\nmatch dataclasses:\n    case object(sys=object(modules={'os': object(system=f)})):\n"
        "        r = f",
        AttributeError, "attribute 'sys' is module 'sys', which is not allowed", id="object-keyword-chain",
    ),
    pytest.param(
        _ANY + "Any = M('Any', (), {'__match_args__': ('sys',)})\nimport dataclasses\n"
        "match dataclasses:\n    case Any(s):\n        r = s",
        AttributeError, "attribute 'sys' is module 'sys'", id="metaclass-instancecheck-positional",
    ),
    pytest.param(
        _ANY + "Any = M('Any', (), {})\nimport dataclasses\n"
        "match dataclasses:\n    case Any(sys=Any(modules={'os': Any(system=f)})):\n        r = f",
        AttributeError, "attribute 'sys' is module 'sys'", id="metaclass-instancecheck-nested",
    ),
    pytest.param(
        "B = type(int)('B', (), {'__match_args__': ('__class__',)})\nclass C(B):\n    pass\n"
        "match C():\n    case C(k):\n        r = k",
        AttributeError, "attribute '__class__' is not allowed", id="owned-class-match-args-dunder",
    ),
    pytest.param(
        _ANY + "Any = M('Any', (), {'__match_args__': ('__globals__',)})\ndef f():\n    pass\n"
        "match f:\n    case Any(g):\n        r = g['__builtins__']",
        AttributeError, "attribute '__globals__' is not allowed", id="match-args-globals",
    ),
    pytest.param(
        "import asyncio\nB = type(int)('B', (), {'__match_args__': ('_ssock',)})\n"
        "class L(asyncio.SelectorEventLoop, B):\n    pass\nloop = L()\ntry:\n    match loop:\n"
        "        case L(s):\n            r = s\nfinally:\n    loop.close()",
        AttributeError, "attribute '_ssock' is not allowed", id="private-attribute-of-stdlib-base-positional",
    ),
    pytest.param(
        "import asyncio\nclass L(asyncio.SelectorEventLoop):\n    pass\nloop = L()\ntry:\n    match loop:\n"
        "        case L(_ssock=s):\n            r = s\nfinally:\n    loop.close()",
        AttributeError, "attribute '_ssock' is not allowed", id="private-attribute-of-stdlib-base-keyword",
    ),
    pytest.param(
        "match '{0.__class__}':\n    case str(format=f):\n        r = f(1)",
        AttributeError, "a class pattern cannot read 'format' of a 'str' object", id="str-format",
    ),
    pytest.param(
        "match '{0.__class__}':\n    case str(format_map=f):\n        r = f({})",
        AttributeError, "cannot read 'format_map'", id="str-format-map",
    ),
    pytest.param(
        "import dataclasses\ngot = []\nclass Grab:\n    def __eq__(self, other):\n        got.append(other)\n"
        "        return False\nmatch Grab():\n    case dataclasses.sys:\n        pass\nr = got[0].modules['os']",
        AttributeError, "attribute 'sys' is module 'sys'", id="value-pattern-eq",
    ),
    pytest.param(
        "import dataclasses\ngot = []\nclass Grab(dict):\n    def get(self, key, default=None):\n"
        "        got.append(key)\n        return default\nmatch Grab():\n    case {dataclasses.sys: 1}:\n        pass\n"
        "r = got[0].modules['os']",
        AttributeError, "attribute 'sys' is module 'sys'", id="mapping-key-get",
    ),
    pytest.param(
        "import dataclasses\nmatch 1:\n    case dataclasses.sys.Foo():\n        pass",
        AttributeError, "attribute 'sys' is module 'sys'", id="dotted-class-name",
    ),
    pytest.param(
        "import asyncio\nclass L(asyncio.SelectorEventLoop):\n    pass\nloop = L()\ngot = []\nclass Grab:\n"
        "    def __eq__(self, other):\n        got.append(other)\n        return False\ntry:\n    match Grab():\n"
        "        case loop._ssock:\n            pass\nfinally:\n    loop.close()",
        AttributeError, "attribute '_ssock' is not allowed", id="value-pattern-private",
    ),
    pytest.param(
        "import dataclasses\nmatch dataclasses:\n    case object(nothing_here=s) | object(sys=s):\n        r = s",
        AttributeError, "attribute 'sys' is module 'sys'", id="or-pattern",
    ),
    pytest.param(
        "import dataclasses\nmatch dataclasses:\n    case object(sys=object() as s):\n        r = s",
        AttributeError, "attribute 'sys' is module 'sys'", id="as-capture",
    ),
    pytest.param(
        "import dataclasses\nmatch dataclasses:\n    case object(sys=s) if s.modules['os'].system('true') == 0:\n"
        "        pass",
        AttributeError, "attribute 'sys' is module 'sys'", id="guard-uses-capture",
    ),
    pytest.param(
        "import dataclasses\nmatch [dataclasses]:\n    case [object(sys=s)]:\n        r = s",
        AttributeError, "attribute 'sys' is module 'sys'", id="inside-sequence",
    ),
    pytest.param(
        "import dataclasses\nmatch {'m': dataclasses}:\n    case {'m': object(sys=s)}:\n        r = s",
        AttributeError, "attribute 'sys' is module 'sys'", id="inside-mapping",
    ),
]  # fmt: skip

HOSTILE_COMPILE = [
    pytest.param("match 1:\n    case int(gi_frame=r):\n        pass", '"gi_frame"', id="keyword-denied"),
    pytest.param("match 1:\n    case str(__class__=c):\n        pass", '"__class__"', id="keyword-dunder"),
    pytest.param("match 1:\n    case x.__class__:\n        pass", '"__class__"', id="value-dunder"),
    pytest.param("match 1:\n    case {**_getattr_}:\n        pass", '"_getattr_"', id="mapping-rest-guard"),
    pytest.param("match 1:\n    case _codeact_match_1_.v0:\n        pass", '"_codeact_match_1_"', id="holder"),
    pytest.param("match [1]:\n    case [_codeact_capture_x_]:\n        pass", '"_codeact_capture_x_"', id="capture"),
    pytest.param("match 1:\n    case _codeact_pattern_class_():\n        pass", '"_codeact_pattern_class_"',
                 id="pattern-class-helper"),
    pytest.param("_codeact_captured_ = lambda *v: True", '"_codeact_captured_"', id="rebind-captured"),
    pytest.param("_codeact_more_1_ = True", '"_codeact_more_1_"', id="rebind-part-flag"),
    pytest.param("match 1:\n    case _codeact_subject_1_:\n        pass", '"_codeact_subject_1_"', id="subject"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "exc_type", "fragment"), HOSTILE)
def test_hostile_pattern_raises(code: str, exc_type: type[BaseException], fragment: str) -> None:
    with pytest.raises(exc_type) as info:
        run(code)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("code", "fragment"), HOSTILE_COMPILE)
def test_hostile_pattern_is_rejected_at_compile_time(code: str, fragment: str) -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code(code, policy=Policy())
    assert info.value.type == "PolicyViolation"
    assert fragment in info.value.message


class _Flip:
    """A host object whose ``value`` is 1 on the first read and ``hidden`` on the next (and so on).

    What only a stdlib attribute could do to sandboxed code: a class pattern's reads are checked, then the
    interpreter reads again; the value it binds is checked once more, before any name is bound.
    """

    def __init__(self, hidden: object) -> None:
        self.hidden = hidden
        self.reads = 0

    @property
    def value(self) -> object:
        self.reads += 1
        return 1 if self.reads % 2 else self.hidden


@pytest.mark.parametrize(
    "pattern",
    [
        pytest.param("object(value=m)", id="keyword"),
        pytest.param("object(value=object() as m)", id="as"),
        pytest.param("object(value=m) | [m]", id="or"),
        pytest.param("object(value=m) if seen.append(1) is None", id="guard"),
    ],
)
def test_a_refused_capture_is_never_bound(pattern: str) -> None:
    code = f"""
    seen = []
    try:
        match flip:
            case {pattern}:
                seen.append(2)
    except AttributeError as exc:
        error = str(exc)
    """
    namespace = run(code, extra={"flip": _Flip(os)})
    assert namespace["error"].startswith("a match pattern captured module 'os', which is not allowed")
    assert "m" not in namespace
    assert namespace["seen"] == []


def test_a_captured_builtin_open_or_format_is_refused() -> None:
    # The code's own `'...'.format` read is already the guarded formatter (captured freely); the raw ones are not.
    namespace = run(
        """
        errors = []
        for flip in flips:
            try:
                match flip:
                    case object(value=v):
                        pass
            except AttributeError as exc:
                errors.append(str(exc).split(',')[0])
        match ['{0}'.format]:
            case [guarded]:
                formatted = guarded(1)
        """,
        extra={"flips": [_Flip(open), _Flip(compile), _Flip(str.format), _Flip("{0.x}".format)]},
    )
    assert len(namespace["errors"]) == 4
    assert all(e.startswith("a match pattern captured <") for e in namespace["errors"])
    assert namespace["formatted"] == "1"


def test_a_warm_class_pattern_checks_every_kind_of_value_it_acts_on() -> None:
    # After its first class pattern the namespace calls the match guard directly and the stand-in is cached;
    # the check passes the usual values at once and still acts on a module, a proxy of one (isinstance sees
    # it through __class__), open and compile, read by the stand-in or captured after a changing read.
    code = """
    from dataclasses import dataclass

    @dataclass
    class P:
        x: object

    errors = []
    for value in [1, 'a', None, 2.5, [1], (1,), {}, P(1), print, len] + hosts:
        try:
            match P(value):
                case P(v):
                    pass
        except AttributeError as exc:
            errors.append(str(exc).split(',')[0])
    for flip in flips:
        try:
            match flip:
                case object(value=v):
                    pass
        except AttributeError as exc:
            errors.append(str(exc).split(',')[0])
    """
    hosts = [os, weakref.proxy(os), open, compile]
    namespace = run(code, extra={"hosts": hosts, "flips": [_Flip(os), _Flip(weakref.proxy(os))]})
    assert namespace["errors"] == [
        "attribute 'x' is module 'os'",
        "attribute 'x' is module 'os'",
        "attribute 'x' is not allowed in sandboxed code",
        "attribute 'x' is not allowed in sandboxed code",
        "a match pattern captured module 'os'",
        "a match pattern captured module 'os'",
    ]
    assert namespace["v"] is len  # the last value that passed: no refused one was bound


def test_captures_outside_class_patterns_bind_directly() -> None:
    # The subject and its items: what the code's own `subject[0]` gives, unguarded alike, so not rewritten.
    compiled = compile_code("match x:\n    case [a, *rest] | {'k': a, **rest}:\n        pass\n", policy=Policy())
    assert b"_codeact_captured_" not in compiled.code
    compiled = compile_code("match x:\n    case [object(v=a)] | [a]:\n        pass\n", policy=Policy())
    assert b"_codeact_captured_" in compiled.code


_DEFINITIONS = """
from dataclasses import dataclass
import enum
import math

@dataclass
class Circle:
    r: float

@dataclass
class Point:
    x: int
    y: int

@dataclass
class Account:
    _balance: int
    owner: str

class Color(enum.Enum):
    RED = 1
    GREEN = 2

class MyInt(int):
    pass

class Celsius(float):
    pass

def describe(s):
    match s:
        case Circle(r=r):
            return ('circle', r)
        case Point(x=0, y=y) if y > 0:
            return ('on the y axis', y)
        case Point(a, b):
            return ('point', a, b)
        case Account(balance, owner=o):
            return ('account', balance, o)
        case Account(_balance=b):
            return ('never', b)
        case Color.RED | Color.GREEN:
            return ('color', s.name)
        case math.pi:
            return ('pi',)
        case MyInt(x):
            return ('myint', x)
        case Celsius(c, real=re):
            return ('celsius', c, re)
        case bool(b):
            return ('bool', b)
        case int(x):
            return ('int', x)
        case str() as text:
            return ('str', text)
        case [a, b]:
            return ('pair', a, b)
        case [first, *rest]:
            return ('seq', first, rest)
        case {'k': v, **others}:
            return ('dict', v, others)
        case {Color.RED: v}:
            return ('keyed', v)
        case (x, y) | [x, y, _]:
            return ('never', x, y)
        case _:
            return None

values = [Circle(2.0), Point(0, 3), Point(1, 2), Account(5, 'bob'), Color.GREEN, math.pi, MyInt(3),
          Celsius(2.5), True, 4, 'hi', [1, 2], (1, 2, 3), {'k': 1, 'z': 2}, {Color.RED: 9}, 1.5]
out = [describe(v) for v in values]

def command(text):
    match text.split():
        case ['go', direction]:
            return direction
        case ['quit' | 'exit']:
            return 'bye'
        case ['drop', *objects] if objects:
            return objects
        case _:
            return '?'

out.append([command(t) for t in ('go north', 'exit', 'drop a b', 'drop', 'x y z')])

def first_of(v):
    global first_seen
    match v:
        case [first_seen, *_]:
            pass
    return first_seen

class Settings:
    match 3:
        case int(level) if level > 1:
            verbose = level

match out:
    case [tuple() as head, *_]:
        match head:
            case ('circle', radius):
                nested = radius
out.append((first_of([7, 8]), Settings.verbose, Settings.level, nested))
"""


def test_ordinary_patterns_give_what_cpython_gives() -> None:
    source = textwrap.dedent(_DEFINITIONS)
    plain: dict[str, Any] = {"__name__": "plain"}
    exec(compile(source, "<plain>", "exec", dont_inherit=True), plain)  # noqa: S102 - the reference run, our own source
    assert run(source)["out"] == plain["out"]


def _plain(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "plain"}
    exec(compile(textwrap.dedent(source), "<plain>", "exec", dont_inherit=True), namespace)  # noqa: S102 - our own source
    return namespace


def test_names_of_cases_after_the_matching_one_are_never_evaluated() -> None:
    # As in CPython (this test asserted the opposite while the rewrite evaluated every dotted name of the
    # statement before it): a case's names are looked up when that case is tried, so one that does not
    # exist, after the case that matched, is never looked up.
    code = """
    import enum
    class Color(enum.Enum):
        RED = 1
    match Color.RED:
        case Color.RED:
            hit = 'red'
        case Color.PURPLE:
            hit = 'purple'
        case Undefined(x):
            hit = x
        case {Color.MAUVE: v}:
            hit = v
    """
    assert run(code)["hit"] == _plain(code)["hit"] == "red"


@pytest.mark.parametrize(
    ("case", "exc_type", "fragment"),
    [
        pytest.param("case Color.PURPLE:", AttributeError, "PURPLE", id="dotted-value"),
        pytest.param("case Undefined(x):", NameError, "'Undefined'", id="class"),
        pytest.param("case Color.Shade():", AttributeError, "Shade", id="dotted-class"),
    ],
)
def test_a_case_that_is_tried_evaluates_its_names(case: str, exc_type: type[BaseException], fragment: str) -> None:
    code = f"""
    import enum
    class Color(enum.Enum):
        RED = 1
        GREEN = 2
    match Color.GREEN:
        case Color.RED:
            hit = 'red'
        {case}
            hit = 'tried'
        case Color.GREEN:
            hit = 'green'
    """
    for execute in (run, _plain):
        with pytest.raises(exc_type, match=fragment):
            execute(code)


_ORDER = """
from dataclasses import dataclass

seen = []

@dataclass
class A:
    v: int

class B(A):
    pass

class Names:
    @property
    def A(self):
        seen.append('A')
        return A

    @property
    def B(self):
        seen.append('B')
        return B

    @property
    def ONE(self):
        seen.append('ONE')
        return 1

    @property
    def TWO(self):
        seen.append('TWO')
        return 2

names = Names()

def subject(value):
    seen.append('subject')
    return value

def guard(label):
    seen.append(label)
    return False

def classify(value):
    match subject(value):
        case names.A(1) if guard('guard A'):
            return 'never'
        case 0 | 'zero':
            return 'zero'
        case names.B(v) if guard('guard B') or v > 1:
            return ('b', v)
        case names.ONE:
            return 'one'
        case [1, 2] | {'k': 3}:
            return 'items'
        case names.A(v):
            return ('a', v)
        case _:
            return None

out = []
for value in (A(1), 0, B(5), B(1), 1, [1, 2], A(3), 'x'):
    del seen[:]
    out.append((classify(value), list(seen)))
"""


def test_names_are_evaluated_when_their_case_is_tried_in_order() -> None:
    # The subject first, then each case's name just before the case is tried, after the guards of the cases
    # before it: the order CPython gives, name for name, for every subject.
    plain = _plain(_ORDER)["out"]
    assert run(_ORDER)["out"] == plain
    assert plain[2] == (("b", 5), ["subject", "A", "B", "guard B"])
    assert plain[3] == (("a", 1), ["subject", "A", "guard A", "B", "guard B", "ONE", "A"])
    assert plain[5] == ("items", ["subject", "A", "B", "ONE"])


def test_the_names_of_a_case_are_all_evaluated_before_its_pattern_is_tried() -> None:
    # What is left of the difference from CPython: within one case, every class and dotted name is evaluated,
    # in the order the pattern names them, before the pattern is tried; CPython reads each when the match
    # reaches it (not past a class that did not match, a subject that is no sequence or mapping).
    pattern = "names.A(names.ONE) | [names.TWO] | {names.ONE: _}"
    code = _ORDER.split("def classify")[0] + f"match subject(5):\n    case {pattern}:\n        pass\n"
    assert _plain(code)["seen"] == ["subject", "A"]
    assert run(code)["seen"] == ["subject", "A", "ONE", "TWO", "ONE"]


@pytest.mark.parametrize(
    ("case", "fragment"),
    [
        pytest.param("case object(sys=s):", "attribute 'sys' is module 'sys'", id="class-keyword"),
        pytest.param("case dataclasses.sys:", "attribute 'sys' is module 'sys'", id="dotted-value"),
        pytest.param("case {dataclasses.sys: s}:", "attribute 'sys' is module 'sys'", id="mapping-key"),
        pytest.param("case Any(s):", "attribute 'sys' is module 'sys'", id="metaclass-instancecheck"),
        pytest.param("case str(format=s):", "cannot read 'format'", id="str-format"),
    ],
)
def test_a_refused_read_in_a_later_case_is_refused_when_that_case_is_tried(case: str, fragment: str) -> None:
    subject = "'{0.__class__}'" if "str(" in case else "dataclasses"
    code = (
        f"{_ANY}Any = M('Any', (), {{'__match_args__': ('sys',)}})\nimport dataclasses\nseen = []\n"
        f"try:\n    match {subject}:\n        case 1 | [_, _]:\n            pass\n"
        f"        case int() | list():\n            pass\n        {case}\n            seen.append(s)\n"
        "except AttributeError as exc:\n    error = str(exc)\n"
    )
    namespace = run(code)
    assert fragment in namespace["error"]
    assert "s" not in namespace
    assert namespace["seen"] == []


_REBIND = """
import dataclasses

class Target:
    pass

def switch(value):
    global Target
    Target = value
    return False

errors = []
for replacement in (dataclasses, M('Any', (), {'__match_args__': ('sys',)})):
    Target = type(int)('Target', (), {})
    try:
        match dataclasses:
            case object() if switch(replacement):
                pass
            case Target(s):
                got = s
            case Target.sys:
                got = 'value'
    except (AttributeError, TypeError) as exc:
        errors.append(type(exc).__name__ + ': ' + str(exc))
"""


def test_a_name_rebound_between_cases_is_read_through_the_guards_when_its_case_is_tried() -> None:
    # A guard of an earlier case rebinds the class name of a later one: to a module (the class pattern is
    # then no class: CPython's own TypeError, nothing read), and to a class whose metaclass says yes to the
    # module and names 'sys' in __match_args__ (the read is refused). Evaluating late gives the code no
    # window: the later case's names are evaluated through the guards after the rebinding.
    namespace = run(_ANY + _REBIND)
    assert "got" not in namespace and "s" not in namespace
    assert len(namespace["errors"]) == 2
    assert namespace["errors"][0].startswith("TypeError: called match pattern must be a ")
    assert namespace["errors"][1].startswith("AttributeError: attribute 'sys' is module 'sys'")


def test_a_long_statement_compiles_flat() -> None:
    # One part per case with names, each after the one before it, not inside it: 400 class patterns
    # compile (the source's nesting limit is 100 levels; nested parts would pass the compiler's).
    cases = "".join(f"    case C{i}(v):\n        hit = (v, {i})\n" for i in range(400))
    classes = "".join(f"@dataclass\nclass C{i}:\n    v: int\n" for i in range(400))
    code = f"from dataclasses import dataclass\n{classes}match C399(7):\n{cases}"
    assert run(code)["hit"] == _plain(code)["hit"] == (7, 399)
