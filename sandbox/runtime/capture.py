"""Variable capture: what survives a round, as codec-encoded JSON (ARCHITECTURE §6).

Standard library only (runs inside the sandbox). After each round the runtime calls ``capture`` on
the namespace. Data goes through ``codec.encode``; functions and classes the code defined are kept as
their SOURCE (``{"$type": "source", "kind": "function" | "class", "v": "<def ...>"}``) and re-defined
on restore, so ``def helper(x): ...`` from round 1 is still callable in round 5, also after the
sandbox was replaced. Modules (``import json``) and names imported from modules (``from dataclasses
import dataclass``) are not captured as values: they are kept as the import statement
(``{"$type": "source", "kind": "import", "v": "from dataclasses import dataclass"}``), so restored
definitions and later rounds can still use them (the runtime starts every round from a fresh
namespace). ``split_restorable`` turns captured variables back into data plus a prelude the host
compiles under the same policy (imports first, each guarded so a narrower policy loses only it).

Nothing is silently dropped: values that cannot be captured are listed in ``uncaptured`` with a
reason, and a value the codec cannot carry (not a callable) is kept as its ``repr()`` string, so the
next round can still read it (the reason says so). Names starting with ``_``, builtins and the
names in ``baseline`` (toolkit proxies, runtime helpers) are skipped without a report.
"""

from __future__ import annotations

import builtins
import sys
import types

from codeact.sandbox.runtime import codec
from codeact.sandbox.runtime._codec_types import JsonObject, JsonValue
from codeact.sandbox.runtime.guards import SANDBOX_MODULE_NAME

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import ast
    from collections.abc import Collection, Mapping, Sequence
    from typing import Final

__all__ = ["SOURCE_TAG", "Definition", "capture", "collect_definitions", "definition_sources", "split_restorable"]

SOURCE_TAG: Final = "source"
"""``$type`` of a captured function or class definition."""

_REPR_CHARS: Final = 80
_KEPT_REPR_CHARS: Final = 4000  # the repr kept in place of a value the codec cannot carry
_ADDRESS: Final = r" at 0x[0-9A-Fa-f]+"
_BUILTIN_IDS: Final = frozenset(id(value) for value in vars(builtins).values())


REPR_NOTE: Final = "; the next round has its repr() as a str instead"
"""Ends the reason of a value kept as its repr() string."""
LIVE_REPR_NOTE: Final = "; a resumed session has its repr() as a str instead"
"""The same, for a value the warm namespace still holds: the next round of this run has the value itself."""


def capture(
    namespace: Mapping[str, object],
    *,
    source_defs: Mapping[str, str],
    baseline: Collection[str] = (),
    max_var_bytes: int = 1 << 20,
    max_total_bytes: int = 8 << 20,
    definitions: Sequence[Definition] = (),
    modules: Mapping[str, object] | None = None,
) -> tuple[dict[str, JsonValue], list[dict[str, str]]]:
    """Encode the variables of a namespace.

    Args:
        namespace: The sandbox namespace after a round (not changed).
        source_defs: Definition name -> source, for every ``def``/``async def``/``class`` the
            namespace has executed at module level (all rounds and the restored prelude; the runtime
            accumulates ``definition_sources`` of each).
        baseline: Names never captured nor reported (toolkit proxies, runtime helpers).
        max_var_bytes: Per-variable cap on the encoded size (compact JSON bytes).
        max_total_bytes: Cap on the total encoded size of all captured variables.
        definitions: The same definitions with their places (:func:`collect_definitions`), so a
            name defined twice (``if``/``else``) is kept as the definition that actually ran.
        modules: Module name -> the module object the code sees, where it differs from
            ``sys.modules`` (the runtime's recording views of ``time``, ``random``...).

    Returns:
        ``(variables, uncaptured)``: name -> codec-encoded value (definitions and imports as source
        tags), in namespace order; and ``[{"name", "type", "reason"}]`` for what was left out.
    """
    skip = frozenset(baseline)
    variables: dict[str, JsonValue] = {}
    uncaptured: list[dict[str, str]] = []
    total = 0
    context = _Context(namespace, source_defs, definitions, modules or {})
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in skip or _is_builtin(name, value):
            continue
        try:
            encoded, size = _capture_one(name, value, context, max_var_bytes)
        except codec.TooLarge as exc:
            uncaptured.append(
                _missed(
                    name,
                    value,
                    f"exceeds the {_size(max_var_bytes)} per-variable cap ({_size(exc.size)})",
                )
            )
            continue
        except codec.Unencodable as exc:
            # Never silently lost (seed 001 keeps such a value as text): the next round finds its
            # repr() as a str, and the note says so (the model reads it in the Evaluation). Not for
            # callables: a str where a function was would fail as "not callable" far from the cause;
            # their note says how to keep them (define them with def, call the factory again).
            kept = None if callable(value) else _as_repr(value, max_var_bytes, max_total_bytes - total)
            note = "" if kept is None else REPR_NOTE
            uncaptured.append(_missed(name, value, exc.reason, note))
            if kept is not None:
                variables[name], size = kept
                total += size
            continue
        if total + size > max_total_bytes:
            uncaptured.append(
                _missed(
                    name,
                    value,
                    f"exceeds the {_size(max_total_bytes)} per-session cap "
                    f"({_size(total + size)} with the variables before it)",
                )
            )
            continue
        total += size
        variables[name] = encoded
    return variables, uncaptured


class _Context:
    """What capturing one namespace looks up: its definitions and the modules the code sees."""

    def __init__(
        self,
        namespace: Mapping[str, object],
        source_defs: Mapping[str, str],
        definitions: Sequence[Definition],
        modules: Mapping[str, object],
    ) -> None:
        self.namespace = namespace
        self.source_defs = source_defs
        self.by_name: dict[str, list[Definition]] = {}
        for definition in definitions:
            self.by_name.setdefault(definition.name, []).append(definition)
        self.modules = modules


def _is_builtin(name: str, value: object) -> bool:
    return (hasattr(builtins, name) and getattr(builtins, name) is value) or (
        id(value) in _BUILTIN_IDS and isinstance(value, (types.BuiltinFunctionType, type))
    )


def _capture_one(name: str, value: object, context: _Context, max_bytes: int) -> tuple[JsonValue, int]:
    if isinstance(value, types.ModuleType):
        return _source_tag("import", _module_import(name, value.__name__), max_bytes)
    definition = _definition(name, value, context)
    if definition is not None:
        return _source_tag(*definition, max_bytes)
    try:
        return codec.encode_sized(value, max_bytes=max_bytes, data=True)
    except codec.TooLarge:
        raise
    except codec.Unencodable:
        statement = _name_import(name, value, context.modules)
        if statement is None:
            raise
        return _source_tag("import", statement, max_bytes)


def _source_tag(kind: str, source: str, max_bytes: int) -> tuple[JsonObject, int]:
    tagged: JsonObject = {codec.TAG: SOURCE_TAG, "kind": kind, "v": source}
    size = len(source.encode("utf-8")) + 40
    if size > max_bytes:
        raise codec.TooLarge(size, max_bytes)
    return tagged, size


def _module_import(name: str, module: str) -> str:
    return f"import {module}" if name == module else f"import {module} as {name}"


def _name_import(name: str, value: object, modules: Mapping[str, object]) -> str | None:
    """``from <module> import <attr> [as <name>]`` for a function, class or object of an imported module."""
    module_name = getattr(value, "__module__", None)
    if not isinstance(module_name, str) or module_name in (SANDBOX_MODULE_NAME, "builtins"):
        return None
    attrs = [a for a in (getattr(value, "__name__", None), name) if isinstance(a, str) and a.isidentifier()]
    top = module_name.partition(".")[0]
    # the shortest public path first: `asyncio.gather` rather than `asyncio.tasks.gather`,
    # `heapq.heappush` rather than `_heapq.heappush`
    for candidate in dict.fromkeys((top, top.lstrip("_"), module_name)):
        if not candidate or candidate.startswith("_"):
            continue
        for module in (modules.get(candidate), sys.modules.get(candidate)):
            if module is None:
                continue
            for attr in attrs:
                if not attr.startswith("_") and getattr(module, attr, None) is value:
                    return (
                        f"from {candidate} import {attr}"
                        if attr == name
                        else f"from {candidate} import {attr} as {name}"
                    )
    return None


def _definition(name: str, value: object, context: _Context) -> tuple[str, str] | None:
    """``(kind, source)`` for a function or class the code defined, ``None`` for anything else.

    Raises ``Unencodable`` (with what to do instead) for functions and classes of the code that
    cannot be kept as source.
    """
    is_class = isinstance(value, type)
    is_function = isinstance(value, (types.FunctionType, types.MethodType)) or (
        callable(value) and hasattr(value, "__wrapped__") and hasattr(value, "__qualname__")
    )
    if not (is_class or is_function) or getattr(value, "__module__", None) != SANDBOX_MODULE_NAME:
        return None
    qualname = getattr(value, "__qualname__", None)
    what = "class" if is_class else "function"
    if qualname == "<lambda>":
        raise codec.Unencodable(
            f"a lambda cannot be stored; write it as a function (def {name}(...): return ...) to keep it"
        )
    if isinstance(value, types.MethodType):
        owner = type(getattr(value, "__self__", None)).__name__
        method = getattr(value, "__name__", "method")
        raise codec.Unencodable(
            f"a bound method ({owner}.{method}) cannot be stored; keep the object and call .{method}() on it"
        )
    candidates = context.by_name.get(name, [])
    picked = _locate(value, candidates) if candidates else None
    if picked is not None and (qualname == name or picked.decorated):
        return picked.kind, picked.source
    source = context.source_defs.get(name)
    if picked is None and source is not None and qualname == name:
        return what, source
    if isinstance(qualname, str) and ".<locals>." in qualname:
        outer = qualname.partition(".<locals>.")[0]
        raise codec.Unencodable(
            f"{what} {qualname!r} was made inside {outer}() and uses its local variables (a closure), which "
            f"cannot be stored; keep {outer} and call it again in the next round"
        )
    if (
        isinstance(qualname, str)
        and qualname.isidentifier()
        and qualname != name
        and context.namespace.get(qualname) is value
        and (qualname in context.by_name or qualname in context.source_defs)
    ):
        return "alias", f"{name} = {qualname}"
    label = f"{what} {qualname!r}" if isinstance(qualname, str) else what
    raise codec.Unencodable(
        f"{label} has no def/class statement the code ran outside a function, so it cannot be stored; "
        f"define it with {'class' if is_class else 'def'} {name} in the code (not inside a function) to keep it"
    )


def _locate(value: object, candidates: Sequence[Definition]) -> Definition | None:
    """The definition that created ``value``: matched by its code's place, else the last one."""
    if len(candidates) == 1:
        return candidates[0]
    for filename, line in _code_places(value):
        for definition in reversed(candidates):
            if definition.filename == filename and definition.start <= line <= definition.end:
                return definition
    return candidates[-1]


def _code_places(value: object) -> list[tuple[str, int]]:
    """``(filename, first line)`` of the code objects a function or class carries."""
    places: list[tuple[str, int]] = []
    seen = 0
    current = value
    while current is not None and seen < 8:  # functools.wraps chains
        code = getattr(current, "__code__", None)
        if isinstance(code, types.CodeType):
            places.append((code.co_filename, code.co_firstlineno))
        current = getattr(current, "__wrapped__", None)
        seen += 1
    if isinstance(value, type):
        for member in vars(value).values():
            target = getattr(member, "__func__", None) or getattr(member, "fget", None) or member
            code = getattr(target, "__code__", None)
            if isinstance(code, types.CodeType):
                places.append((code.co_filename, code.co_firstlineno))
    return places


def _missed(name: str, value: object, reason: str, note: str = "") -> dict[str, str]:
    kind = type(value)
    type_name = getattr(kind, "__qualname__", None) or kind.__name__
    if reason.startswith("cannot encode object of type") or reason == "circular reference":
        reason = f"{_advice(name, value, reason)}: {_short_repr(value)}"
    return {"name": name, "type": str(type_name), "reason": reason + note}


def _as_repr(value: object, max_var_bytes: int, room: int) -> tuple[str, int] | None:
    """``(repr(value), its encoded size)``, at most ``_KEPT_REPR_CHARS`` long; None when it does not fit."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the object's own __repr__ is sandboxed code
        text = f"<{type(value).__name__} object (repr failed)>"
    if not isinstance(text, str):  # pragma: no cover - repr() guarantees str
        text = f"<{type(value).__name__} object>"
    # `<Conn object at 0x7f..>`: the address differs from process to process, and replay compares the
    # variables a round leaves; it tells the model nothing either.
    if " at 0x" in text:
        import re  # here: the runtime does not import re to start; re caches the pattern

        text = re.sub(_ADDRESS, "", text)
    if len(text) > _KEPT_REPR_CHARS:
        text = text[: _KEPT_REPR_CHARS - 3] + "..."
    try:
        encoded, size = codec.encode_sized(text, max_bytes=min(max_var_bytes, room))
    except codec.Unencodable:  # TooLarge included: no room left under the caps
        return None
    return (encoded, size) if isinstance(encoded, str) else None


def _advice(name: str, value: object, reason: str) -> str:
    """Why a value the codec refused cannot be stored, said as what the code can do instead."""
    if reason == "circular reference":
        return "it contains itself (a circular reference), which cannot be stored; keep a copy without the cycle"
    if isinstance(value, (types.GeneratorType, types.AsyncGeneratorType)):
        return f"a generator cannot be stored; keep the list instead ({name} = list(...))"
    if isinstance(value, types.CoroutineType) or type(value).__name__ in ("Task", "Future"):
        return "a coroutine or task cannot be stored; await it in the round that starts it and keep its result"
    if hasattr(value, "readable") and hasattr(value, "close") and hasattr(value, "fileno"):
        return "an open file or stream cannot be stored; keep its path or its contents and open it again next round"
    refused = reason.partition("'")[2].rpartition("'")[0]  # "cannot encode object of type 'X'"
    if refused and refused != getattr(type(value), "__qualname__", None):
        inner = reason.removeprefix("cannot encode ")
        return (
            f"it holds an {inner}, which cannot be stored; keep only data in it (numbers, str, lists, dicts, "
            "dataclass instances)"
        )
    if type(value).__module__ == SANDBOX_MODULE_NAME:
        cls = type(value).__name__
        return (
            f"an instance of {cls}, a class the code defined, cannot be stored; make {cls} a @dataclass "
            "(its fields are stored) or keep its data in a dict"
        )
    if hasattr(value, "__next__"):
        return f"an iterator ({type(value).__name__}) cannot be stored; keep list(...) of it instead"
    if type(value).__name__ == "partial":
        return f"a functools.partial cannot be stored; define a function with def {name}(...) instead"
    return (
        f"a {type(value).__name__} object cannot be stored (only data, imports, and the functions and classes "
        "the code defines are kept); keep the data it holds (a dict, list, str or number) or create it again "
        "in each round"
    )


def _short_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - the object's own __repr__ is sandboxed code
        return f"<{type(value).__name__} object (repr failed)>"
    if not isinstance(text, str):  # pragma: no cover - repr() guarantees str
        return f"<{type(value).__name__} object>"
    text = " ".join(text.split())
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _size(n: int) -> str:
    if n >= 1 << 20:
        value, unit = n / (1 << 20), "MiB"
    elif n >= 1 << 10:
        value, unit = n / (1 << 10), "KiB"
    else:
        return f"{n} bytes"
    text = f"{value:.1f}".removesuffix(".0")
    return f"{text} {unit}"


class Definition:
    """One ``def``/``async def``/``class`` statement the code ran at module level.

    A plain class, not a dataclass or a ``NamedTuple``: those would make every runtime import
    dataclasses (and inspect) or typing to start.

    Attributes:
        name: The name it binds.
        kind: ``function`` or ``class``.
        source: Its source, decorators included, dedented to column 0 (ends with a newline).
        filename: The code object's filename (``<code>``, ``<prelude>``) it came from.
        start: First line (the first decorator's) in that code.
        end: Last line in that code.
        decorated: True when it has decorators (the bound value may be a wrapper).
    """

    __slots__ = ("decorated", "end", "filename", "kind", "name", "source", "start")

    def __init__(
        self,
        *,
        name: str,
        kind: str,
        source: str,
        filename: str = "",
        start: int = 0,
        end: int = 0,
        decorated: bool = False,
    ) -> None:
        self.name = name
        self.kind = kind
        self.source = source
        self.filename = filename
        self.start = start
        self.end = end
        self.decorated = decorated

    def __repr__(self) -> str:
        where = f"{self.filename}:{self.start}-{self.end}"
        return f"Definition(name={self.name!r}, kind={self.kind!r}, at {where!r})"


_BLOCK_FIELDS: Final = ("body", "handlers", "orelse", "finalbody", "cases")


def collect_definitions(source: str, *, filename: str = "") -> list[Definition]:
    """Every definition of ``source`` whose name Python binds at module level, in source order.

    Module level means the module's body and the bodies of ``try``/``except``/``else``/``finally``,
    ``if``, ``for``, ``while``, ``with`` and ``match`` blocks in it (the FIM frame runs the model's
    code inside ``try:``); the bodies of functions and classes are other scopes and are not walked.

    Args:
        source: Python source (a round's program or a prelude).
        filename: The filename its code object has, recorded on each definition.

    Returns:
        The definitions (empty when ``source`` does not parse: the compile step reports that).
    """
    if "def" not in source and "class" not in source:
        return []  # most rounds define nothing: no parse, and no import of re
    import re  # here: the runtime does not import re to start; re caches the pattern

    if not re.search(_MAY_DEFINE, source):
        return []
    key = (source, filename)
    cached = _DEFINITIONS_CACHE.get(key)
    if cached is not None:
        return list(cached)  # the restored prelude is the same round after round
    import ast  # here: a round that defines nothing (most) never parses, and a cold start skips ast

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    lines = source.splitlines(keepends=True)
    found: list[Definition] = []
    _walk(tree.body, lines, filename, found)
    if len(source) <= _CACHE_MAX_CHARS:
        if len(_DEFINITIONS_CACHE) >= _CACHE_SIZE:
            _DEFINITIONS_CACHE.pop(next(iter(_DEFINITIONS_CACHE)))
        _DEFINITIONS_CACHE[key] = tuple(found)
    return found


_MAY_DEFINE: Final = r"\b(?:def|class)\b"
_CACHE_SIZE: Final = 2
_CACHE_MAX_CHARS: Final = 512 * 1024
_DEFINITIONS_CACHE: dict[tuple[str, str], tuple[Definition, ...]] = {}


def _walk(
    body: list[ast.stmt],
    lines: list[str],
    filename: str,
    found: list[Definition],
    only: frozenset[str] | None = None,
) -> None:
    """Collect the definitions of ``body`` and its blocks (``only`` these names: inside a function)."""
    import ast  # loaded by collect_definitions: a dictionary look-up

    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if only is None or node.name in only:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                end = node.end_lineno or node.lineno
                found.append(
                    Definition(
                        name=node.name,
                        kind="class" if isinstance(node, ast.ClassDef) else "function",
                        source=_dedented(node, lines[start - 1 : end]),
                        filename=filename,
                        start=start,
                        end=end,
                        decorated=bool(node.decorator_list),
                    )
                )
            if not isinstance(node, ast.ClassDef):
                # `global helper` then `def helper(): ...` inside a function binds a module-level name
                declared = frozenset(n for g in _scope_statements(node.body, ast.Global) for n in g.names)
                if declared:
                    _walk(node.body, lines, filename, found, declared)
            continue
        for name in _BLOCK_FIELDS:
            block = getattr(node, name, None)
            if not block:
                continue
            for item in block:
                if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                    _walk(item.body, lines, filename, found, only)
            if isinstance(block[0], ast.stmt):
                _walk(block, lines, filename, found, only)


def _scope_statements(body: list[ast.stmt], kind: type[ast.Global]) -> list[ast.Global]:
    """The ``kind`` statements of one scope: its body and blocks, not nested functions or classes."""
    import ast  # loaded by collect_definitions: a dictionary look-up

    out: list[ast.Global] = []
    for node in body:
        if isinstance(node, kind):
            out.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for name in _BLOCK_FIELDS:
                block = getattr(node, name, None) or []
                for item in block:
                    if isinstance(item, (ast.ExceptHandler, ast.match_case)):
                        out.extend(_scope_statements(item.body, kind))
                if block and isinstance(block[0], ast.stmt):
                    out.extend(_scope_statements(block, kind))
    return out


def _dedented(node: ast.stmt, chunk: list[str]) -> str:
    """The statement's lines moved to column 0, exactly (a string spanning lines keeps its text)."""
    import ast  # loaded by collect_definitions: a dictionary look-up

    col = node.col_offset
    text = "".join(chunk).rstrip() + "\n"
    if col == 0:
        return text
    moved = "".join(line[col:] if line[:col].isspace() else line for line in chunk).rstrip() + "\n"
    if ('"""' not in text and "'''" not in text and "\\\n" not in text) or not any(
        isinstance(sub, (ast.Constant, ast.JoinedStr)) and (sub.end_lineno or sub.lineno) > sub.lineno
        for sub in ast.walk(node)
    ):
        return moved
    # A string spanning lines: moving its lines would change its text. Keep the moved text only if
    # it is the same program; otherwise regenerate the source from the tree (comments are lost).
    try:
        same = ast.dump(ast.parse(moved).body[0]) == ast.dump(node)
    except (SyntaxError, ValueError, IndexError):
        same = False
    return moved if same else ast.unparse(node).rstrip() + "\n"


def definition_sources(source: str) -> dict[str, str]:
    """Name -> source of the (last) module-level definition of each name in ``source``.

    Args:
        source: Python source (a round's code or a prelude).

    Returns:
        Name -> exact source text, decorators included, dedented (see :func:`collect_definitions`).
        Empty when ``source`` does not parse.
    """
    result: dict[str, str] = {}
    for definition in collect_definitions(source):
        result.pop(definition.name, None)  # a redefinition moves to its new position
        result[definition.name] = definition.source
    return result


def split_restorable(variables: Mapping[str, JsonValue]) -> tuple[dict[str, JsonValue], str]:
    """Split captured variables into data and a prelude of definitions.

    Restore order for the runtime: ``codec.decode`` the data into the namespace, run the prelude
    (compiled on the host with ``codeact.sandbox.policy.compile_code``), then decode the data values that
    hold dataclass/enum/namedtuple tags again with the namespace's classes as the registry.

    Args:
        variables: Name -> codec-encoded value, as ``capture`` returns them.

    Returns:
        ``(data, prelude)``: the non-definition variables (still encoded) and the prelude: the
        imports (each in ``try``/``except ImportError``), then the definitions' sources in their
        original order (``""`` when there are none).
    """
    data: dict[str, JsonValue] = {}
    imports: list[str] = []
    parts: list[str] = []
    aliases: list[str] = []
    for name, value in variables.items():
        if type(value) is dict and value.get(codec.TAG) == SOURCE_TAG and type(code := value.get("v")) is str:
            source = code.strip()
            kind = value.get("kind")
            if kind == "import":
                # one failing import (a narrower policy now) must not lose the definitions after it
                imports.append(f"try:\n    {source}\nexcept ImportError:\n    pass\n")
            elif kind == "alias":
                aliases.append(f"try:\n    {source}\nexcept NameError:\n    pass\n")
            else:
                parts.append(source + "\n")
        else:
            data[name] = value
    prelude = "".join(imports) + ("\n" if imports and parts else "") + "\n\n".join(parts)
    if aliases:
        prelude += ("\n" if prelude else "") + "".join(aliases)
    return data, prelude
