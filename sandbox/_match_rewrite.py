"""Step 2 of compiling the model's code, for ``match`` statements (sandbox/policy.py; docs/sandbox-security.md).

A pattern reads values with no expression the transform could route through a guard: a dotted name
(``case Color.RED``, a mapping key ``{Color.RED: v}``, a class ``case shapes.Circle()``) is a raw attribute
chain, and a class pattern ``case C(a, k=p)`` reads attributes of the subject natively. So:

1. Every dotted name in a pattern is evaluated through the guards before the statement: a class into a
   hidden name (``_codeact_pattern_2_``), a value pattern or mapping key into a hidden holder the pattern
   then reads (``_codeact_match_1_ = _codeact_match_values_(v0=<guarded Color.RED>)``, ``case
   _codeact_match_1_.v0``). Evaluated once and eagerly, not when its case is tried: a name that does not
   exist fails even when an earlier case matched.
2. The class of a class pattern with sub-patterns is the class ``_codeact_pattern_class_(C, n_positional,
   keyword_names)`` returns (runtime/_match_guard.py): the pattern then reads only what ``subject.name``
   would give the code. Keyword names are checked here as attribute names are.
3. A name captured inside a class pattern's sub-patterns (a value read from an attribute) is bound only
   after ``_codeact_captured_`` checked it: the pattern captures into a hidden name
   (``_codeact_capture_x_``) and the case's guard becomes
   ``_codeact_captured_(_codeact_capture_x_) and [x := _codeact_capture_x_] and (<guard>)``. Other captures
   (the subject, its items) are what the code's own ``subject[i]`` gives, and bind as written.

The hidden names start and end with ``_``: sandboxed code can neither read nor bind them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, Final

from codeact.sandbox.runtime.guards import CAPTURED, MATCH_VALUES, PATTERN_CLASS, is_private_name

__all__ = ["MatchRewriter"]

_HOLDER: Final = "_codeact_match_{}_"
_CLASS: Final = "_codeact_pattern_{}_"
_CAPTURE: Final = "_codeact_capture_{}_"


class MatchRewriter:
    """The ``match`` methods of the policy's transformer (a mixin: call ``init_match_rewriter`` first)."""

    if TYPE_CHECKING:  # provided by the transformer this is mixed into
        visit: Callable[[ast.AST], Any]  # NodeTransformer.visit: a node, a list of statements or None

        def error(self, node: ast.AST, info: str) -> None: ...  # noqa: D102

        def check_name(self, node: ast.AST, name: str | None, allow_magic_methods: bool = False) -> None: ...  # noqa: D102

    def init_match_rewriter(self, denied_attributes: Collection[str]) -> None:
        """Set up the rewriter's state.

        Args:
            denied_attributes: Attribute names no code may read (refused as keyword names too).
        """
        self._denied_pattern_attributes = frozenset(denied_attributes)
        self._match_count = 0
        self._match_holder: str | None = None
        self._match_values: list[ast.keyword] = []
        self._match_classes: list[ast.stmt] = []
        self._class_count = 0
        self._match_captures: dict[str, str] | None = None
        self._match_checked: frozenset[str] = frozenset()

    def _expr(self, node: ast.expr) -> ast.expr:
        new = self.visit(node)
        if not isinstance(new, ast.expr):  # pragma: no cover - the transformer keeps an expression one
            raise TypeError(f"the policy turned an expression into a {type(new).__name__}")
        return new

    def _pattern(self, node: ast.pattern) -> ast.pattern:
        new = self.visit(node)
        if not isinstance(new, ast.pattern):  # pragma: no cover - the visitors below return patterns
            raise TypeError(f"the policy turned a pattern into a {type(new).__name__}")
        return new

    def _hoist(self, expr: ast.expr, where: ast.AST) -> ast.Attribute:
        """Evaluate ``expr`` (already transformed) before the statement; the pattern reads the holder's copy."""
        holder = self._match_holder
        assert holder is not None  # noqa: S101 - patterns exist only inside a match statement
        key = f"v{len(self._match_values)}"
        self._match_values.append(ast.keyword(arg=key, value=expr))
        new = ast.Attribute(value=ast.Name(holder, ast.Load()), attr=key, ctx=ast.Load())
        for node in (new, new.value):
            ast.copy_location(node, where)
        return new

    def _hoist_class(self, expr: ast.expr, where: ast.AST) -> ast.Name:
        """Evaluate a class pattern's class (already transformed) before the statement, into a hidden name."""
        self._class_count += 1
        name = _CLASS.format(self._class_count)
        assign = ast.Assign(targets=[ast.Name(name, ast.Store())], value=expr)
        ast.copy_location(assign, where)
        self._match_classes.append(ast.fix_missing_locations(assign))
        return ast.copy_location(ast.Name(name, ast.Load()), where)

    def _capture(self, name: str) -> str:
        captures = self._match_captures
        assert captures is not None  # noqa: S101 - patterns exist only inside a case
        if name not in self._match_checked:
            return name
        hidden = captures[name] = _CAPTURE.format(name)
        return hidden

    def _visit_body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        result: list[ast.stmt] = []
        for statement in body:
            new = self.visit(statement)
            if isinstance(new, list):
                result.extend(new)
            elif new is not None:
                result.append(new)
        return result

    def visit_Match(self, node: ast.Match) -> ast.AST | list[ast.stmt]:  # noqa: D102
        outer = self._match_holder, self._match_values, self._match_classes
        self._match_count += 1
        holder = self._match_holder = _HOLDER.format(self._match_count)
        self._match_values = []
        self._match_classes = []
        try:
            node.subject = self._expr(node.subject)
            node.cases = [self.visit_match_case(case) for case in node.cases]
            values, classes = self._match_values, self._match_classes
        finally:
            self._match_holder, self._match_values, self._match_classes = outer
        if not values and not classes:
            return node
        hoisted = list(classes)
        if values:  # a value pattern must be a dotted name: the values sit in a holder's attributes
            call = ast.Call(func=ast.Name(MATCH_VALUES, ast.Load()), args=[], keywords=values)
            assign = ast.Assign(targets=[ast.Name(holder, ast.Store())], value=call)
            for new in (assign, assign.targets[0], call, call.func):
                ast.copy_location(new, node)
            hoisted.insert(0, ast.fix_missing_locations(assign))
        return [*hoisted, node]

    def visit_match_case(self, node: ast.match_case) -> ast.match_case:  # noqa: D102
        outer = self._match_captures, self._match_checked
        self._match_captures, self._match_checked = {}, _read_by_class_patterns(node.pattern)
        try:
            node.pattern = self._pattern(node.pattern)
            captures = self._match_captures
        finally:
            self._match_captures, self._match_checked = outer
        guard = self._expr(node.guard) if node.guard is not None else None
        node.body = self._visit_body(node.body)
        if captures:
            check = ast.Call(
                func=ast.Name(CAPTURED, ast.Load()), args=[ast.Name(h, ast.Load()) for h in captures.values()],
                keywords=[],
            )  # fmt: skip
            binds = ast.List(
                elts=[ast.NamedExpr(ast.Name(n, ast.Store()), ast.Name(h, ast.Load())) for n, h in captures.items()],
                ctx=ast.Load(),
            )
            new = ast.BoolOp(op=ast.And(), values=[check, binds, *([guard] if guard is not None else [])])
            for part in (new, check, binds):
                ast.copy_location(part, node.pattern)
            node.guard = ast.fix_missing_locations(new)
        else:
            node.guard = guard
        return node

    def visit_MatchValue(self, node: ast.MatchValue) -> ast.AST:  # noqa: D102
        if isinstance(node.value, ast.Attribute):  # a dotted name: read through the guards, before the match
            node.value = self._hoist(self._expr(node.value), node.value)
        return node  # a literal

    def visit_MatchClass(self, node: ast.MatchClass) -> ast.AST:  # noqa: D102
        for attr in node.kwd_attrs:
            if (attr.startswith("_") and not is_private_name(attr)) or attr in self._denied_pattern_attributes:
                self.error(node, f'attribute "{attr}" is not allowed in sandboxed code')
        cls = self._expr(node.cls)
        if node.patterns or node.kwd_attrs:
            call = ast.Call(
                func=ast.Name(PATTERN_CLASS, ast.Load()),
                args=[
                    cls,
                    ast.Constant(len(node.patterns)),
                    ast.Tuple(elts=[ast.Constant(a) for a in node.kwd_attrs], ctx=ast.Load()),
                ],
                keywords=[],
            )
            ast.copy_location(call, node.cls)
            node.cls = self._hoist_class(ast.fix_missing_locations(call), node.cls)
        elif isinstance(node.cls, ast.Attribute):  # an isinstance check: only the dotted name needs the guards
            node.cls = self._hoist_class(cls, node.cls)
        node.patterns = [self._pattern(p) for p in node.patterns]
        node.kwd_patterns = [self._pattern(p) for p in node.kwd_patterns]
        return node

    def visit_MatchMapping(self, node: ast.MatchMapping) -> ast.AST:  # noqa: D102
        node.keys = [self._hoist(self._expr(k), k) if isinstance(k, ast.Attribute) else k for k in node.keys]
        node.patterns = [self._pattern(p) for p in node.patterns]
        if node.rest is not None:
            self.check_name(node, node.rest)
            node.rest = self._capture(node.rest)
        return node

    def visit_MatchAs(self, node: ast.MatchAs) -> ast.AST:  # noqa: D102
        if node.pattern is not None:
            node.pattern = self._pattern(node.pattern)
        if node.name is not None:
            self.check_name(node, node.name)
            node.name = self._capture(node.name)
        return node

    def visit_MatchStar(self, node: ast.MatchStar) -> ast.AST:  # noqa: D102
        if node.name is not None:
            self.check_name(node, node.name)
            node.name = self._capture(node.name)
        return node

    def visit_MatchSequence(self, node: ast.MatchSequence) -> ast.AST:  # noqa: D102
        node.patterns = [self._pattern(p) for p in node.patterns]
        return node

    def visit_MatchOr(self, node: ast.MatchOr) -> ast.AST:  # noqa: D102
        node.patterns = [self._pattern(p) for p in node.patterns]
        return node

    def visit_MatchSingleton(self, node: ast.MatchSingleton) -> ast.AST:  # noqa: D102
        return node


def _captured_names(pattern: ast.pattern) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(pattern):
        if isinstance(node, ast.MatchAs | ast.MatchStar) and node.name is not None:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest is not None:
            names.add(node.rest)
    return names


def _read_by_class_patterns(pattern: ast.pattern) -> frozenset[str]:
    """The names a case captures inside a class pattern's sub-patterns: values read from attributes.

    Every other capture is the subject itself or its items (``[a, *rest]``, ``{'k': v, **others}``): what the
    code's own ``subject[i]`` gives, which no guard checks. An or-pattern binds a name in each alternative;
    the set is per case, so every occurrence of a checked name is renamed alike.
    """
    names: set[str] = set()
    for node in ast.walk(pattern):
        if isinstance(node, ast.MatchClass):
            for sub in (*node.patterns, *node.kwd_patterns):
                names |= _captured_names(sub)
    return frozenset(names)
