"""Step 1b of compiling the model's code (sandbox/policy.py): the round's last expression is shown.

As in a notebook, a round whose last statement is an expression (``await dna.gc_content(seq=s)``,
``total``) prints that value's ``repr()`` unless it is None: real models write the call and expect
to see its result (Qwen2.5-Coder-1.5B did on every multitool task, then answered from memory). The
last statement is the program's, or, when that is a ``try`` (the FIM frame around the model's code),
the last of its body. A ``print(...)`` call is left as it is.
"""

from __future__ import annotations

import ast
from typing import Final

SHOW_HELPER: Final = "_codeact_show_"
"""The runtime-provided function that prints a value's repr() unless it is None."""


def show_last_value(tree: ast.Module, internal_names: list[ast.Name]) -> ast.Module:
    """Wrap the last expression statement in ``_codeact_show_(...)``; ``internal_names`` gets the helper's name."""
    body = tree.body
    if body and isinstance(body[-1], ast.Try) and body[-1].body:
        body = body[-1].body
    if not body or not isinstance(body[-1], ast.Expr):
        return tree
    statement = body[-1]
    value = statement.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return tree
    if isinstance(value, ast.Constant):  # a docstring or a stray literal: nothing the model asked to see
        return tree
    helper = ast.Name(id=SHOW_HELPER, ctx=ast.Load())
    internal_names.append(helper)
    statement.value = ast.copy_location(ast.Call(func=helper, args=[value], keywords=[]), value)
    ast.copy_location(helper, value)
    return tree
