"""Text helpers shared by the FIM frame and the reply parser (line ends, tabs, indentation)."""

from __future__ import annotations

import ast
import io
import re
import textwrap
import tokenize

_LEADING_WS = re.compile(r"^[ \t]+", re.MULTILINE)
# Characters that would end a comment line in the prompt or the program: Python itself only breaks
# lines at \n and \r, but the others are line breaks for str.splitlines() and for many renderers.
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")


def parse_python(code: str) -> ast.Module:
    """``ast.parse(code)``, once more after CPython 3.11's spurious "recursion depth mismatch" error.

    3.11 keeps the AST converter's depth counter per interpreter: a finalizer that runs during a
    parse (garbage collection) and parses too (formatting a traceback does) leaves it off, and the
    outer parse raises ``SystemError: AST constructor recursion depth mismatch`` (CPython gh-106905).
    The code is fine; parsing it again works.
    """
    try:
        return ast.parse(code)
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
        return ast.parse(code)


def normalize_newlines(text: str) -> str:
    """CRLF and lone CR become LF."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_tabs(code: str) -> str:
    """Make leading indentation spaces only.

    Code indented with tabs only gets 4 spaces per tab; mixed indentation is expanded the way Python
    reads it (tab stops every 8 columns), so the block structure is kept either way.
    """
    if "\t" not in code:
        return code
    leads = [m.group(0) for m in _LEADING_WS.finditer(code)]
    tabs_only = all(set(lead) == {"\t"} for lead in leads if lead)
    if tabs_only:
        return _LEADING_WS.sub(lambda m: "    " * len(m.group(0)), code)
    return _LEADING_WS.sub(lambda m: m.group(0).expandtabs(8), code)


def clean_code(code: str) -> str:
    """LF line ends, spaces for indentation, common indentation removed, outer blank lines trimmed."""
    code = textwrap.dedent(normalize_tabs(normalize_newlines(code)))
    lines = [line.rstrip() for line in code.split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines)


def one_line(text: str, limit: int) -> str:
    """``text`` on one line (line breaks escaped, control characters dropped), at most ``limit`` chars."""
    text = _LINE_BREAKS.sub(lambda m: repr(m.group(0))[1:-1], text)
    text = _CONTROL.sub("", text)
    if len(text) > limit:
        text = text[: max(limit - 3, 0)] + "..."
    return text


def parses(code: str) -> bool:
    """True when ``code`` is valid Python (top-level ``await`` allowed)."""
    try:
        parse_python(code)
    except (SyntaxError, ValueError):
        return False
    return True


def syntax_error(code: str) -> SyntaxError | None:
    """The SyntaxError ``ast.parse`` raises for ``code``, or None."""
    try:
        parse_python(code)
    except SyntaxError as exc:
        return exc
    except ValueError as exc:  # null bytes
        return SyntaxError(str(exc))
    return None


def fix_first_line(code: str) -> str:
    r"""Repair the FIM continuation shape: first line flush left, the others still indented.

    A completion model continues right after ``try:\\n    `` so its first line has no indentation and
    the following lines carry the try body's. When ``code`` does not parse as is but does once the
    other lines are dedented on their own, the repaired code is returned; otherwise ``code``.
    """
    if parses(code) or "\n" not in code:
        return code
    first, rest = code.split("\n", 1)
    if first[:1] in (" ", "\t") or not rest.strip():
        return code
    candidate = first + "\n" + textwrap.dedent(rest)
    if not parses(candidate):
        return code
    inside = string_lines(candidate)
    if not inside:
        return candidate
    # A string spanning lines: its inner lines are its text, not indentation; leave them as written.
    lines = code.split("\n")
    margins = [
        len(line) - len(line.lstrip()) for n, line in enumerate(lines[1:], 2) if n not in inside and line.strip()
    ]
    cut = min(margins, default=0)
    exact = "\n".join([first, *(line if n in inside else line[cut:] for n, line in enumerate(lines[1:], 2))])
    return exact if parses(exact) else candidate


def string_lines(code: str) -> frozenset[int]:
    """Lines (1-based) that continue a string begun on an earlier line: their text is the string's.

    Indenting or dedenting such a line would change the program's data (the text of a triple-quoted
    string), so the frame leaves them as written. Empty when ``code`` does not tokenize.
    """
    if '"""' not in code and "'''" not in code and "\\\n" not in code:
        return frozenset()
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(code).readline):
            if token.type == tokenize.STRING and token.end[0] > token.start[0]:
                lines.update(range(token.start[0] + 1, token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        return frozenset()
    return frozenset(lines)
