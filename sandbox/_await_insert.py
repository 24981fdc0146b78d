"""Step 1 of compiling the model's code (sandbox/policy.py): ``await`` inserted before toolkit calls."""

from __future__ import annotations

import ast
from typing import Any, Final

SYNC_HELPER: Final = "_codeact_sync_"
"""The runtime-provided function that runs a toolkit call to completion from synchronous code."""

CORO_HELPER: Final = "_codeact_coro_"
"""The runtime-provided coroutine wrapping a toolkit call for APIs that take only coroutines (``create_task``)."""

_CORO_ONLY: Final = frozenset({"create_task", "Task", "run_coroutine_threadsafe"})
_COMBINATORS: Final = frozenset(
    {"gather", "create_task", "ensure_future", "wait", "wait_for", "shield", "as_completed", "Task",
     "run_coroutine_threadsafe"}
)  # fmt: skip


class _AwaitInserter(ast.NodeTransformer):
    """Step 1 (see the module docstring). Runs before the RestrictedPython transform."""

    def __init__(self, toolkit_names: frozenset[str]) -> None:
        self.toolkits = toolkit_names
        self.internal_names: list[ast.Name] = []  # `_codeact_sync_` loads the transformer must accept
        self._async = [True]  # module level may await (PyCF_ALLOW_TOP_LEVEL_AWAIT)
        self._protected = False  # inside the arguments of an asyncio combinator
        self._awaited: set[int] = set()

    def _is_toolkit_call(self, node: ast.Call) -> bool:
        func = node.func
        return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.toolkits

    def _scoped(self, is_async: bool, nodes: list[ast.stmt] | ast.expr) -> Any:
        self._async.append(is_async)
        protected, self._protected = self._protected, False
        try:
            if isinstance(nodes, list):
                return [self.visit(n) for n in nodes]
            return self.visit(nodes)
        finally:
            self._async.pop()
            self._protected = protected

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, is_async: bool) -> ast.AST:
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.args = self.visit(node.args)
        if node.returns is not None:
            node.returns = self.visit(node.returns)
        node.body = self._scoped(is_async, node.body)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:  # noqa: D102
        return self._function(node, False)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:  # noqa: D102
        return self._function(node, True)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:  # noqa: D102
        node.args = self.visit(node.args)
        node.body = self._scoped(False, node.body)
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:  # noqa: D102
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        node.bases = [self.visit(b) for b in node.bases]
        node.keywords = [self.visit(k) for k in node.keywords]
        node.body = self._scoped(False, node.body)
        return node

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> ast.AST:  # noqa: D102
        # The first iterable is evaluated in the enclosing scope; the rest runs lazily (a sync scope:
        # an inserted `await` would turn it into an async generator that sum()/list() cannot consume).
        first = node.generators[0]
        first.iter = self.visit(first.iter)
        self._async.append(False)
        try:
            first.target = self.visit(first.target)
            first.ifs = [self.visit(i) for i in first.ifs]
            node.generators[1:] = [self.visit(g) for g in node.generators[1:]]
            node.elt = self.visit(node.elt)
        finally:
            self._async.pop()
        return node

    def visit_Await(self, node: ast.Await) -> ast.AST:  # noqa: D102
        self._awaited.add(id(node.value))
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:  # noqa: D102
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        combinator = name in _COMBINATORS
        node.func = self.visit(node.func)
        protected, self._protected = self._protected, combinator
        try:
            node.args = [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
        finally:
            self._protected = protected
        if name in _CORO_ONLY:
            # A toolkit call is a future, not a coroutine: give create_task() one that awaits it.
            node.args = [
                self._as_coroutine(a) if isinstance(a, ast.Call) and self._is_toolkit_call(a) else a for a in node.args
            ]
        in_async = self._async[-1]
        asyncio_run = (
            name == "run"
            and isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id == "asyncio")
        )
        # `loop.run_until_complete(main())` (any loop: the sandbox's is already running) is the same thing
        until_complete = name == "run_until_complete" and isinstance(func, ast.Attribute)
        if (
            in_async
            and (asyncio_run or until_complete)
            and len(node.args) == 1
            and not node.keywords
            and id(node) not in self._awaited
        ):
            return ast.copy_location(ast.Await(value=node.args[0]), node)
        if not self._is_toolkit_call(node) or id(node) in self._awaited or self._protected:
            return node
        if in_async:
            return ast.copy_location(ast.Await(value=node), node)
        helper = ast.copy_location(ast.Name(id=SYNC_HELPER, ctx=ast.Load()), node)
        self.internal_names.append(helper)
        return ast.copy_location(ast.Call(func=helper, args=[node], keywords=[]), node)

    def _as_coroutine(self, call: ast.expr) -> ast.expr:
        helper = ast.copy_location(ast.Name(id=CORO_HELPER, ctx=ast.Load()), call)
        self.internal_names.append(helper)
        return ast.copy_location(ast.Call(func=helper, args=[call], keywords=[]), call)


# -- the RestrictedPython transform -----------------------------------------------------------------
