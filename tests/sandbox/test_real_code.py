"""Real model code compiles and runs under the policy, with the same guards.

Part 1: the constructs ordinary model code uses (star imports, ``match``, ``except*``, private
names, ``global``/``nonlocal``, decorators, walrus, nested f-strings, ``__main__`` blocks), each run in
the real subprocess sandbox with the policy on, and the guards that still hold around them.
Part 2: the corpus (``real_code_corpus.py``): every snippet prints the same and raises the same in
the sandbox as in plain CPython, except the documented ones, which must still differ.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from codeact.sandbox import Policy, SubprocessSandbox
from tests.sandbox.real_code_corpus import SNIPPETS, Snippet, outcome_key

pytestmark = [pytest.mark.integration]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sandbox() -> AsyncIterator[SubprocessSandbox]:
    box = SubprocessSandbox(policy=Policy())
    try:
        yield box
    finally:
        await box.aclose()


async def _run(box: SubprocessSandbox, code: str) -> Any:
    return await box.execute(code, deadline=20)


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("code", "stdout"),
    [
        pytest.param("from math import *\nprint(sqrt(16), floor(pi))", "4.0 3\n", id="star-import"),
        pytest.param(
            "from collections import *\nc = Counter('abca')\nprint(c.most_common(1), OrderedDict(a=1))",
            "[('a', 2)] OrderedDict([('a', 1)])\n",
            id="star-import-all",
        ),
        pytest.param(
            "def area(shape):\n    match shape:\n        case {'kind': 'circle', 'r': r}:\n"
            "            return 3 * r * r\n        case ('rect', w, h) | ['rect', w, h]:\n            return w * h\n"
            "        case int() | float() as n if n > 0:\n            return n\n"
            "        case _:\n            return None\n"
            "print(area({'kind': 'circle', 'r': 2}), area(('rect', 2, 5)), area(7), area('?'))",
            "12 10 7 None\n",
            id="match-patterns",
        ),
        pytest.param(
            "from dataclasses import dataclass\nfrom enum import Enum\nclass Op(Enum):\n    ADD = '+'\n    MUL = '*'\n"
            "@dataclass\nclass Bin:\n    op: Op\n    left: int\n    right: int\n"
            "def ev(e):\n    match e:\n        case Bin(op=Op.ADD, left=l, right=r):\n            return l + r\n"
            "        case Bin(Op.MUL, l, r):\n            return l * r\n"
            "print(ev(Bin(Op.ADD, 2, 3)), ev(Bin(Op.MUL, 2, 3)))",
            "5 6\n",
            id="match-class-and-value",
        ),
        pytest.param(
            "try:\n    raise ExceptionGroup('many', [ValueError('a'), TypeError('b'), ValueError('c')])\n"
            "except* ValueError as group:\n    print('values', len(group.exceptions))\n"
            "except* TypeError:\n    print('type')",
            "values 2\ntype\n",
            id="except-star",
        ),
        pytest.param(
            "class Account:\n    def __init__(self, owner):\n        self._owner = owner\n        self._balance = 0\n"
            "    def _check(self, amount):\n        if amount <= 0:\n"
            "            raise ValueError('positive amounts only')\n"
            "    def deposit(self, amount):\n        self._check(amount)\n        self._balance += amount\n"
            "        return self._balance\n    @property\n    def owner(self):\n        return self._owner\n"
            "_accounts = {}\ndef _open(name):\n    _accounts[name] = Account(name)\n    return _accounts[name]\n"
            "a = _open('ada')\nprint(a.deposit(5), a.deposit(7), a.owner, a._balance, getattr(a, '_balance'))",
            "5 12 ada 12 12\n",
            id="private-names",
        ),
        pytest.param(
            "count = 0\ndef bump():\n    global count\n    count += 1\ndef counter():\n    n = 0\n    def inc():\n"
            "        nonlocal n\n        n += 1\n        return n\n    return inc\nbump(); bump()\nc = counter(); c()\n"
            "print(count, c())",
            "2 2\n",
            id="global-nonlocal",
        ),
        pytest.param(
            "import functools, time\ndef timed(fn):\n    @functools.wraps(fn)\n    def wrapper(*a, **k):\n"
            "        return fn(*a, **k)\n    return wrapper\n@timed\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n"
            "    return n if n < 2 else fib(n - 1) + fib(n - 2)\nprint(fib(40), fib.__name__)",
            "102334155 fib\n",
            id="decorators",
        ),
        pytest.param(
            "data = [3, 8, 1, 9]\nif (n := len(data)) > 3:\n    print(f'{n} items, max {max(data)}')\n"
            "print([y for x in data if (y := x * 2) > 5])",
            "4 items, max 9\n[6, 16, 18]\n",
            id="walrus",
        ),
        pytest.param(
            "rows = {'a': [1.5, 2.25]}\nw = 8\n"
            "print(f\"{'name':<{w}}|{rows['a'][1]:>{w}.3f}|{', '.join(f'{v:.1f}' for v in rows['a'])}\")",
            "name    |   2.250|1.5, 2.2\n",
            id="nested-f-string",
        ),
        pytest.param(
            "def main():\n    print('main ran')\n    return 0\nif __name__ == '__main__':\n    main()",
            "main ran\n",
            id="main-block",
        ),
    ],
)
async def test_model_constructs_run_in_the_sandbox(sandbox: SubprocessSandbox, code: str, stdout: str) -> None:
    result = await _run(sandbox, code)
    assert result.ok, result.error
    assert result.stdout == stdout


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize(
    ("code", "error_type", "fragment"),
    [
        pytest.param(
            "import random\nrandom.Random()._randbelow(3)", "AttributeError", "'_randbelow'", id="stdlib-private"
        ),
        pytest.param(
            "import random\ngetattr(random.Random(), '_randbelow')(3)",
            "AttributeError",
            "'_randbelow'",
            id="stdlib-private-getattr",
        ),
        pytest.param(
            "import random\nclass R(random.Random):\n    pass\nR()._randbelow(3)",
            "AttributeError",
            "'_randbelow'",
            id="inherited-stdlib-private",
        ),
        pytest.param("import json\njson.decoder._scanner", "AttributeError", "'_scanner'", id="module-private"),
        pytest.param(
            "from html.parser import HTMLParser\nclass P(HTMLParser):\n    pass\nP()._HTMLParser__starttag_text",
            "AttributeError",
            "'_HTMLParser__starttag_text'",
            id="private-set-by-stdlib-base",
        ),
        pytest.param(
            "import json\nsetattr(json, '_x', 1)",
            "AttributeError",
            "only objects of classes defined in the code",
            id="set-private-on-module",
        ),
        pytest.param("from os import *", "ImportError", "import of 'os' is not allowed", id="star-denied-module"),
        pytest.param("from string import *\nFormatter", "NameError", "Formatter", id="star-skips-denied-names"),
    ],
)
async def test_guards_still_hold_around_them(
    sandbox: SubprocessSandbox, code: str, error_type: str, fragment: str
) -> None:
    result = await _run(sandbox, code)
    assert result.status == "error"
    assert result.error is not None
    assert result.error.type == error_type
    assert fragment in result.error.message


# -- the corpus -------------------------------------------------------------------------------------


def _plain_outcomes(snippets: tuple[Snippet, ...]) -> dict[str, dict[str, Any]]:
    """Every snippet in plain CPython (a child interpreter, a fresh namespace each)."""
    runner = (
        "import contextlib, io, json, sys\n"
        "snippets = json.load(sys.stdin)\nout = {}\n"
        "for sid, code in snippets:\n"
        "    buf = io.StringIO()\n"
        "    error = None\n"
        "    try:\n"
        "        with contextlib.redirect_stdout(buf):\n"
        "            exec(compile(code, '<code>', 'exec'), {'__name__': '__main__'})\n"
        "    except BaseException as exc:\n"
        "        error = type(exc).__name__\n"
        "    out[sid] = {'stdout': buf.getvalue(), 'error': error}\n"
        "json.dump(out, sys.stdout)\n"
    )
    with tempfile.TemporaryDirectory(prefix="codeact-corpus-") as scratch:  # snippets may write files
        done = subprocess.run(
            [sys.executable, "-I", "-c", runner],
            input=json.dumps([[s.id, s.code] for s in snippets]),
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
            cwd=scratch,
        )
    outcomes: dict[str, dict[str, Any]] = json.loads(done.stdout)
    return outcomes


@pytest.fixture(scope="module")
def plain() -> dict[str, dict[str, Any]]:
    return _plain_outcomes(SNIPPETS)


def test_corpus_is_large_and_varied() -> None:
    assert len(SNIPPETS) >= 200
    assert len({s.id for s in SNIPPETS}) == len(SNIPPETS)
    assert {s.category for s in SNIPPETS} >= {"maths", "data", "strings", "algorithms", "idioms"}


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("snippet", [pytest.param(s, id=s.id) for s in SNIPPETS])
async def test_corpus_snippet_agrees_with_cpython(
    sandbox: SubprocessSandbox, plain: dict[str, dict[str, Any]], snippet: Snippet
) -> None:
    result = await _run(sandbox, snippet.code)
    expected = plain[snippet.id]
    assert expected["error"] is None or snippet.differs, f"the snippet itself fails in CPython: {expected}"
    got = outcome_key(result.stdout, result.error.type if result.error else None)
    want = outcome_key(expected["stdout"], expected["error"])
    if snippet.differs:
        assert got != want, f"documented as differing ({snippet.differs}) but agrees now: update the corpus"
    else:
        assert got == want, f"sandbox {result.status} {result.error} vs CPython {expected}"
