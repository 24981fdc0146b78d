"""The in-sandbox guards, exercised in-process: code compiled by the policy, run in restricted_globals.

Every hostile snippet must raise (at compile time or at run time); benign code must work. The
out-of-process hostile suite (both backends, policy on and off) lives in test_hostile.py.
"""

from __future__ import annotations

import asyncio
import builtins
import marshal
import math
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from codeact.sandbox.policy import DEFAULT_IMPORTS, CompileFailure, Policy, compile_code
from codeact.sandbox.runtime.guards import (
    ATTRIBUTE_GETTERS,
    attribute_getter_name,
    plain_globals,
    restricted_globals,
)


def run(
    source: str, *, allowed: frozenset[str] = DEFAULT_IMPORTS, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    source = textwrap.dedent(source)
    compiled = compile_code(source, policy=Policy(allowed_imports=allowed))
    namespace = restricted_globals(allowed_imports=allowed)
    namespace.update(extra or {})
    code = marshal.loads(compiled.code)

    async def main() -> None:
        result = eval(code, namespace)  # noqa: S307 - the code object under test
        if compiled.is_async:
            await result

    asyncio.run(main())
    return namespace


ALLOWED_NAMES = ", ".join(sorted(DEFAULT_IMPORTS))

# (id, code, exception type, message fragment)
# Classes of a metaclass whose == is always true and whose hash is that of {}: they must not pass for it.
_CLAIMS = (
    "import json, math\nclass M(type(int)):\n    def __hash__(cls):\n        return hash({})\n"
    "    def __eq__(cls, other):\n        return True\nBase = M('Base', (), {{}})\nclass Mine(Base):\n    pass\n"
)

HOSTILE_RUNTIME = [
    pytest.param(
        "import math\nclass M(type(math)):\n    pass\nclass Box:\n    pass\nb = Box()\nb.thing = 1\nb.thing\n"
        "b.thing = M('os')\nb.thing",
        AttributeError, "module 'os', which is not allowed", id="module-subclass-on-a-known-name",
    ),
    pytest.param('getattr((), "__class__")', AttributeError, "attribute '__class__' is not allowed in sandboxed code",
                 id="getattr-class"),
    pytest.param('getattr(getattr(type, "__subclasses__"), "x")', AttributeError, "'__subclasses__' is not allowed",
                 id="getattr-subclasses"),
    pytest.param('getattr(object, "__subclasses__")()', AttributeError, "'__subclasses__'", id="object-subclasses"),
    pytest.param("def g():\n    yield 1\ngetattr(g(), 'gi_frame')", AttributeError, "'gi_frame' is not allowed",
                 id="generator-frame"),
    pytest.param("def g():\n    yield 1\ngetattr(g(), 'gi_code')", AttributeError, "'gi_code'", id="generator-code"),
    pytest.param("async def c():\n    pass\nco = c()\ntry:\n    getattr(co, 'cr_frame')\nfinally:\n    co.close()",
                 AttributeError, "'cr_frame' is not allowed", id="coroutine-frame"),
    pytest.param("async def a():\n    yield 1\ngetattr(a(), 'ag_frame')", AttributeError, "'ag_frame'",
                 id="async-generator-frame"),
    pytest.param("try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    getattr(e, '__traceback__')",
                 AttributeError, "'__traceback__'", id="traceback"),
    pytest.param("'{0.__class__}'.format(1)", AttributeError, "'__class__' is not allowed", id="str-format-attr"),
    pytest.param("'{0.__init__.__globals__}'.format(object())", AttributeError, "'__globals__' is not allowed",
                 id="str-format-globals"),
    pytest.param("'{x.__class__}'.format_map({'x': 1})", AttributeError, "'__class__'", id="str-format-map"),
    pytest.param("str.format('{0.__class__}', 1)", AttributeError, "'__class__'", id="str-format-unbound"),
    pytest.param("f = '{0.__class__}'.format\nf(1)", AttributeError, "'__class__'", id="str-format-bound-later"),
    pytest.param("'{0:{1.__class__}}'.format(1, 2)", AttributeError, "'__class__'", id="str-format-nested-spec"),
    pytest.param("class S(str):\n    pass\nsuper(S, S('{0.__class__}')).format(1)", AttributeError, "'__class__'",
                 id="str-format-via-super"),
    pytest.param("import dataclasses\ndataclasses.sys.modules", AttributeError,
                 "attribute 'sys' is module 'sys', which is not allowed in sandboxed code", id="dataclasses-sys"),
    pytest.param("import typing\ntyping.sys", AttributeError, "module 'sys'", id="typing-sys"),
    pytest.param("import uuid\nuuid.os.system('id')", AttributeError, "module 'os'", id="uuid-os"),
    pytest.param("import base64\nbase64.binascii", AttributeError, "module 'binascii'", id="base64-binascii"),
    pytest.param("import enum\nenum.bltns.open", AttributeError, "module 'builtins'", id="enum-builtins"),
    pytest.param("import asyncio\nasyncio.subprocess", AttributeError, "module 'asyncio.subprocess'",
                 id="asyncio-subprocess-module"),
    pytest.param("import asyncio\ngetattr(asyncio, 'create_subprocess_exec')", AttributeError,
                 "'create_subprocess_exec' is not allowed", id="asyncio-create-subprocess"),
    pytest.param("import asyncio\nasync def f():\n    return getattr(asyncio.get_running_loop(), 'subprocess_exec')"
                 "\nawait f()", AttributeError, "'subprocess_exec' is not allowed", id="loop-subprocess-exec"),
    pytest.param("import asyncio\ngetattr(asyncio.get_running_loop(), 'run_in_executor')", AttributeError,
                 "'run_in_executor'", id="loop-run-in-executor"),
    pytest.param("import asyncio\ngetattr(asyncio.current_task(), 'get_coro')", AttributeError, "'get_coro'",
                 id="task-get-coro"),
    pytest.param("import dataclasses\ntry:\n    dataclasses.nope\nexcept AttributeError as e:\n    m = e.obj\nm.sys",
                 AttributeError, "module 'sys'", id="attribute-error-obj"),
    pytest.param("import os", ImportError,
                 f"import of 'os' is not allowed in sandboxed code (allowed: {ALLOWED_NAMES})", id="import-os"),
    pytest.param("import sys", ImportError, "import of 'sys' is not allowed", id="import-sys"),
    pytest.param("import subprocess", ImportError, "'subprocess'", id="import-subprocess"),
    pytest.param("import socket", ImportError, "'socket'", id="import-socket"),
    pytest.param("import ctypes", ImportError, "'ctypes'", id="import-ctypes"),
    pytest.param("import importlib", ImportError, "'importlib'", id="import-importlib"),
    pytest.param("from builtins import open", ImportError, "'builtins'", id="from-builtins"),
    pytest.param("import io", ImportError, "'io'", id="import-io"),
    pytest.param("import pickle", ImportError, "'pickle'", id="import-pickle"),
    pytest.param("import gc", ImportError, "'gc'", id="import-gc"),
    pytest.param("import inspect", ImportError, "'inspect'", id="import-inspect"),
    pytest.param("import os.path", ImportError, "'os.path'", id="import-os-path"),
    pytest.param("import asyncio.subprocess", ImportError, "import of 'asyncio.subprocess' is not allowed",
                 id="import-asyncio-subprocess"),
    pytest.param("from asyncio import subprocess", ImportError, "'asyncio.subprocess'", id="from-asyncio-subprocess"),
    pytest.param("from asyncio import base_events", ImportError, "'asyncio.base_events'", id="from-asyncio-submodule"),
    pytest.param("from dataclasses import sys", ImportError, "import of 'sys' is not allowed",
                 id="from-dataclasses-sys"),
    pytest.param("from typing import get_type_hints", ImportError, "cannot import name 'get_type_hints'",
                 id="from-typing-get-type-hints"),
    pytest.param("from operator import attrgetter", ImportError, "'attrgetter'", id="from-operator-attrgetter"),
    pytest.param("from string import Formatter", ImportError, "'Formatter'", id="from-string-formatter"),
    pytest.param("from functools import singledispatch", ImportError, "'singledispatch'", id="from-singledispatch"),
    pytest.param("import json.tool", ImportError, "'json.tool'", id="import-json-tool"),
    pytest.param("from json import tool", ImportError, "'json.tool'", id="from-json-tool"),
    pytest.param("f = eval\nf('1')", NameError, "eval() is not allowed in sandboxed code", id="eval-alias"),
    pytest.param("compile('1', '', 'eval')", NameError, "compile() is not allowed in sandboxed code", id="compile"),
    pytest.param("open('/etc/passwd')", PermissionError, "may only read files in its working directory", id="open"),
    pytest.param("open('../x.txt')", PermissionError, "may only read files in its working directory", id="open-up"),
    pytest.param("open('x.txt', 'w')", PermissionError, "may only read files (mode 'r' or 'rb')", id="open-write"),
    pytest.param("open(0)", TypeError, "takes a file name (str), not int", id="open-fd"),
    pytest.param("globals()", NameError, "globals() is not allowed", id="globals"),
    pytest.param("locals()", NameError, "locals() is not allowed", id="locals"),
    pytest.param("vars(1)", NameError, "vars() is not allowed", id="vars"),
    pytest.param("input()", NameError, "input() is not allowed", id="input"),
    pytest.param("memoryview(b'x')", NameError, "memoryview() is not allowed", id="memoryview"),
    pytest.param("type('X', (), {})", TypeError, "type() with three arguments (creating a class) is not allowed",
                 id="type-three-args"),
    pytest.param("import json\njson.dumps = None", AttributeError,
                 "cannot set or delete attribute 'dumps' of module 'json' in sandboxed code", id="write-module"),
    pytest.param("import json\nsetattr(json, 'dumps', None)", AttributeError, "module 'json'", id="setattr-module"),
    pytest.param("import json\ndel json.dumps", AttributeError, "module 'json'", id="delete-module-attribute"),
    pytest.param("import json\njson.JSONEncoder.default = None", AttributeError, "class 'JSONEncoder'",
                 id="write-stdlib-class"),
    pytest.param("import datetime\ndatetime.datetime.now = None", AttributeError, "class 'datetime'",
                 id="write-builtin-class"),
    pytest.param("import functools\np = functools.partial(print)\np.func = None", AttributeError, "'partial' object",
                 id="write-stdlib-object"),
    pytest.param("setattr(1, '__class__', str)", AttributeError, "'__class__' is not allowed", id="setattr-dunder"),
    pytest.param("class A:\n    pass\ngetattr(A.__init__, '__globals__')", AttributeError, "'__globals__'",
                 id="function-globals"),
    pytest.param("getattr(print, '__self__')", AttributeError, "'__self__'", id="builtin-self"),
    # a metaclass whose == is always true and whose hash is a stdlib class's: ownership is by identity
    pytest.param(_CLAIMS.format("type(math)") + "math.pi = 3", AttributeError,
                 "cannot set or delete attribute 'pi' of module 'math'", id="metaclass-eq-claims-modules"),
    pytest.param(_CLAIMS.format("json.JSONEncoder") + "json.JSONEncoder.default = None", AttributeError,
                 "of class 'JSONEncoder'", id="metaclass-eq-claims-a-stdlib-class"),
    pytest.param(_CLAIMS.format("json.JSONDecoder") + "json.JSONDecoder()._x", AttributeError,
                 "attribute '_x' is not allowed", id="metaclass-eq-claims-private-names"),
    # `obj.x` reads through a getter of its own (guards.attribute_getter_name): the value is checked whatever
    # the object, its class or the name; a module can sit under any public name of any object
    pytest.param("import functools, dataclasses\nclass Box:\n    pass\nb = Box()\n"
                 "functools.update_wrapper(b, dataclasses)\nb.sys", AttributeError, "attribute 'sys' is module 'sys'",
                 id="getter-module-copied-onto-an-owned-object"),
    pytest.param("import functools, dataclasses\nclass Box:\n    pass\nb = Box()\n"
                 "functools.update_wrapper(b, dataclasses)\nfor _ in range(3):\n    b.field\nb.sys",
                 AttributeError, "module 'sys'", id="getter-after-warm-reads"),
    pytest.param("import dataclasses\nclass P:\n    @property\n    def sys(self):\n        return 1\n"
                 "P().sys\ndataclasses.sys", AttributeError, "module 'sys'", id="getter-shared-by-property-and-module"),
    pytest.param("import dataclasses\nclass P:\n    pass\nfor obj in (P(), dataclasses):\n    try:\n        obj.sys\n"
                 "    except AttributeError as e:\n        last = e\nraise last", AttributeError, "module 'sys'",
                 id="getter-polymorphic-site"),
    pytest.param("import dataclasses\ndef fwd(self, name):\n    return getattr(dataclasses, name)\n"
                 "Fwd = type(int)('Fwd', (), {'__getattr__': fwd})\nFwd().field\nFwd().sys", AttributeError,
                 "module 'sys'", id="getter-through-dunder-getattr"),
    pytest.param(_CLAIMS.format("type(math)") + "class Holder:\n    pass\nh = Holder()\nh.m = Mine()\nh.m\n"
                 "import dataclasses\ndataclasses.sys", AttributeError, "module 'sys'",
                 id="getter-after-claiming-metaclass"),
    pytest.param("import dataclasses\ndef g():\n    return dataclasses.sys\ng()", AttributeError, "module 'sys'",
                 id="getter-in-a-function"),
    pytest.param("import dataclasses\nclass C:\n    s = dataclasses.sys", AttributeError, "module 'sys'",
                 id="getter-in-a-class-body"),
    pytest.param("import dataclasses\n[m.sys for m in [dataclasses]]", AttributeError, "module 'sys'",
                 id="getter-in-a-comprehension"),
    # a class body looks its guards up in its own namespace first: a metaclass's __prepare__ may not answer them
    pytest.param("import math\ndef ident(o):\n    return o\nclass Evil(dict):\n    def __getitem__(self, k):\n"
                 "        if k == '_write_':\n            return ident\n        raise KeyError(k)\n"
                 "def prep(mcs, name, bases, **kw):\n    return Evil()\nM = type(int)\n"
                 "M2 = M('M2', (M,), {'__prepare__': classmethod(prep)})\nBase = M2('Base', (), {})\n"
                 "class C(Base):\n    math.pi = 3", TypeError, "needs a plain dict as a class namespace",
                 id="prepare-mapping-answers-guard-names"),
    pytest.param("import collections, math\ndef ident(o):\n    return o\n"
                 "def prep(mcs, name, bases, **kw):\n    return collections.defaultdict(lambda: ident)\nM = type(int)\n"
                 "M2 = M('M2', (M,), {'__prepare__': classmethod(prep)})\nBase = M2('Base', (), {})\n"
                 "class C(Base):\n    math.pi = 3", TypeError, "'defaultdict'", id="prepare-defaultdict"),
]  # fmt: skip

HOSTILE_COMPILE = [
    pytest.param("().__class__.__bases__[0].__subclasses__()", '"__class__" is not allowed', id="class-bases"),
    pytest.param("x = [].__class__", '"__class__"', id="list-class"),
    pytest.param("type.__subclasses__(object)", '"__subclasses__"', id="type-subclasses"),
    pytest.param("def g():\n    yield 1\ng().gi_frame.f_back.f_globals", '"gi_frame" is not allowed', id="gi-frame"),
    pytest.param("import asyncio\nasyncio.create_subprocess_exec('ls')", '"create_subprocess_exec" is not allowed',
                 id="create-subprocess-exec"),
    pytest.param("import asyncio\nasyncio.get_running_loop().subprocess_shell('id')", '"subprocess_shell"',
                 id="subprocess-shell"),
    pytest.param("import asyncio\nasyncio.open_connection('127.0.0.1', 80)", '"open_connection"', id="open-connection"),
    pytest.param("import asyncio\nasyncio.all_tasks()", '"all_tasks"', id="all-tasks"),
    pytest.param("import asyncio\nasyncio.to_thread(print)", '"to_thread"', id="to-thread"),
    pytest.param("__import__('os')", '"__import__"', id="dunder-import"),
    pytest.param("eval('1')", "eval() is not allowed in sandboxed code", id="eval"),
    pytest.param("exec('x = 1')", "exec() is not allowed in sandboxed code", id="exec"),
    pytest.param("import operator\noperator.attrgetter('__class__')(1)", '"attrgetter"', id="attrgetter"),
    pytest.param("import operator\noperator.methodcaller('format')", '"methodcaller"', id="methodcaller"),
    pytest.param("import typing\ntyping.get_type_hints(int)", '"get_type_hints"', id="get-type-hints"),
    pytest.param("import functools\nfunctools.singledispatch(print)", '"singledispatch"', id="singledispatch"),
    pytest.param("import string\nstring.Formatter().format('{0.__class__}', 1)", '"Formatter"', id="formatter"),
    pytest.param("import dataclasses\ndataclasses.make_dataclass('X', [], namespace={})", '"make_dataclass"',
                 id="make-dataclass"),
    pytest.param("import uuid\nuuid.uuid1()", '"uuid1"', id="uuid1"),
    pytest.param("import json\njson.__dict__", '"__dict__"', id="module-dict"),
    pytest.param("class A:\n    def __getattribute__(self, name):\n        return 1", '"__getattribute__"',
                 id="define-getattribute"),
    pytest.param("class A:\n    __slots__ = ()", '"__slots__"', id="class-dunder-name"),
    pytest.param("class A(metaclass=type):\n    pass", 'the keyword argument "metaclass" is not allowed',
                 id="metaclass"),
    pytest.param("try:\n    pass\nexcept* ValueError as __e:\n    pass", '"__e"', id="except-star-name"),
    pytest.param("match 1:\n    case int(gi_frame=r):\n        pass", '"gi_frame"', id="match-class-attribute"),
    pytest.param("match 1:\n    case str(__class__=c):\n        pass", '"__class__"', id="match-class-dunder"),
    pytest.param("match 1:\n    case x.__class__:\n        pass", '"__class__"', id="match-value-dunder"),
    pytest.param("match 1:\n    case {**_getattr_}:\n        pass", '"_getattr_"', id="match-mapping-rest"),
    pytest.param("def f():\n    from math import *", "import * only allowed at module level", id="star-in-function"),
    pytest.param("_getattr_ = getattr", '"_getattr_"', id="rebind-guard"),
    pytest.param("import json as _j_", '"_j_"', id="import-as-underscore"),
    pytest.param("x = 1\nx.__class__ = int", '"__class__"', id="store-dunder"),
    pytest.param("class A:\n    pass\nA.__name__ = 'B'", '"__name__"', id="store-allowed-dunder"),
    pytest.param("o = object()\no.__init__ += 1", '"__init__"', id="augassign-dunder"),
    pytest.param("print.__self__", '"__self__"', id="builtin-self"),
    pytest.param("getattr(__builtins__, 'open')", '"__builtins__"', id="builtins-name"),
    pytest.param("breakpoint()", '"breakpoint" is a reserved name', id="breakpoint"),
    pytest.param("import builtins", '"builtins" is a reserved name', id="import-builtins"),
]  # fmt: skip


@pytest.mark.parametrize(("code", "exc_type", "fragment"), HOSTILE_RUNTIME)
def test_hostile_code_raises_at_run_time(code: str, exc_type: type[BaseException], fragment: str) -> None:
    with pytest.raises(exc_type) as info:
        run(code)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("code", "fragment"), HOSTILE_COMPILE)
def test_hostile_code_is_rejected_at_compile_time(code: str, fragment: str) -> None:
    with pytest.raises(CompileFailure) as info:
        compile_code(code, policy=Policy())
    assert info.value.type == "PolicyViolation"
    assert fragment in info.value.message


BENIGN = [
    pytest.param(
        """
        class Point:
            def __init__(self, x, y):
                self.x = x
                self.y = y
            def __repr__(self):
                return f"Point({self.x}, {self.y})"
            def __eq__(self, other):
                return (self.x, self.y) == (other.x, other.y)
        p = Point(1, 2)
        p.x += 10
        result = (repr(p), p == Point(11, 2), type(p).__name__)
        """,
        ("Point(11, 2)", True, "Point"),
        id="class",
    ),
    pytest.param(
        """
        class Base:
            count = 0
            def __init__(self, a):
                self.a = a
        class Child(Base):
            def __init__(self, a, b):
                super().__init__(a)
                self.b = b
        Child.count = Child.count + 1
        c = Child(1, 2)
        del c.b
        result = (c.a, hasattr(c, "b"), Child.count, isinstance(c, Base), issubclass(Child, Base))
        """,
        (1, False, 1, True, True),
        id="inheritance-super",
    ),
    pytest.param(
        """
        def counter():
            n = 0
            def inc():
                nonlocal n
                n += 1
                return n
            return inc
        c = counter()
        c(); c()
        result = c()
        """,
        3,
        id="closure-nonlocal",
    ),
    pytest.param(
        """
        data = {"a": [1, 2], "b": [3]}
        result = (
            [x * 2 for xs in data.values() for x in xs if x > 1],
            {k: len(v) for k, v in data.items()},
            {x % 2 for x in range(5)},
            sum(x for x in range(4)),
            sorted(data, key=lambda k: -len(data[k])),
        )
        """,
        ([4, 6], {"a": 2, "b": 1}, {0, 1}, 6, ["a", "b"]),
        id="comprehensions",
    ),
    pytest.param(
        """
        import asyncio
        async def double(x):
            await asyncio.sleep(0)
            return x * 2
        async def agen(n):
            for i in range(n):
                yield i
        class Ctx:
            async def __aenter__(self):
                return "entered"
            async def __aexit__(self, *exc):
                return False
        async with Ctx() as entered:
            pass
        collected = [x async for x in agen(3)]
        async for item in agen(1):
            collected.append(item)
        gathered = await asyncio.gather(double(1), double(2))
        async with asyncio.timeout(5):
            one = await double(21)
        result = (entered, collected, gathered, one)
        """,
        ("entered", [0, 1, 2, 0], [2, 4], 42),
        id="async",
    ),
    pytest.param(
        """
        import dataclasses
        @dataclasses.dataclass(frozen=True)
        class Item:
            name: str
            qty: int = 1
            tags: list = dataclasses.field(default_factory=list)
            def __post_init__(self):
                if self.qty < 0:
                    raise ValueError("qty")
        item = Item("a", 2)
        result = (dataclasses.asdict(item), dataclasses.replace(item, qty=3).qty, item.name)
        """,
        ({"name": "a", "qty": 2, "tags": []}, 3, "a"),
        id="dataclass",
    ),
    pytest.param(
        """
        import json, datetime, decimal, re, math, statistics, itertools, functools, heapq, collections
        when = datetime.datetime(2024, 1, 2, 3, 4, tzinfo=datetime.timezone.utc)
        counts = collections.Counter("abca")
        grouped = collections.defaultdict(list)
        for key, value in [("a", 1), ("b", 2), ("a", 3)]:
            grouped[key].append(value)
        grouped["c"] += [9]
        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)
        result = (
            json.loads(json.dumps({"k": [1, 2]})),
            when.isoformat(),
            (when + datetime.timedelta(days=1)).day,
            str(decimal.Decimal("1.10") + decimal.Decimal("2")),
            re.compile(r"(\\d+)").findall("a1b22"),
            math.sqrt(16),
            statistics.mean([1, 2, 3]),
            list(itertools.chain([1], [2])),
            heapq.nsmallest(2, [3, 1, 2]),
            counts.most_common(1),
            dict(grouped),
            fib(20),
        )
        """,
        (
            {"k": [1, 2]},
            "2024-01-02T03:04:00+00:00",
            3,
            "3.10",
            ["1", "22"],
            4.0,
            2,
            [1, 2],
            [1, 2],
            [("a", 2)],
            {"a": [1, 3], "b": [2], "c": [9]},
            6765,
        ),
        id="stdlib",
    ),
    pytest.param(
        """
        name, n = "x", 3.14159
        d = {"k": [10, 20]}
        result = (
            f"{name!r}:{n:.2f}:{d['k'][1]}",
            "{} {:.1f} {name}".format(1, 2.25, name="z"),
            "{0[k]}".format(d),
            "{a}-{b}".format_map({"a": 1, "b": 2}),
            str.format("{}!", 5),
            "%s=%d" % ("a", 1),
            format(255, "x"),
        )
        """,
        ("'x':3.14:20", "1 2.2 z", "[10, 20]", "1-2", "5!", "a=1", "ff"),
        id="strings",
    ),
    pytest.param(
        """
        import enum, typing
        class Color(enum.Enum):
            RED = 1
            GREEN = enum.auto()
        class Pair(typing.NamedTuple):
            a: int
            b: int = 0
        T = typing.TypeVar("T")
        class Box(typing.Generic[T]):
            def __init__(self, item: T):
                self.item = item
        result = (Color.RED.name, Color(2).name, Pair(1)._asdict(), Box[int](3).item)
        """,
        ("RED", "GREEN", {"a": 1, "b": 0}, 3),
        id="enum-namedtuple-generic",
    ),
    pytest.param(
        """
        class Holder:
            pass
        h = Holder()
        setattr(h, "value", 5)
        items = [1, 2, 3]
        items[0] += 10
        items[1:2] = [7, 8]
        grid = {"a": {"b": 1}}
        grid["a"]["b"] *= 4
        def helper():
            return 1
        helper.calls = 2
        (first, *rest), other = [1, 2, 3], 4
        if (total := sum(items)) > 0:
            pass
        def kw(*args, **kwargs):
            return args, kwargs
        result = (
            getattr(h, "value"), getattr(h, "missing", None), hasattr(h, "__class__"), items, grid, helper.calls,
            first, rest, other, total, kw(*[1, 2], **{"a": 3}), isinstance(int, type), type(1) is int,
            [n for n in dir(h) if n == "value"],
        )
        """,
        (
            5,
            None,
            False,
            [11, 7, 8, 3],
            {"a": {"b": 4}},
            2,
            1,
            [2, 3],
            4,
            29,
            ((1, 2), {"a": 3}),
            True,
            True,
            ["value"],
        ),
        id="writes-and-builtins",
    ),  # fmt: skip
    pytest.param(
        """
        import collections.abc
        from collections import OrderedDict
        from json import decoder
        from collections.abc import Mapping as M
        total: int = 0
        for i in range(3):
            total += i
        try:
            raise KeyError("k")
        except (KeyError, ValueError) as exc:
            caught = type(exc).__name__
        finally:
            done = True
        if __name__ == "__main__":
            main_ran = True
        result = (isinstance({}, collections.abc.Mapping), list(OrderedDict(a=1)), total, caught, done, main_ran,
                  decoder.JSONDecoder().decode("1"), M is collections.abc.Mapping)
        """,
        (True, ["a"], 3, "KeyError", True, True, 1, True),
        id="imports-control-flow",
    ),
]


@pytest.mark.parametrize(("code", "expected"), BENIGN)
def test_benign_code_works(code: str, expected: Any) -> None:
    assert run(code)["result"] == expected


def test_print_writes_to_sys_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    run("print('hello', 1, sep='-')\nprint('second')")
    assert capsys.readouterr().out == "hello-1\nsecond\n"


def test_widened_imports_allow_the_module() -> None:
    namespace = run("import zlib\nresult = zlib.crc32(b'a')", allowed=DEFAULT_IMPORTS | {"zlib"})
    assert namespace["result"] == 3904355907


def test_module_attribute_reachable_when_its_module_is_allowed() -> None:
    namespace = run("import dataclasses\nresult = dataclasses.sys.maxsize > 0", allowed=DEFAULT_IMPORTS | {"sys"})
    assert namespace["result"] is True


def test_relative_import_is_refused() -> None:
    with pytest.raises(ImportError, match="relative imports are not allowed in sandboxed code"):
        run("from . import x")


def test_restricted_namespace_has_no_dangerous_builtins() -> None:
    builtins_ = restricted_globals(allowed_imports=DEFAULT_IMPORTS)["__builtins__"]
    for name in ("eval", "exec", "compile", "breakpoint", "globals", "locals", "vars", "input"):
        with pytest.raises(NameError, match=f"{name}\\(\\) is not allowed in sandboxed code"):
            builtins_[name]()
    assert builtins_["print"] is print
    assert "memoryview" not in {k for k, v in builtins_.items() if v is memoryview}


def test_plain_globals_keep_full_builtins() -> None:
    namespace = plain_globals(allowed_imports=None)
    code = compile("import os\nresult = (type(os).__name__, eval('1 + 1'))", "<code>", "exec")
    exec(code, namespace)  # noqa: S102 - the namespace under test
    assert namespace["result"] == ("module", 2)
    assert namespace["__name__"] == "__main__"


def test_plain_globals_with_an_allow_list_guard_imports_only() -> None:
    namespace = plain_globals(allowed_imports=["json"])
    exec(compile("import json\nresult = eval('json.dumps(1)')", "<code>", "exec"), namespace)  # noqa: S102
    assert namespace["result"] == "1"
    with pytest.raises(ImportError, match="import of 'os' is not allowed in sandboxed code \\(allowed: json\\)"):
        exec(compile("import os", "<code>", "exec"), namespace)  # noqa: S102


def test_each_namespace_owns_only_its_own_classes() -> None:
    first = run("class A:\n    pass\na = A()")
    second = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    second["foreign"] = first["a"]
    compiled = compile_code("foreign.x = 1", policy=Policy())
    with pytest.raises(AttributeError, match="'A' object in sandboxed code"):
        exec(marshal.loads(compiled.code), second)  # noqa: S102


def test_open_reads_a_file_of_the_working_directory(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sales.csv").write_text("region,amount\nnorth,3\nsouth,4\n")
    monkeypatch.chdir(tmp_path)
    namespace = run(
        "import csv\nwith open('sales.csv', newline='') as f:\n"
        "    total = sum(int(row['amount']) for row in csv.DictReader(f))\n"
        "with open('sales.csv', 'rb') as f:\n    raw = f.read()[:6]"
    )
    assert namespace["total"] == 7 and namespace["raw"] == b"region"


@pytest.mark.parametrize(
    "name", ["mro", "gi_frame", "f_globals", "format", "format_map", "open", "compile", "_x", "__class__", "a-b", ""]
)
def test_names_without_a_getter_keep_the_full_guard(name: str) -> None:
    assert attribute_getter_name(name) is None
    namespace = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    with pytest.raises(ValueError, match="no attribute getter"):
        namespace[ATTRIBUTE_GETTERS](name)  # type: ignore[operator]


def test_a_getter_is_bound_again_over_whatever_the_namespace_held() -> None:
    compiled = compile_code("result = holder.value", policy=Policy())
    namespace = restricted_globals(allowed_imports=DEFAULT_IMPORTS)
    namespace["_codeact_attr_value_"] = lambda obj: "forged"
    namespace["holder"] = SimpleNamespace(value=builtins.open)  # a dangerous builtin under a harmless name
    with pytest.raises(AttributeError, match="attribute 'value' is not allowed"):
        exec(marshal.loads(compiled.code), namespace)  # noqa: S102


def test_getters_read_like_getattr() -> None:
    namespace = run(
        "import math\nclass P:\n    pi = 3\n    def __init__(self):\n        self.x = 1\n"
        "    @property\n    def y(self):\n        return self.x + 1\n"
        "def fallback(self, name):\n    return name\nQ = type(int)('Q', (), {'__getattr__': fallback, 'y': 2})\n"
        "p, q = P(), Q()\nresult = [math.pi, P.pi, p.pi, p.x, p.y, q.y, q.zzz, 'a'.upper(), [1].count(1)]\n"
        "p.x = 5\nresult.append(p.y)"
    )
    assert namespace["result"] == [math.pi, 3, 3, 1, 2, 2, "zzz", "A", 1, 6]


def test_getters_are_bound_after_the_docstring_and_future_imports() -> None:
    code = marshal.loads(
        compile_code('"""Doc."""\nfrom __future__ import annotations\nx = (1).real', policy=Policy()).code
    )
    assert code.co_consts[0] == "Doc."
    assert code.co_names.index("__future__") < code.co_names.index(ATTRIBUTE_GETTERS)
