"""Step 2 of compiling the model's code, for ``match`` statements (sandbox/policy.py; docs/sandbox-security.md).

A pattern reads values with no expression the transform could route through a guard: a dotted name
(``case Color.RED``, a mapping key ``{Color.RED: v}``, a class ``case shapes.Circle()``) is a raw attribute
chain, and a class pattern ``case C(a, k=p)`` reads attributes of the subject natively. So:

1. Every dotted name of a case is evaluated through the guards when that case is about to be tried, as
   CPython looks it up then: a class into a hidden name (``_codeact_pattern_2_``), a value pattern or mapping
   key into a hidden holder the pattern then reads (``_codeact_match_1_ = _codeact_match_values_(v0=<guarded
   Color.RED>)``, ``case _codeact_match_1_.v0``). For that the statement is split before each case that has
   such names: the subject goes into a hidden name first, each part is a ``match`` of its own on it, and a
   part runs only when no case of the parts before it matched (``_codeact_more_1_``, set by the ``case _``
   that ends each part but the last). A case with no such names stays in the part before it.
2. The class of a class pattern with sub-patterns is the class ``_codeact_pattern_class_(C, n_positional,
   keyword_names)`` returns (runtime/_match_guard.py): the pattern then reads only what ``subject.name``
   would give the code. Keyword names are checked here as attribute names are.
3. A name captured inside a class pattern's sub-patterns (a value read from an attribute) is bound only
   after ``_codeact_captured_`` checked it: the pattern captures into a hidden name
   (``_codeact_capture_x_``) and the case's guard becomes
   ``_codeact_captured_(_codeact_capture_x_) and [x := _codeact_capture_x_] and (<guard>)``. Other captures
   (the subject, its items) are what the code's own ``subject[i]`` gives, and bind as written.

So ``match node: case Add(l, r): ... case Num(v): ...`` compiles to (captures left out)::

    _codeact_subject_1_ = node
    _codeact_pattern_1_ = _codeact_pattern_class_(Add, 2, ())
    _codeact_more_1_ = False
    match _codeact_subject_1_:
        case _codeact_pattern_1_(l, r): ...
        case _: _codeact_more_1_ = True
    if _codeact_more_1_:
        _codeact_pattern_2_ = _codeact_pattern_class_(Num, 1, ())
        match _codeact_subject_1_:
            case _codeact_pattern_2_(v): ...

The parts follow each other rather than nest, so a long statement compiles as deep as a short one. The
hidden names start and end with ``_``: sandboxed code can neither read nor bind them.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

from codeact.sandbox.runtime.guards import CAPTURED, MATCH_VALUES, PATTERN_CLASS, is_private_name

__all__ = ["MatchRewriter"]

_HOLDER: Final = "_codeact_match_{}_"
_CLASS: Final = "_codeact_pattern_{}_"
_CAPTURE: Final = "_codeact_capture_{}_"
_SUBJECT: Final = "_codeact_subject_{}_"
_MORE: Final = "_codeact_more_{}_"

_Node = TypeVar("_Node", bound=ast.AST)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Step:
    """One class or dotted name a case evaluates before it is tried."""

    target: str  # the hidden name of a class, or the holder's key of a value
    expr: ast.expr  # already through the transform (the guards)
    where: ast.AST  # the pattern node it came from: its location
    value: bool  # a value pattern or mapping key (read from the holder), else a class


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
        # what the case being visited evaluates before it is tried, in the order its pattern names it
        self._match_steps: list[_Step] = []
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
        """Evaluate ``expr`` (already transformed) before its case is tried; the pattern reads the holder's copy."""
        holder = self._match_holder
        assert holder is not None  # noqa: S101 - patterns exist only inside a match statement
        key = f"v{len(self._match_steps)}"
        self._match_steps.append(_Step(target=key, expr=expr, where=where, value=True))
        new = ast.Attribute(value=ast.Name(holder, ast.Load()), attr=key, ctx=ast.Load())
        for node in (new, new.value):
            ast.copy_location(node, where)
        return new

    def _hoist_class(self, expr: ast.expr, where: ast.AST) -> ast.Name:
        """Evaluate a class pattern's class (already transformed) before its case is tried, into a hidden name."""
        self._class_count += 1
        name = _CLASS.format(self._class_count)
        self._match_steps.append(_Step(target=name, expr=expr, where=where, value=False))
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
        outer = self._match_holder, self._match_steps
        self._match_count += 1
        number = self._match_count
        holder = self._match_holder = _HOLDER.format(number)
        parts: list[tuple[list[ast.stmt], list[ast.match_case]]] = []  # (what its first case evaluates, cases)
        try:
            node.subject = self._expr(node.subject)
            for case in node.cases:
                self._match_steps = []
                case = self.visit_match_case(case)
                evaluated = _evaluations(holder, self._match_steps)
                if evaluated or not parts:
                    parts.append((evaluated, [case]))
                else:  # nothing to evaluate: tried right after the case before it, in the same part
                    parts[-1][1].append(case)
        finally:
            self._match_holder, self._match_steps = outer
        if len(parts) == 1 and not parts[0][0]:  # nothing to evaluate: the statement as it was
            node.cases = parts[0][1]
            return node
        return _split(node, number, parts)

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


def _evaluations(holder: str, steps: list[_Step]) -> list[ast.stmt]:
    """The statements evaluating a case's classes and dotted names, in the order its pattern names them.

    Classes go into hidden names, values into the attributes of a holder the pattern reads (a value pattern
    must be a dotted name); with values, each class is evaluated inside the holder's call, in its place.
    """
    if not any(step.value for step in steps):
        return [_located(ast.Assign(targets=[ast.Name(s.target, ast.Store())], value=s.expr), s.where) for s in steps]
    keywords: list[ast.keyword] = []
    for step in steps:
        key, expr = step.target, step.expr
        if not step.value:  # `p1=(_codeact_pattern_3_ := <expr>)`
            key, expr = f"p{len(keywords)}", _located(ast.NamedExpr(ast.Name(key, ast.Store()), expr), step.where)
        keywords.append(ast.keyword(arg=key, value=expr))
    call = ast.Call(func=ast.Name(MATCH_VALUES, ast.Load()), args=[], keywords=keywords)
    return [_located(ast.Assign(targets=[ast.Name(holder, ast.Store())], value=call), steps[0].where)]


def _located(new: _Node, where: ast.AST) -> _Node:
    """``new`` at ``where``'s location, with its parts that have none (the expressions it reuses keep theirs)."""
    return ast.fix_missing_locations(ast.copy_location(new, where))


def _split(node: ast.Match, number: int, parts: list[tuple[list[ast.stmt], list[ast.match_case]]]) -> list[ast.stmt]:
    """``node`` as one ``match`` per part, each tried only when no case before it matched (module docstring)."""
    subject, more = _SUBJECT.format(number), _MORE.format(number)

    def flag(value: bool, where: ast.AST) -> ast.stmt:
        return _located(ast.Assign(targets=[ast.Name(more, ast.Store())], value=ast.Constant(value)), where)

    first = ast.Assign(targets=[ast.Name(subject, ast.Store())], value=node.subject)
    statements: list[ast.stmt] = [_located(first, node)]
    for index, (evaluated, cases) in enumerate(parts):
        where = cases[0].pattern if index else node
        body = statements
        if index:
            test = _located(ast.If(test=ast.Name(more, ast.Load()), body=[], orelse=[]), where)
            statements.append(test)
            body = test.body
        body.extend(evaluated)
        if index < len(parts) - 1:  # the `case _` ending the part sets the flag when none of its cases matched
            body.append(flag(False, where))
            following = parts[index + 1][1][0].pattern
            fallback = ast.match_case(pattern=_located(ast.MatchAs(), following), body=[flag(True, following)])
            cases = [*cases, fallback]
        body.append(_located(ast.Match(subject=ast.Name(subject, ast.Load()), cases=cases), where))
    return statements


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
