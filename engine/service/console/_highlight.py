"""A small, fast server-side Python highlighter for the console (one regular expression, no dependency).

``highlight(code, error_line=N)`` returns one ``CodeLine`` per source line, each holding HTML whose
every piece of source text is escaped. Broken code (an unterminated string, bad indentation, a reply
cut off mid-line) is still shown whole: the scanner never fails, it only colours less.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass
from functools import lru_cache
from html import escape

from markupsafe import Markup

__all__ = ["CodeLine", "highlight"]

_BUILTINS = frozenset(
    {"print", "len", "range", "dict", "list", "set", "tuple", "str", "int", "float", "bool", "sum", "min", "max"}
    | {"sorted", "enumerate", "zip", "map", "filter", "isinstance", "open", "any", "all", "abs", "round", "type"}
)
_KEYWORDS = frozenset(keyword.kwlist)
_TOKEN = re.compile(
    r"""
    (?P<com>\#[^\n]*)
  | (?P<str>(?:\b[rRbBuUfF]{1,2}(?=['"]))?
        (?:\"\"\"[\s\S]*?(?:\"\"\"|\Z)|'''[\s\S]*?(?:'''|\Z)|"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?))
  | (?P<name>[^\W\d]\w*)
  | (?P<num>\b(?:0[xXoObB][0-9a-fA-F_]+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][+-]?\d+)?[jJ]?)|(?<![\w.])\.\d+)
    """,
    re.X,
)


@dataclass(frozen=True, kw_only=True)
class CodeLine:
    """One highlighted source line.

    Attributes:
        number: The 1-based line number.
        html: The line as escaped HTML with ``<span class="t-...">`` tokens.
        error: Whether the round's error points at this line.
    """

    number: int
    html: Markup
    error: bool = False


def _html(code: str) -> str:
    """``code`` as escaped HTML with token spans; no span crosses a newline."""
    out: list[str] = []
    pos = 0
    previous = ""
    for match in _TOKEN.finditer(code):
        css, text = match.lastgroup, match.group()
        if css == "name":
            css = (
                "kw"
                if text in _KEYWORDS
                else "fn"
                if previous in ("def", "class")
                else "bi"
                if text in _BUILTINS
                else None
            )
            previous = text
            if css is None:
                continue  # a plain name stays in the text between tokens
        start = match.start()
        if start > pos:
            out.append(escape(code[pos:start], quote=False))
        if "\n" in text:
            out.append(
                "\n".join(f'<span class="t-{css}">{escape(part, quote=False)}</span>' for part in text.split("\n"))
            )
        else:
            out.append(f'<span class="t-{css}">{escape(text, quote=False)}</span>')
        pos = match.end()
    out.append(escape(code[pos:], quote=False))
    return "".join(out)


@lru_cache(maxsize=4096)
def highlight(code: str, *, error_line: int | None = None) -> tuple[CodeLine, ...]:
    """Highlight ``code`` line by line (recorded rounds never change: the result is cached).

    Args:
        code: Python source (possibly broken).
        error_line: The 1-based line the round's error points at, marked in the result.

    Returns:
        One ``CodeLine`` per line of ``code``.
    """
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    if not code:
        return ()
    lines = _html(code.removesuffix("\n")).split("\n")
    return tuple(CodeLine(number=i, html=Markup(line), error=i == error_line) for i, line in enumerate(lines, start=1))
