"""The note for a NameError on a name an earlier round's code assigned after the line that failed.

Real models take a failed round's later lines for done: Qwen2.5-Coder-1.5B's round 1 failed on a
KeyError at its filter line, and it then printed ``best_hotel`` (assigned two lines further down)
three rounds in a row, each a NameError. The note says where the name was to be assigned and that
nothing after a failing line runs.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from typing import NamedTuple

from codeact import prompts
from codeact.segments import parse_python

__all__ = ["FailedRound", "unreached_note"]

_NAME_ERROR = re.compile(r"name '([A-Za-z_][A-Za-z0-9_]*)' is not defined")


class FailedRound(NamedTuple):
    """A round whose code failed: its number, the model's code and the model's line that failed (None unknown)."""

    round: int
    code: str
    line: int | None


def unreached_note(error: dict[str, object] | None, failed: Sequence[FailedRound]) -> list[str]:
    """The note for ``error`` when it is a NameError on a name a failed round assigned after its failing line."""
    if error is None or error.get("type") != "NameError":
        return []
    match = _NAME_ERROR.search(str(error.get("message", "")))
    if match is None:
        return []
    name = match.group(1)
    for earlier in reversed(failed):
        line = _assigned_at(earlier.code, name)
        if line is not None and (earlier.line is None or line >= earlier.line):
            failed_at = earlier.line or "?"
            text = prompts.render("unassigned_name.j2", name=name, line=line, round=earlier.round, failed=failed_at)
            return [text.rstrip("\n")]
    return []


def _assigned_at(code: str, name: str) -> int | None:
    """The first line of ``code`` that binds ``name`` (assignment, loop target, def, class, import), else None."""
    try:
        tree = parse_python(code)
    except (SyntaxError, ValueError):
        return None
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id == name:
            lines.append(node.lineno)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
            lines.append(node.lineno)
        elif isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            lines.append(node.lineno)
    return min(lines, default=None)
