"""Parsing the model's code survives CPython 3.11's "AST constructor recursion depth mismatch".

On 3.11 a finalizer that parses (formatting a traceback does: asyncio's "Task exception was never
retrieved", pytest's unraisable hook) and runs during another parse, at a garbage collection, leaves
the AST converter's per-interpreter depth counter off; the outer parse then raises ``SystemError``
for code that is fine (CPython gh-106905). Here a collection runs at every allocation and an object
in a reference cycle parses in its finalizer: the reentrancy happens on every parse.
"""

from __future__ import annotations

import ast
import gc
import sys
from collections.abc import Callable, Iterator

import pytest

from codeact.sandbox.policy import Policy, compile_code
from codeact.segments import extract_code, parse_python

CODE = "\n".join(f"v{i} = [a + b for a, b in zip(range({i}), range(3))]" for i in range(120))


class _ParsesWhenCollected:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the garbage collector frees it

    def __del__(self) -> None:
        ast.parse("x = (1 + 2) * 3")


@pytest.fixture
def collect_at_every_allocation() -> Iterator[Callable[[], None]]:
    old = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    try:
        yield _ParsesWhenCollected
    finally:
        gc.set_threshold(*old)
        gc.collect()


def _fails_on_this_python(arm: Callable[[], None]) -> bool:
    arm()
    try:
        ast.parse(CODE)
    except SystemError as exc:
        return "recursion depth mismatch" in str(exc)
    return False


def test_parse_python_parses_again_after_the_spurious_error(
    collect_at_every_allocation: Callable[[], None],
) -> None:
    reentrant = _fails_on_this_python(collect_at_every_allocation)
    for _ in range(10):
        collect_at_every_allocation()
        assert len(parse_python(CODE).body) == 120
    # The reply parser and the sandbox's compiler go through it too.
    collect_at_every_allocation()
    assert extract_code(f"Computing.\n\n```python\n{CODE}\n```").code == CODE
    collect_at_every_allocation()
    compiled = compile_code(CODE + "\nprint(v3)", policy=Policy())
    assert compiled.code
    if sys.version_info[:2] == (3, 11):  # the Python this project runs on: the setup does hit the bug
        assert reentrant


def test_other_system_errors_are_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> ast.Module:
        raise SystemError("something else")

    monkeypatch.setattr(ast, "parse", broken)
    with pytest.raises(SystemError, match="something else"):
        parse_python("x = 1")
