"""Step 1b of compiling the model's code (sandbox/policy.py): bare expressions are shown, as in a REPL.

As in a notebook, a round whose last statement is an expression (``await dna.gc_content(seq=s)``,
``total``) prints that value's ``repr()`` unless it is None: real models write the call and expect
to see its result (Qwen2.5-Coder-1.5B did on every multitool task, then answered from memory).
Real models also write several bare tool calls in a row (``await trade.price(symbol="A")`` then
``await trade.fee(...)``) and answer from the one value a notebook shows, so every earlier bare
expression that only reads a value (an ``await``, a name, an attribute, a subscript, arithmetic) is
shown too, as a REPL does. A plain call in the middle (``items.append(x)``, ``f.write(s)``) is run
for its effect and not shown. A value shown before the end (or one of several) is labelled with its
expression (``await trade.fee(symbol='A') -> 0.5``) so the model can tell it from printed output;
the last expression alone is shown bare, as in a notebook.

A round that ends by storing a tool's result (``page = await browser.read()``) would show nothing, and
the next prompt lists the variable with an 80-character repr: Qwen2.5-Coder-1.5B then guessed the
links of a page it had read. So a last statement that assigns an awaited value to one name shows
that value too, labelled with the name (``page -> {...}``), as smolagents shows an assignment's value.

The statements looked at are the program's, or, when its last statement is a ``try`` (the FIM frame
around the model's code), that ``try``'s body. ``print(...)`` and stray literals are left alone.
"""

from __future__ import annotations

import ast
from typing import Final

SHOW_HELPER: Final = "_codeact_show_"
"""The runtime-provided function that prints a value's repr() unless it is None (with a label when given)."""

_LABEL_CHARS: Final = 80
"""A label longer than this is cut, with "..." at its end."""

_READS: Final = (ast.Await, ast.Name, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp)
"""Expressions a statement in the middle of the code is shown for: ones written to see a value."""


def show_last_value(tree: ast.Module, internal_names: list[ast.Name]) -> ast.Module:
    """Wrap the bare expressions to show in ``_codeact_show_(...)``; ``internal_names`` gets the helper names."""
    body = tree.body
    if body and isinstance(body[-1], ast.Try) and body[-1].body:
        body = body[-1].body
    shown = [
        statement
        for position, statement in enumerate(body)
        if isinstance(statement, ast.Expr) and _to_show(statement.value, last=position == len(body) - 1)
    ]
    for statement in shown:
        value = statement.value
        helper = ast.copy_location(ast.Name(id=SHOW_HELPER, ctx=ast.Load()), value)
        internal_names.append(helper)
        args: list[ast.expr] = [value]
        if len(shown) > 1 or statement is not body[-1]:
            args.append(ast.copy_location(ast.Constant(value=_label(value)), value))
        statement.value = ast.copy_location(ast.Call(func=helper, args=args, keywords=[]), value)
    stored = _awaited_name(body[-1]) if body else None
    if stored is not None:
        helper = ast.copy_location(ast.Name(id=SHOW_HELPER, ctx=ast.Load()), stored)
        internal_names.append(helper)
        name = ast.copy_location(ast.Name(id=stored.id, ctx=ast.Load()), stored)
        show = ast.Call(func=helper, args=[name, ast.Constant(value=stored.id)], keywords=[])
        body.append(ast.fix_missing_locations(ast.copy_location(ast.Expr(value=show), body[-1])))
    return tree


def _awaited_name(statement: ast.stmt) -> ast.Name | None:
    """The name a ``name = await ...`` (or ``name: T = await ...``) statement stores to, else None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target: ast.expr = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        target = statement.target
    else:
        return None
    return target if isinstance(target, ast.Name) and isinstance(statement.value, ast.Await) else None


def _to_show(value: ast.expr, *, last: bool) -> bool:
    """Whether a bare expression statement's value is shown: any but print and literals last, reads before."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return False
    if isinstance(value, ast.Constant):  # a docstring or a stray literal: nothing the model asked to see
        return False
    return last or isinstance(value, _READS)


def _label(value: ast.expr) -> str:
    """The expression's source on one line, cut to ``_LABEL_CHARS``."""
    text = " ".join(ast.unparse(value).split())
    return text if len(text) <= _LABEL_CHARS else text[: _LABEL_CHARS - 3] + "..."
