"""The real-code corpus (``real_code_corpus.txt``) and its documented exceptions.

Typical model-written Python, stdlib only, across maths, data wrangling, string processing,
algorithms and everyday idioms (classes, decorators, ``match``, ``except*``, star imports,
``global``/``nonlocal``, walrus, nested f-strings, ``__main__`` blocks, asyncio). Each snippet must
print the same and end the same way in the sandbox (subprocess backend, ``Policy()``) as in plain
CPython; ``tests/sandbox/test_real_code.py`` checks it and ``bench/bench_real_code.py`` reports the share.

Every exception is listed in :data:`DIFFERS` with the reason; the test fails if a listed snippet
starts to agree (so the list stays true).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

__all__ = ["DIFFERS", "SNIPPETS", "Snippet", "outcome_key"]

DIFFERS: Final[dict[str, str]] = {
    "sys-maxsize": "`sys` is not importable (interpreter internals: modules, frames, the real stdout)",
    "print-to-stderr": "`sys` is not importable (write to stdout, or raise, instead)",
    "os-environ": "`os` is not importable (processes, files, the environment)",
    "open-write-read": "`open()` under the policy only reads files of the working directory (writing is refused)",
    "eval-expression": "`eval()`/`exec()` are refused at compile time",
    "dunder-class-name": "`__class__` is a dunder attribute: write `type(self).__name__`",
    "slots-class": "`__slots__` is a reserved dunder name",
    "vars-dict": "`vars()` and `__dict__` expose every attribute, private ones included",
    "name-mangled": "`self.__x` (double underscore) is reserved; `self._x` works",
    "type-three-args": "`type(name, bases, dict)` builds a class around the policy; use a class statement",
    "ast-literal-eval": "`ast` is not on the default allow-list (a host may widen the policy)",
    "exception-chaining": "`__cause__`/`__traceback__` are dunder attributes (a traceback leads to frames)",
    "enum-methods": "an Enum whose `__init__` sets attributes: members are built before the class counts as "
    "the code's own, so the writes are refused (plain Enum members and methods work)",
}
"""Snippet id -> why it does not run the same under the policy (the policy's deliberate limits)."""


@dataclass(frozen=True, kw_only=True)
class Snippet:
    """One corpus entry.

    Attributes:
        id: Unique id (the pytest id).
        category: maths, data, strings, algorithms or idioms.
        code: The source.
        differs: Why it does not agree under the policy, or "" when it must agree.
    """

    id: str
    category: str
    code: str
    differs: str = ""


def _load() -> tuple[Snippet, ...]:
    text = (Path(__file__).with_name("real_code_corpus.txt")).read_text(encoding="utf-8")
    snippets: list[Snippet] = []
    for block in text.split("\n### ")[1:]:
        header, _, code = block.partition("\n")
        category, snippet_id = header.split()
        snippets.append(
            Snippet(id=snippet_id, category=category, code=code.rstrip() + "\n", differs=DIFFERS.get(snippet_id, ""))
        )
    return tuple(snippets)


SNIPPETS: Final = _load()


def outcome_key(stdout: str, error_type: str | None) -> tuple[str, str | None]:
    """What must agree between the sandbox and CPython: the printed text and how the run ended."""
    return stdout, error_type
