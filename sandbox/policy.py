"""The code policy: compile the model's code on the HOST into a code object the sandbox runtime runs.

Three steps, all here:

1. Await insertion. A toolkit call ``devops.status()`` (``devops`` one of ``toolkit_names``) that is
   not awaited gets ``await`` at module level and in ``async def`` bodies, and is wrapped as
   ``_codeact_sync_(...)`` (provided by the runtime: blocks until the result is there) in plain
   ``def`` bodies, lambdas, class bodies and generator expressions. Calls passed straight to an
   asyncio combinator (``gather``, ``create_task``, ``wait_for``, ...) are left alone so they run
   concurrently. ``asyncio.run(coro)`` and ``loop.run_until_complete(coro)`` at module level (also
   under ``if __name__ == "__main__":``) become ``await coro`` (the runtime already runs an event loop).
2. The RestrictedPython transform (``Policy.restricted``), through ``_SandboxTransformer``: stock
   checks plus ``async``/``await``, annotated assignments, ``nonlocal``, ``x.attr += 1`` and
   ``d[k] += 1`` (through guards) and a wider set of special methods classes may define. Attribute
   names in ``guards.DENIED_ATTRIBUTES`` are rejected at compile time too. What ordinary model code
   writes compiles with the same guards: ``match`` statements (``_match_rewrite.py``: the dotted names of
   patterns are read through the guards when their case is tried, class patterns read attributes only as
   ``obj.name`` would, captured values are checked before they are bound), ``except*``, ``from m import *`` at module
   level (``_codeact_import_star_``: the module's public names that a ``from m import name`` would
   give), and private names (``_cache``, ``def _helper``, ``self._v``: one leading underscore, no
   trailing one; the guard names all end in ``_``), whose attribute reads the runtime allows only
   on objects of classes the code defined (``guards.private_attribute_allowed``).
3. ``compile(..., PyCF_ALLOW_TOP_LEVEL_AWAIT)`` and ``marshal.dumps`` (host -> sandbox only).

Syntax errors and policy violations raise ``CompileFailure``, which the caller turns into a normal
error result quoting the offending line. RestrictedPython is imported lazily: ``import sandbox``
must not load it.
"""

from __future__ import annotations

import ast
import functools
import inspect
import marshal
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any, Final, TypeVar

from codeact.sandbox._await_insert import _COMBINATORS, _AwaitInserter
from codeact.sandbox._last_value import show_last_value
from codeact.sandbox._match_rewrite import MatchRewriter
from codeact.sandbox.runtime.guards import (
    ALLOWED_DUNDER_METHODS,
    ALLOWED_UNDERSCORE_ATTRIBUTES,
    ATTRIBUTE_GETTERS,
    DENIED_ATTRIBUTES,
    attribute_getter_name,
    is_private_name,
)

__all__ = ["DEFAULT_IMPORTS", "CompileFailure", "CompiledCode", "Policy", "compile_code"]

DEFAULT_IMPORTS: Final = frozenset(
    {
        "math", "json", "re", "datetime", "collections", "itertools", "functools", "statistics", "random",
        "decimal", "fractions", "string", "textwrap", "dataclasses", "enum", "uuid", "hashlib", "base64",
        "csv", "heapq", "bisect", "operator", "copy", "typing", "asyncio",
        # what model-written code also reaches for (pure computation; module-valued attributes of
        # these stay guarded like any other: `calendar.sys` is refused)
        "cmath", "numbers", "array", "pprint", "difflib", "calendar", "queue", "abc", "contextlib", "time",
        "graphlib", "secrets", "unicodedata", "shlex", "fnmatch", "html", "keyword", "struct",
    }
)  # fmt: skip
"""The modules sandboxed code may import unless a blueprint or host widens the policy."""

STAR_IMPORT_HELPER: Final = "_codeact_import_star_"
"""The runtime-provided function behind ``from m import *`` (binds the module's public names)."""

_MAX_REPORTED: Final = 5
_CACHE_SIZE: Final = 256
_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class Policy:
    """What generated code may do.

    Attributes:
        restricted: Apply the RestrictedPython transform (``False``: plain CPython compile; the
            container or OS layer is then the only boundary).
        allowed_imports: Top-level module names ``import`` may load.
    """

    restricted: bool = True
    allowed_imports: frozenset[str] = field(default=DEFAULT_IMPORTS)

    def widen(self, *modules: str) -> Policy:
        """A copy that also allows importing ``modules``.

        Args:
            *modules: Top-level module names, e.g. ``"zoneinfo"``.

        Returns:
            The widened policy (``self`` is unchanged).
        """
        return replace(self, allowed_imports=self.allowed_imports | frozenset(modules))


@dataclass(frozen=True, kw_only=True)
class CompiledCode:
    """One compiled program, ready to send to the runtime.

    Attributes:
        code: ``marshal.dumps`` of the module code object (host -> sandbox only).
        source: The source it was compiled from.
        is_async: The code object is a coroutine (top-level ``await``, possibly inserted).
        restricted: Compiled with the RestrictedPython transform.
        loop_free: A coroutine whose only awaits are the ones inserted before toolkit calls: the
            runtime runs it without an event loop (each call blocks on the socket, as in a plain
            ``def``), so a round that just calls tools pays neither asyncio's import nor a loop.
    """

    code: bytes
    source: str
    is_async: bool
    restricted: bool
    loop_free: bool = False


class CompileFailure(Exception):  # noqa: N818 - a result, not a CodeactError: the model fixes its code
    """The code does not compile: a syntax error or a policy violation.

    Attributes:
        type: ``"SyntaxError"`` or ``"PolicyViolation"``.
        message: What is wrong, quoting the offending line (``invalid syntax (line 3: "x = = 1")``).
        line: 1-based line in the source, when known.
        source_line: The offending line, stripped.
    """

    def __init__(self, *, type: str, message: str, line: int | None, source_line: str | None, detail: str = "") -> None:  # noqa: A002 - the result field is called "type"
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message
        self.line = line
        self.source_line = source_line
        self._detail = detail

    def to_error(self) -> dict[str, str | int | None]:
        """The ``error`` member of an execution result: ``{"type", "message", "line", "traceback"}``."""
        return {"type": self.type, "message": self.message, "line": self.line, "traceback": self._detail}


def compile_code(
    source: str, *, policy: Policy, toolkit_names: Collection[str] = (), filename: str = "<code>"
) -> CompiledCode:
    """Compile generated code (or a prelude of restored definitions) under ``policy``.

    Results are cached (LRU) by source, policy, toolkit names and filename.

    Args:
        source: The Python source the model wrote.
        policy: The policy to apply.
        toolkit_names: Names of the toolkit proxies in the namespace (for await insertion).
        filename: ``co_filename`` of the code object (tracebacks show it).

    Returns:
        The compiled code.

    Raises:
        CompileFailure: A syntax error or a policy violation.
    """
    return _compile_cached(source, policy, frozenset(toolkit_names), filename)


def _retry_ast(convert: Callable[[], _T]) -> _T:
    """Run ``convert`` once more after CPython 3.11's spurious "recursion depth mismatch" SystemError.

    3.11 keeps the AST converters' depth counter per interpreter: a finalizer that parses during a
    parse (formatting a traceback does) leaves it off (CPython gh-106905); the code itself is fine.
    """
    try:
        return convert()
    except SystemError as exc:
        if "recursion depth mismatch" not in str(exc):
            raise
        return convert()


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile_cached(source: str, policy: Policy, toolkit_names: frozenset[str], filename: str) -> CompiledCode:
    lines = source.splitlines()
    try:
        tree = _retry_ast(lambda: ast.parse(source, filename=filename, mode="exec", type_comments=False))
    except SyntaxError as exc:
        raise _syntax_failure(exc, lines, filename) from None
    loop_free = not _may_need_a_loop(tree)  # before the inserter adds its awaits
    inserter = _AwaitInserter(toolkit_names)
    tree = inserter.visit(tree)
    if filename == "<code>":  # the round's own code, not the prelude of restored definitions
        tree = show_last_value(tree, inserter.internal_names)
    if policy.restricted:
        tree = _restrict(tree, lines, inserter.internal_names)
    ast.fix_missing_locations(tree)
    try:
        code = _retry_ast(
            lambda: compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        )
    except SyntaxError as exc:
        raise _syntax_failure(exc, lines, filename) from None
    except (ValueError, TypeError) as exc:  # a malformed tree would be our bug; report it, do not crash
        raise CompileFailure(type="SyntaxError", message=str(exc), line=None, source_line=None) from None
    is_async = bool(code.co_flags & inspect.CO_COROUTINE)
    return CompiledCode(
        code=marshal.dumps(code),
        source=source,
        is_async=is_async,
        restricted=policy.restricted,
        loop_free=is_async and loop_free,
    )


_LOOP_ATTRIBUTES: Final = _COMBINATORS | {"run_until_complete", "get_running_loop", "get_event_loop"}


def _may_need_a_loop(tree: ast.Module) -> bool:
    """Whether the code may await something other than a toolkit call (so it needs a real event loop).

    Conservative: any ``await`` or ``async`` construct the code wrote itself, any mention of asyncio
    (a name, an import) or of a loop or combinator method. Without a loop, code that reaches asyncio
    another way (``__import__("asyncio")``) and asks it for the running loop gets none.
    """
    for node in ast.walk(tree):
        if isinstance(node, ast.Await | ast.AsyncFor | ast.AsyncWith | ast.AsyncFunctionDef):
            return True
        if isinstance(node, ast.comprehension) and node.is_async:
            return True
        if isinstance(node, ast.Attribute) and node.attr in _LOOP_ATTRIBUTES:
            return True
        if isinstance(node, ast.Name) and (node.id == "asyncio" or node.id in _LOOP_ATTRIBUTES):
            return True
        if isinstance(node, ast.alias) and "asyncio" in node.name:
            return True
        if isinstance(node, ast.ImportFrom) and "asyncio" in (node.module or ""):
            return True
    return False


def _quote(line: int | None, lines: list[str]) -> tuple[str, str | None]:
    if line is None or not 1 <= line <= len(lines):
        return "", None
    text = lines[line - 1].strip()
    return f'line {line}: "{text}"', text


def _syntax_failure(exc: SyntaxError, lines: list[str], filename: str) -> CompileFailure:
    line = exc.lineno
    where, text = _quote(line, lines)
    msg = exc.msg or "invalid syntax"
    message = f"{msg} ({where})" if where else msg
    detail = f'  File "{filename}", line {line}\n' if line else ""
    if text is not None:
        raw = lines[line - 1] if line else ""
        indent = len(raw) - len(raw.lstrip())
        detail += f"    {text}\n"
        if exc.offset:
            detail += "    " + " " * max(exc.offset - 1 - indent, 0) + "^\n"
    detail += f"SyntaxError: {message}"
    return CompileFailure(type="SyntaxError", message=message, line=line, source_line=text, detail=detail)


def _module_level_star_imports(tree: ast.Module) -> set[int]:
    """Ids of the ``from m import *`` statements outside any function or class (where Python allows them)."""
    found: set[int] = set()
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            found.add(id(node))
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
                stack.append(child)
    return found


def _restrict(tree: ast.Module, lines: list[str], internal_names: list[ast.Name]) -> ast.Module:
    transformer = _transformer_class()(internal_names, _module_level_star_imports(tree))
    result = transformer.visit(tree)
    if transformer.problems:
        raise _policy_failure(transformer.problems, lines)
    assert isinstance(result, ast.Module)  # noqa: S101 - visit_Module returns the module
    if transformer.getters:
        _bind_getters_first(result, list(transformer.getters))
    return result


def _bind_getters_first(tree: ast.Module, names: list[str]) -> None:
    """Make the module's first statement bind the attribute getters its code reads through (guards.py).

    After the docstring and ``from __future__`` imports, which must stay first.
    """
    call = ast.Call(func=ast.Name(ATTRIBUTE_GETTERS, ast.Load()), args=[ast.Constant(n) for n in names], keywords=[])
    statement = ast.Expr(value=call)
    body = tree.body
    index = 0
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            index = 1
    while index < len(body):
        statement_here = body[index]
        if not (isinstance(statement_here, ast.ImportFrom) and statement_here.module == "__future__"):
            break
        index += 1
    anchor = body[min(index, len(body) - 1)] if body else None
    if anchor is not None:  # the line of the statement it precedes (a traceback never points at it)
        for node in (statement, call, call.func, *call.args):
            ast.copy_location(node, anchor)
    body.insert(index, statement)


def _policy_failure(problems: list[tuple[int | None, str]], lines: list[str]) -> CompileFailure:
    seen: list[tuple[int | None, str]] = []
    for problem in sorted(problems, key=lambda p: p[0] or 0):
        if problem not in seen:
            seen.append(problem)
    parts = []
    for line, info in seen[:_MAX_REPORTED]:
        where, _ = _quote(line, lines)
        parts.append(f"{info} ({where})" if where else info)
    if len(seen) > _MAX_REPORTED:
        parts.append(f"and {len(seen) - _MAX_REPORTED} more")
    message = "; ".join(parts)
    first_line = seen[0][0]
    _, text = _quote(first_line, lines)
    detail = "\n".join(f"  line {line}: {info}" for line, info in seen) + f"\nPolicyViolation: {message}"
    return CompileFailure(type="PolicyViolation", message=message, line=first_line, source_line=text, detail=detail)


@functools.cache
def _transformer_class() -> type[Any]:
    """Build the transformer class on first use (RestrictedPython is imported lazily)."""
    from RestrictedPython.transformer import INSPECT_ATTRIBUTES, RestrictingNodeTransformer, copy_locations

    denied_attributes = DENIED_ATTRIBUTES | INSPECT_ATTRIBUTES
    in_place_ops = {
        ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/=", ast.FloorDiv: "//=", ast.Mod: "%=",
        ast.Pow: "**=", ast.LShift: "<<=", ast.RShift: ">>=", ast.BitOr: "|=", ast.BitXor: "^=",
        ast.BitAnd: "&=", ast.MatMult: "@=",
    }  # fmt: skip

    def private(name: str) -> bool:
        return is_private_name(name)

    class _SandboxTransformer(MatchRewriter, RestrictingNodeTransformer):  # match statements: _match_rewrite.py
        def __init__(self, internal_names: list[ast.Name], star_imports: set[int]) -> None:
            super().__init__()
            self.init_match_rewriter(denied_attributes)
            self.problems: list[tuple[int | None, str]] = []
            self._internal = {id(n) for n in internal_names}
            self._star_imports = star_imports
            self.getters: dict[str, None] = {}  # attribute names read through getters, in order

        def error(self, node: ast.AST, info: str) -> None:
            super().error(node, info)
            self.problems.append((getattr(node, "lineno", None), info.rstrip(".")))

        def check_name(self, node: ast.AST, name: str | None, allow_magic_methods: bool = False) -> None:
            if name is None:
                return
            if name.startswith("_") and name != "_":
                if allow_magic_methods and name in ALLOWED_DUNDER_METHODS:
                    return
                if private(name):
                    return
                reserved = 'names starting with "__" or starting and ending with "_" are reserved'
                self.error(node, f'name "{name}" is not allowed: {reserved}')
            elif name.endswith("__roles__"):
                self.error(node, f'name "{name}" is not allowed')
            elif name in ("print", "builtins", "breakpoint"):
                self.error(node, f'"{name}" is a reserved name')

        # names -- `print` stays the builtin (writes to sys.stdout); no PrintCollector
        def visit_Name(self, node: ast.Name) -> ast.AST:
            if id(node) in self._internal:
                return node
            if node.id in ALLOWED_DUNDER_METHODS:  # `__rmul__ = __mul__` in a class body
                return node
            if isinstance(node.ctx, ast.Load):
                if node.id == "__name__":
                    return node
                if node.id in ("print", "printed"):
                    return node
            self.check_name(node, node.id)
            return node

        def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
            attr = node.attr
            if attr.startswith("_") and attr != "_" and not private(attr):
                if not (isinstance(node.ctx, ast.Load) and attr in ALLOWED_UNDERSCORE_ATTRIBUTES):
                    self.error(node, f'attribute "{attr}" is not allowed: names starting with "__" are reserved')
            elif attr in denied_attributes:
                self.error(node, f'attribute "{attr}" is not allowed in sandboxed code')
            node = self.node_contents_visit(node)
            if isinstance(node.ctx, ast.Load):
                getter = attribute_getter_name(attr)
                if getter is not None:  # `obj.x` -> `_codeact_attr_x_(obj)`: see guards.attribute_getter_name
                    self.getters[attr] = None
                    new: ast.expr = ast.Call(func=ast.Name(getter, ast.Load()), args=[node.value], keywords=[])
                else:
                    new = ast.Call(
                        func=ast.Name("_getattr_", ast.Load()), args=[node.value, ast.Constant(attr)], keywords=[]
                    )
                copy_locations(new, node)
                return new
            new_value = ast.Call(func=ast.Name("_write_", ast.Load()), args=[node.value], keywords=[])
            copy_locations(new_value, node.value)
            node.value = new_value
            return node

        # calls: no `_apply_` wrapping (argument unpacking is not restricted here)
        def visit_Call(self, node: ast.Call) -> ast.AST:
            if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
                self.error(node, f"{node.func.id}() is not allowed in sandboxed code")
            return self.node_contents_visit(node)

        # unpacking stays native: iteration is not restricted, so the guarded variants add only cost
        def guard_iter(self, node: Any) -> Any:
            node = self.node_contents_visit(node)
            new_iter = ast.Call(func=ast.Name("_getiter_", ast.Load()), args=[node.iter], keywords=[])
            copy_locations(new_iter, node.iter)
            node.iter = new_iter
            return node

        def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
            if node.is_async:
                return self.node_contents_visit(node)
            result: ast.AST = self.guard_iter(node)
            return result

        def visit_Assign(self, node: ast.Assign) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_With(self, node: ast.With) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
            for name in node.names:
                self.check_name(node, name)
            return node

        def visit_Global(self, node: ast.Global) -> ast.AST:
            for name in node.names:
                self.check_name(node, name)
            return node

        def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
            op = in_place_ops[type(node.op)]
            target = node.target
            if isinstance(target, ast.Name):  # a local rebinding: native in-place op
                return self.node_contents_visit(node)
            if isinstance(target, ast.Attribute):
                if (target.attr.startswith("_") and not private(target.attr)) or target.attr in denied_attributes:
                    self.error(node, f'attribute "{target.attr}" is not allowed in sandboxed code')
                obj = self.visit(target.value)
                value = self.visit(node.value)
                call = ast.Call(
                    func=ast.Name("_inplaceattr_", ast.Load()),
                    args=[obj, ast.Constant(target.attr), ast.Constant(op), value],
                    keywords=[],
                )
            elif isinstance(target, ast.Subscript):
                obj = self.visit(target.value)
                key = self.visit(target.slice)  # a Slice node compiles to a slice object anywhere
                value = self.visit(node.value)
                call = ast.Call(
                    func=ast.Name("_inplaceitem_", ast.Load()),
                    args=[obj, key, ast.Constant(op), value],
                    keywords=[],
                )
            else:  # pragma: no cover - the grammar allows only the three target kinds
                self.not_allowed(node)
                return node
            new = ast.Expr(value=call)
            ast.copy_location(new, node)
            ast.copy_location(call, node)
            ast.fix_missing_locations(new)
            return new

        # async: allowed, with the same checks as the sync counterparts
        def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
            self.check_name(node, node.name, allow_magic_methods=True)
            self.check_function_argument_names(node)
            return self.node_contents_visit(node)

        def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
            self.check_name(node, node.name, allow_magic_methods=True)
            self.check_function_argument_names(node)
            return self.node_contents_visit(node)

        def check_function_argument_names(self, node: Any) -> None:
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    self.check_name(node, arg.arg)

        def visit_Await(self, node: ast.Await) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_AsyncFor(self, node: ast.AsyncFor) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_AsyncWith(self, node: ast.AsyncWith) -> ast.AST:
            return self.node_contents_visit(node)

        # imports: `from m import *` binds the module's public names through the runtime's guard
        def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
            if not any(alias.name == "*" for alias in node.names):
                return self.check_import_names(node)
            if id(node) not in self._star_imports:
                self.error(node, "import * only allowed at module level")
                return node
            if node.level:
                self.error(node, "relative imports are not allowed in sandboxed code")
                return node
            call = ast.Call(
                func=ast.Name(STAR_IMPORT_HELPER, ast.Load()), args=[ast.Constant(node.module)], keywords=[]
            )
            new = ast.Expr(value=call)
            for child in (new, call, call.func, call.args[0]):
                ast.copy_location(child, node)
            return new

        # exception groups: the handlers are checked like `except` handlers
        def visit_TryStar(self, node: ast.AST) -> ast.AST:
            return self.node_contents_visit(node)

        def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
            # Stock RestrictedPython re-parses a template here, which drops class keywords
            # (`class C(Base, flag=True)`) and the user's line numbers: add the keyword in place.
            self.check_name(node, node.name)
            node = self.node_contents_visit(node)
            if any(keyword.arg == "metaclass" for keyword in node.keywords):
                self.error(node, 'the keyword argument "metaclass" is not allowed')
            factory = ast.keyword(arg="metaclass", value=ast.Name("__metaclass__", ast.Load()))
            for child in (factory, factory.value):
                ast.copy_location(child, node)
            node.keywords.append(factory)
            return node

    return _SandboxTransformer
