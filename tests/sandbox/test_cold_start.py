"""A cold start does only what the first result needs; what it skips still works when a round needs it.

Real runtimes and real cgroups. A start imports no ``re``, ``enum``, ``functools``, ``json``, ``base64``,
``threading`` or ``signal`` (the runtime uses their C modules).
The runtime imports asyncio, dataclasses, random, secrets, uuid, datetime,
decimal and fractions only once a round uses them (an event loop, a dataclass, a recording view, a
value of theirs: the codec adds their encoders when they can exist); the runtime's modules
load from bytecode the host wrote (a read-only mount cannot cache it); the child enters its cgroup
through ``/bin/sh`` before anything of the sandbox runs, and never runs when it cannot.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from codeact.sandbox import SubprocessSandbox
from codeact.sandbox._cgroup import SandboxCgroup, cgroup_support
from codeact.sandbox.policy import Policy
from codeact.sandbox.subprocess_sandbox import RUNTIME_DIR

pytestmark = [pytest.mark.integration]

OPEN = Policy(restricted=False, allowed_imports=frozenset(sys.stdlib_module_names))
DEFERRED = ("asyncio", "dataclasses", "random", "secrets", "uuid", "datetime", "decimal", "fractions")
TIMES_AND_NUMBERS = {"datetime", "decimal", "fractions"}
LOADED = "import sys\nloaded = [m for m in " + repr(DEFERRED) + " if m in sys.modules]\n"


class Echo:
    """A bridge with one operation: ``echo.echo(value)`` returns ``value``."""

    def manifest(self) -> dict[str, Any]:
        return {
            "toolkits": {
                "echo": {"description": "echo", "operations": {"echo": {"params": ["value"], "required": ["value"]}}}
            }
        }

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        return params["arguments"]["value"]


@pytest.mark.asyncio
@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_first_round_imports_none_of_the_deferred_modules_and_later_rounds_use_them(isolation: str) -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN, isolation=isolation) as box:
        # a call at module level (an inserted await, run without a loop) and one inside a plain def
        first = await box.execute(LOADED + "def f(v):\n    return echo.echo(v)\nn = echo.echo(40) + f(1) + 1")
        assert first.ok, first.error
        assert first.variables["loaded"] == []
        assert first.variables["n"] == 42

        gathered = await box.execute("import asyncio\nres = await asyncio.gather(*[echo.echo(i) for i in range(5)])")
        assert gathered.ok, gathered.error
        assert gathered.variables["res"] == [0, 1, 2, 3, 4]

        defined = await box.execute(
            "import dataclasses, uuid, random\n"
            "@dataclasses.dataclass\nclass P:\n    x: int\n"
            "p = P(3)\nu = uuid.UUID(int=7)\nr = random.random()\n" + LOADED
        )
        assert defined.ok, defined.error
        assert defined.variables["p"]["$type"] == "dataclass"
        assert defined.variables["u"] == {"$type": "uuid", "v": "00000000-0000-0000-0000-000000000007"}
        assert defined.nondeterminism is not None and "seed" in defined.nondeterminism
        assert set(defined.variables["loaded"]) == set(DEFERRED) - {"secrets"} - TIMES_AND_NUMBERS  # not yet


START_FREE = (
    "re", "enum", "functools", "threading", "json", "base64", "string", "signal", "socket", "collections", "operator",
    "math",
)  # fmt: skip
"""Python modules whose import (re's, mostly) a start skipped: the runtime uses their C halves or imports them late."""


@pytest.mark.asyncio
@pytest.mark.parametrize("isolation", ["bwrap", "process"])
async def test_a_start_imports_neither_re_nor_json_nor_threading_and_rounds_that_need_them_still_work(
    isolation: str,
) -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN, isolation=isolation) as box:
        first = await box.execute(
            "import gc, sys\nloaded = [m for m in " + repr(START_FREE) + " if m in sys.modules]\n"
            "n = echo.echo(41) + 1\ncollecting = gc.isenabled()"
        )
        assert first.ok, first.error
        assert first.variables["loaded"] == []
        assert first.variables["collecting"] is True  # off while the runtime started, on before the code runs
        assert first.variables["n"] == 42

        later = await box.execute(
            "import enum, collections\n"
            "class Color(enum.Enum):\n    RED = 1\n"
            "c = Color.RED\nb = bytes(range(3))\nd = collections.deque([1])\n"
            "s = '{0.real}-{1[k]}'.format(2, {'k': 'v'})\n"
            "o = object()\nkeys = {(1, 2): 'pair'}\nback = echo.echo(b)\n"
        )
        assert later.ok, later.error
        assert later.variables["c"] == {"$type": "enum", "v": 1, "class": "Color", "name": "RED"}
        assert later.variables["b"] == {"$type": "bytes", "v": "AAEC"}
        assert later.variables["back"] == later.variables["b"]
        assert later.variables["d"] == {"$type": "deque", "v": [1]}
        assert later.variables["s"] == "2-v"
        assert later.variables["keys"] == {"$type": "dict", "v": [[{"$type": "tuple", "v": [1, 2]}, "pair"]]}
        assert [u.name for u in later.uncaptured] == ["o"]
        assert later.variables["o"] == "<object object>"  # the repr kept, its address cut

        restored = await box.execute(
            "ok = (c.name, b, list(d), keys) == ('RED', bytes(range(3)), [1], {(1, 2): 'pair'})",
            variables=later.variables,
        )
        assert restored.ok, restored.error
        assert restored.variables["ok"] is True


TIMES = {
    "when": {"$type": "datetime", "v": "2026-01-02T09:30:00+01:00"},
    "day": {"$type": "date", "v": "2026-01-02"},
    "at": {"$type": "time", "v": "09:30:00"},
    "span": {"$type": "timedelta", "v": [1, 2, 3]},
    "price": {"$type": "decimal", "v": "1.10"},
    "third": {"$type": "fraction", "v": [1, 3]},
}


@pytest.mark.asyncio
async def test_datetime_decimal_and_fractions_values_cross_both_ways_though_no_start_imports_them() -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN) as box:
        first = await box.execute(LOADED + "n = echo.echo(1)")
        assert first.ok, first.error
        assert first.variables["loaded"] == []

        # restored into a fresh namespace (decoded by the runtime), then captured again (encoded)
        restored = await box.execute(
            "kinds = [type(v).__name__ for v in (when, day, at, span, price, third)]", variables=TIMES
        )
        assert restored.ok, restored.error
        assert {name: restored.variables[name] for name in TIMES} == TIMES
        assert restored.variables["kinds"] == ["datetime", "date", "time", "timedelta", "Decimal", "Fraction"]

    async with SubprocessSandbox(bridge=Echo(), policy=OPEN) as box:  # made by the code, subclasses too
        made = await box.execute(
            "import datetime, decimal, fractions\n"
            "class D(decimal.Decimal):\n    pass\n"
            "class F(fractions.Fraction):\n    pass\n"
            "class T(datetime.timedelta):\n    pass\n"
            "day = datetime.date(2026, 1, 2)\nd = D('2.5')\nf = F(2, 4)\nt = T(seconds=5)\n"
            "back = echo.echo(day)\n"
        )
        assert made.ok, made.error
        assert made.variables["day"] == made.variables["back"] == {"$type": "date", "v": "2026-01-02"}
        assert made.variables["d"] == {"$type": "decimal", "v": "2.5"}
        assert made.variables["f"] == {"$type": "fraction", "v": [1, 2]}
        assert made.variables["t"] == {"$type": "timedelta", "v": [0, 5, 0]}


_FRESH_CODEC = """
import sys, types
top = sys.modules.setdefault("codeact", types.ModuleType("codeact")); top.__path__ = []
box = sys.modules.setdefault("codeact.sandbox", types.ModuleType("codeact.sandbox")); box.__path__ = []
pkg = types.ModuleType("codeact.sandbox.runtime"); pkg.__path__ = [sys.argv[1]]
sys.modules["codeact.sandbox.runtime"] = pkg
from codeact.sandbox.runtime import codec
LAZY = ("datetime", "_datetime", "decimal", "_decimal", "fractions", "numbers")
def loaded():
    return [m for m in LAZY if m in sys.modules]
assert loaded() == [], loaded()
assert codec.dumps({"a": (1, 2), "b": {3}, "c": 1j, "r": range(3), 1: b"x"}) and loaded() == [], loaded()
assert codec.decode({"$type": "tuple", "v": [1]}) == (1,) and loaded() == [], loaded()
assert codec.python_repr({"$type": "uuid", "v": "u"}) and loaded() == [], loaded()
try:
    codec.decode({"$type": "decimal", "v": "not a number"})
except codec.Undecodable as exc:
    print(exc)
import _decimal  # the C module alone: its values must still encode
print(codec.dumps(_decimal.Decimal("1.5")))
import datetime
class When(datetime.datetime):
    pass
print(codec.dumps([When(2026, 1, 2), datetime.time(9, 30)]))
print(codec.python_repr({"$type": "date", "v": "2026-01-02"}))
print(codec.python_repr({"$type": "timedelta", "v": [0, 1, 0]}))
"""


def test_the_codec_imports_datetime_decimal_and_fractions_only_for_their_values() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _FRESH_CODEC, str(RUNTIME_DIR)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "malformed codec data: InvalidOperation: [<class 'decimal.ConversionSyntax'>]",
        '{"$type":"decimal","v":"1.5"}',
        '[{"$type":"datetime","v":"2026-01-02T00:00:00"},{"$type":"time","v":"09:30:00"}]',
        "datetime.date(2026, 1, 2)",
        "datetime.timedelta(seconds=1)",
    ]


@pytest.mark.asyncio
async def test_the_match_guard_is_imported_by_the_first_class_pattern_and_guards_it() -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=Policy()) as box:  # restricted: the match guard's namespace
        first = await box.execute("n = echo.echo(1) + 1")
        assert first.ok, first.error
        refused = await box.execute(
            "import dataclasses\nmatch dataclasses:\n    case object(sys=object(modules=m)):\n        r = m"
        )
        assert refused.error is not None and refused.error.type == "AttributeError", refused.error
        assert "attribute 'sys' is module 'sys'" in refused.error.message
        matched = await box.execute("match 2.5:\n    case float(real=r) if r > 2:\n        ok = r")
        assert matched.ok, matched.error
        assert matched.variables["ok"] == 2.5


def test_a_fresh_namespace_imports_no_match_guard() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _FRESH_GUARDS, str(RUNTIME_DIR)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


_FRESH_GUARDS = """
import sys, types
top = types.ModuleType("codeact"); top.__path__ = []
sandbox = types.ModuleType("codeact.sandbox"); sandbox.__path__ = []
runtime = types.ModuleType("codeact.sandbox.runtime"); runtime.__path__ = [sys.argv[1]]
sys.modules.update({"codeact": top, "codeact.sandbox": sandbox, "codeact.sandbox.runtime": runtime})
from codeact.sandbox.runtime import guards
ns = guards.restricted_globals(allowed_imports=["math"])
print("codeact.sandbox.runtime._match_guard" in sys.modules)
ns[guards.PATTERN_CLASS](int, 0, ("real",))  # what `case int(real=r)` calls first
print("codeact.sandbox.runtime._match_guard" in sys.modules)
"""


@pytest.mark.asyncio
async def test_a_round_that_awaits_only_toolkit_calls_runs_without_a_loop_and_fails_like_one() -> None:
    async with SubprocessSandbox(bridge=Echo(), policy=OPEN, isolation="process") as box:
        result = await box.execute(
            "a = echo.echo(1)\nb = [echo.echo(i) for i in range(3)]\nraise ValueError(a + sum(b))"
        )
        assert result.status == "error"
        assert result.error is not None and result.error.type == "ValueError" and result.error.message == "4"
        after = await box.execute(LOADED + "c = echo.echo('x')")
        assert (after.variables["c"], after.variables["loaded"]) == ("x", [])


@pytest.mark.asyncio
async def test_runtime_modules_have_bytecode_after_a_start() -> None:
    async with SubprocessSandbox() as box:
        assert (await box.execute("x = 1")).ok
    for source in RUNTIME_DIR.glob("*.py"):
        if source.name == "main.py":  # the launch script: never cached by Python, kept small instead
            continue
        header = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
        assert header[:4] == importlib.util.MAGIC_NUMBER, source.name
        # a timestamp pyc: valid while it records the source's mtime and size (what the runtime checks)
        stat = source.stat()
        assert int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF, source.name
        assert int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF, source.name


@pytest.fixture
def group() -> Any:
    reason = cgroup_support()
    if reason is not None:
        pytest.fail(f"this machine cannot create a sandbox cgroup: {reason}", pytrace=False)
    made = SandboxCgroup.create(pids=16, memory_bytes=256 * 1024 * 1024, cpus=1.0)
    yield made
    made.kill()
    made.remove()


def test_the_command_runs_inside_the_cgroup(group: SandboxCgroup) -> None:
    out = subprocess.run(group.command(["/bin/cat", "/proc/self/cgroup"]), capture_output=True, text=True, check=True)
    assert group.path.name in out.stdout


def test_the_command_never_runs_when_the_cgroup_cannot_be_entered(group: SandboxCgroup) -> None:
    argv = group.command(["/bin/echo", "ran outside its cgroup"])
    group.remove()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 126
    assert "ran outside" not in done.stdout
