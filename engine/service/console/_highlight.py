"""A small server-side Python highlighter for the console (stdlib ``tokenize``, no dependency).

``highlight(code, error_line=N)`` returns one ``CodeLine`` per source line, each holding HTML whose
every piece of source text is escaped; broken code (an unterminated string, bad indentation, a reply
cut off mid-line) is shown as it is, plain from the first token ``tokenize`` refuses.
"""

from __future__ import annotations

import io
import keyword
import token
import tokenize
from dataclasses import dataclass
from html import escape

from markupsafe import Markup

__all__ = ["CodeLine", "highlight"]

_BUILTINS = frozenset(
    {"print", "len", "range", "dict", "list", "set", "tuple", "str", "int", "float", "bool", "sum", "min", "max"}
    | {"sorted", "enumerate", "zip", "map", "filter", "isinstance", "open", "any", "all", "abs", "round", "type"}
)
_SOFT_KEYWORDS = frozenset({"match", "case", "type", "_"})


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


def _css_class(tok: tokenize.TokenInfo, previous: str) -> str | None:
    kind = tok.type
    if kind == token.NAME:
        if keyword.iskeyword(tok.string):
            return "kw"
        if previous in ("def", "class"):
            return "fn"
        if tok.string in _BUILTINS:
            return "bi"
        return None
    if kind == token.STRING or kind in _FSTRING_TYPES:
        return "str"
    if kind == token.COMMENT:
        return "com"
    if kind == token.NUMBER:
        return "num"
    if kind == token.OP:
        return "op"
    return None


_FSTRING_TYPES = frozenset(
    getattr(token, name) for name in ("FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END") if hasattr(token, name)
)


def _spans(code: str) -> list[tuple[int, int, int, int, str]]:
    """(start row, start col, end row, end col, class) for each styled token ``tokenize`` accepts."""
    spans: list[tuple[int, int, int, int, str]] = []
    previous = ""
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            css = _css_class(tok, previous)
            if tok.type == token.NAME:
                previous = tok.string
            elif tok.type not in (token.NL, token.NEWLINE, token.INDENT, token.DEDENT, token.COMMENT):
                previous = ""
            if css is not None and tok.start != tok.end:
                spans.append((*tok.start, *tok.end, css))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass  # the rest stays plain
    return spans


def highlight(code: str, *, error_line: int | None = None) -> list[CodeLine]:
    """Highlight ``code`` line by line.

    Args:
        code: Python source (possibly broken).
        error_line: The 1-based line the round's error points at, marked in the result.

    Returns:
        One ``CodeLine`` per line of ``code``.
    """
    lines = code.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    pieces: list[list[str]] = [[] for _ in lines]
    cursor = [0 for _ in lines]

    def emit(row: int, upto: int, css: str | None) -> None:
        text = lines[row][cursor[row] : upto]
        if text:
            pieces[row].append(f'<span class="t-{css}">{escape(text)}</span>' if css else escape(text))
        cursor[row] = max(cursor[row], upto)

    for srow, scol, erow, ecol, css in _spans(code):
        first, last = srow - 1, erow - 1
        if first >= len(lines):
            break
        emit(first, scol, None)
        for row in range(first, min(last, len(lines) - 1) + 1):
            end = ecol if row == last else len(lines[row])
            emit(row, end, css)
    out: list[CodeLine] = []
    for row, line in enumerate(lines):
        emit(row, len(line), None)
        number = row + 1
        out.append(CodeLine(number=number, html=Markup("".join(pieces[row])), error=number == error_line))
    return out
