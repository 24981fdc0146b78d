"""Conditions of a flow's branches (``flow.agents[].when``): a small expression language over the flow's state.

A blueprint is untrusted text, so a condition is never ``eval``-ed: it is parsed with ``ast.parse``
(expression mode), every node is checked against the short list below when the blueprint is loaded
(:func:`parse_condition`: an error names the construct and the column), and evaluated by walking the
checked tree (:meth:`Condition.holds`), no Python code running.

The language:

* names are flow state keys (``input``, each step's output key); a key not in the state is ``null``;
* ``a.b`` and ``a["b"]`` / ``a[0]`` read a key of a mapping or an item of a list (``null`` when it is
  not there); a string holding a JSON object or array (all of it, a fenced block in it, or its outermost
  ``{...}``) is read as that value: a step's answer given as JSON text, prose around it allowed;
* literals: strings, numbers, ``true`` / ``false`` / ``null`` (``True`` / ``False`` / ``None`` too),
  lists ``[...]``;
* ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``, ``and``, ``or``, ``not``, and
  ``len(x)``, ``lower(x)``.

Examples: ``classify.kind == "refund"``, ``review.score >= 7 and not review.blocked``,
``"urgent" in lower(input)``.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from codeact.engine.blueprint.json_text import json_in_text

__all__ = ["Condition", "ConditionError", "parse_condition"]

_MAX_CHARS: Final = 500
_CONSTANTS: Final = {"true": True, "false": False, "null": None}
_COMPARE: Final[dict[type[ast.cmpop], Callable[[Any, Any], Any]]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_FUNCTIONS: Final[dict[str, Callable[[Any], Any]]] = {"len": len, "lower": lambda v: str(v).lower()}
_ALLOWED = (
    "names (state keys), a.b, a['b'], a[0], strings, numbers, true/false/null, lists, ==, !=, <, <=, >, >=, "
    "in, not in, and, or, not, len(x), lower(x)"
)


class ConditionError(ValueError):
    """A condition that is not in the language (at load), or that cannot be evaluated on the state (at run)."""


@dataclass(frozen=True)
class Condition:
    """A checked condition: :meth:`holds` evaluates it on a flow state."""

    text: str
    tree: ast.expr

    def holds(self, state: Mapping[str, object]) -> bool:
        """Whether the condition is true of ``state``.

        Raises:
            ConditionError: The values cannot be compared (``review.score > "high"``), or ``len`` of a number.
        """
        try:
            return bool(_eval(self.tree, state))
        except TypeError as exc:
            raise ConditionError(f"condition {self.text!r} could not be evaluated: {exc}") from None

    def __call__(self, state: Mapping[str, object]) -> bool:
        """As :meth:`holds`: a condition is a predicate of the state."""
        return self.holds(state)


def parse_condition(text: str) -> Condition:
    """Parse and check ``text``.

    Raises:
        ConditionError: It is empty, too long, not an expression, or uses something outside the language
            (the message names it and its column, and lists what the language has).
    """
    if not isinstance(text, str) or not text.strip():
        raise ConditionError("the condition is empty: write an expression such as classify.kind == 'refund'")
    if len(text) > _MAX_CHARS:
        raise ConditionError(f"the condition is {len(text)} characters long; at most {_MAX_CHARS}")
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ConditionError(f"the condition {text!r} is not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        _check(node, text)
    return Condition(text=text, tree=tree)


def _check(node: ast.AST, text: str) -> None:
    allowed = (
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.Not,
        ast.Compare,
        ast.Name,
        ast.Load,
        ast.Constant,
        ast.Attribute,
        ast.Subscript,
        ast.List,
        ast.Tuple,
        ast.Call,
        *_COMPARE,
    )
    what = ""
    if not isinstance(node, allowed):
        what = type(node).__name__
    elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
        what = "a unary operator other than not"
    elif isinstance(node, ast.Constant) and not isinstance(node.value, str | int | float | bool | type(None)):
        what = f"the literal {node.value!r}"
    elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        what = f"the private name {node.attr!r}"
    elif isinstance(node, ast.Name) and node.id.startswith("_"):
        what = f"the private name {node.id!r}"
    elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
        what = "a slice"
    elif isinstance(node, ast.Call) and (
        not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or len(node.args) != 1 or node.keywords
    ):
        what = "a call other than len(x) or lower(x)"
    if what:
        column = getattr(node, "col_offset", 0) + 1
        raise ConditionError(f"the condition {text!r} uses {what} at column {column}; a condition has only: {_ALLOWED}")


def _eval(node: ast.expr, state: Mapping[str, object]) -> object:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in state:
            return state[node.id]
        return _CONSTANTS.get(node.id)
    if isinstance(node, ast.Attribute):
        return _item(_eval(node.value, state), node.attr)
    if isinstance(node, ast.Subscript):
        return _item(_eval(node.value, state), _eval(node.slice, state))
    if isinstance(node, ast.List | ast.Tuple):
        return [_eval(item, state) for item in node.elts]
    if isinstance(node, ast.BoolOp):
        values = (_eval(value, state) for value in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        return not _eval(node.operand, state)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # noqa: S101 - checked by _check
        return _FUNCTIONS[node.func.id](_eval(node.args[0], state))
    if isinstance(node, ast.Compare):
        left = _eval(node.left, state)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, state)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    raise ConditionError(f"unexpected {type(node).__name__} in a checked condition")  # pragma: no cover


def _item(value: object, key: object) -> object:
    """``value[key]``, or null when it is not there; a string holding a JSON object or array is read as it."""
    if isinstance(value, str):
        value, _ = json_in_text(value)  # a JSON object or array in the text, else not an item
    if isinstance(value, Mapping):
        return value.get(key) if isinstance(key, str) else None
    if isinstance(value, list | tuple) and isinstance(key, int) and not isinstance(key, bool):
        return value[key] if -len(value) <= key < len(value) else None
    return None
