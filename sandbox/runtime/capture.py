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
reason. Names starting with ``_``, builtins and the names in ``baseline`` (toolkit proxies, runtime
helpers) are skipped without a report.
"""

from __future__ import annotations

import ast
import builtins
import sys
import types
from collections.abc import Collection, Mapping
from typing import Any, Final

from sandbox.runtime import codec
from sandbox.runtime.guards import SANDBOX_MODULE_NAME

__all__ = ["SOURCE_TAG", "capture", "definition_sources", "split_restorable"]

SOURCE_TAG: Final = "source"
"""``$type`` of a captured function or class definition."""

_REPR_CHARS: Final = 80
_BUILTIN_IDS: Final = frozenset(id(value) for value in vars(builtins).values())


def capture(
    namespace: Mapping[str, Any],
    *,
    source_defs: Mapping[str, str],
    baseline: Collection[str] = (),
    max_var_bytes: int = 1 << 20,
    max_total_bytes: int = 8 << 20,
) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Encode the variables of a namespace.

    Args:
        namespace: The sandbox namespace after a round (not changed).
        source_defs: Top-level definition name -> source, for every ``def``/``async def``/``class``
            the namespace has executed (all rounds and the restored prelude; the runtime accumulates
            ``definition_sources`` of each). A function or class whose name is not here (lambda,
            nested definition, alias) is reported as uncaptured.
        baseline: Names never captured nor reported (toolkit proxies, runtime helpers).
        max_var_bytes: Per-variable cap on the encoded size (compact JSON bytes).
        max_total_bytes: Cap on the total encoded size of all captured variables.

    Returns:
        ``(variables, uncaptured)``: name -> codec-encoded value (definitions and imports as source
        tags), in namespace order; and ``[{"name", "type", "reason"}]`` for what was left out.
    """
    skip = frozenset(baseline)
    variables: dict[str, Any] = {}
    uncaptured: list[dict[str, str]] = []
    total = 0
    for name, value in list(namespace.items()):
        if name.startswith("_") or name in skip or _is_builtin(name, value):
            continue
        try:
            encoded, size = _capture_one(name, value, source_defs, max_var_bytes)
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
            uncaptured.append(_missed(name, value, exc.reason))
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


def _is_builtin(name: str, value: Any) -> bool:
    return (hasattr(builtins, name) and getattr(builtins, name) is value) or (
        id(value) in _BUILTIN_IDS and isinstance(value, (types.BuiltinFunctionType, type))
    )


def _capture_one(name: str, value: Any, source_defs: Mapping[str, str], max_bytes: int) -> tuple[Any, int]:
    if isinstance(value, types.ModuleType):
        return _source_tag("import", _module_import(name, value.__name__), max_bytes)
    definition = _definition(name, value, source_defs)
    if definition is not None:
        return _source_tag(*definition, max_bytes)
    try:
        return codec.encode_sized(value, max_bytes=max_bytes)
    except codec.TooLarge:
        raise
    except codec.Unencodable:
        statement = _name_import(name, value)
        if statement is None:
            raise
        return _source_tag("import", statement, max_bytes)


def _source_tag(kind: str, source: str, max_bytes: int) -> tuple[dict[str, str], int]:
    tagged = {codec.TAG: SOURCE_TAG, "kind": kind, "v": source}
    size = len(source.encode("utf-8")) + 40
    if size > max_bytes:
        raise codec.TooLarge(size, max_bytes)
    return tagged, size


def _module_import(name: str, module: str) -> str:
    return f"import {module}" if name == module else f"import {module} as {name}"


def _name_import(name: str, value: Any) -> str | None:
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
        module = sys.modules.get(candidate)
        for attr in attrs:
            if not attr.startswith("_") and module is not None and getattr(module, attr, None) is value:
                return (
                    f"from {candidate} import {attr}" if attr == name else f"from {candidate} import {attr} as {name}"
                )
    return None


def _definition(name: str, value: Any, source_defs: Mapping[str, str]) -> tuple[str, str] | None:
    """``(kind, source)`` for a function or class the code defined at top level, ``None`` otherwise.

    Raises ``Unencodable`` for functions and classes of the code that cannot be kept as source.
    """
    is_class = isinstance(value, type)
    is_function = isinstance(value, (types.FunctionType, types.MethodType)) or (
        callable(value) and hasattr(value, "__wrapped__") and hasattr(value, "__qualname__")
    )
    if not (is_class or is_function) or getattr(value, "__module__", None) != SANDBOX_MODULE_NAME:
        return None
    qualname = getattr(value, "__qualname__", None)
    if qualname == "<lambda>":
        raise codec.Unencodable("a lambda cannot be captured; define it with def to keep it across rounds")
    source = source_defs.get(name)
    if source is None or qualname != name:
        what = "class" if is_class else "function"
        label = f"{what} {qualname!r}" if isinstance(qualname, str) else what
        raise codec.Unencodable(
            f"{label} has no top-level definition named {name!r} in the code (nested or alias); "
            "define it at top level with def/class to keep it across rounds"
        )
    return ("class" if is_class else "function"), source


def _missed(name: str, value: Any, reason: str) -> dict[str, str]:
    kind = type(value)
    type_name = getattr(kind, "__qualname__", None) or kind.__name__
    if not reason.startswith(("exceeds", "a lambda")) and "no top-level definition" not in reason:
        reason = f"{reason}: {_short_repr(value)}"
    return {"name": name, "type": str(type_name), "reason": reason}


def _short_repr(value: Any) -> str:
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


def definition_sources(source: str) -> dict[str, str]:
    """The top-level ``def``/``async def``/``class`` statements of ``source``, decorators included.

    Args:
        source: Python source (a round's code or a prelude).

    Returns:
        Name -> exact source text of its (last) top-level definition. Empty when ``source`` does
        not parse (the compile step reports that).
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    lines = source.splitlines(keepends=True)
    result: dict[str, str] = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        end = node.end_lineno or node.lineno
        result.pop(node.name, None)  # a redefinition moves to its new position
        result[node.name] = "".join(lines[start - 1 : end]).rstrip() + "\n"
    return result


def split_restorable(variables: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """Split captured variables into data and a prelude of definitions.

    Restore order for the runtime: ``codec.decode`` the data into the namespace, run the prelude
    (compiled on the host with ``sandbox.policy.compile_code``), then decode the data values that
    hold dataclass/enum/namedtuple tags again with the namespace's classes as the registry.

    Args:
        variables: Name -> codec-encoded value, as ``capture`` returns them.

    Returns:
        ``(data, prelude)``: the non-definition variables (still encoded) and the prelude: the
        imports (each in ``try``/``except ImportError``), then the definitions' sources in their
        original order (``""`` when there are none).
    """
    data: dict[str, Any] = {}
    imports: list[str] = []
    parts: list[str] = []
    for name, value in variables.items():
        if type(value) is dict and value.get(codec.TAG) == SOURCE_TAG and type(value.get("v")) is str:
            source = value["v"].strip()
            if value.get("kind") == "import":
                # one failing import (a narrower policy now) must not lose the definitions after it
                imports.append(f"try:\n    {source}\nexcept ImportError:\n    pass\n")
            else:
                parts.append(source + "\n")
        else:
            data[name] = value
    return data, "".join(imports) + ("\n" if imports and parts else "") + "\n\n".join(parts)
