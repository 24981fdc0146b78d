"""Type checks and coercion of parsed YAML, with ai4j's codes and JSON-path-like locations.

The expected shape is derived from the pydantic models in :mod:`codeact.engine.blueprint.models`, so the
models stay the one description of the format. Coercion follows ai4j's loader: booleans accept
``true``/``false`` strings, numbers accept numeric strings, integers accept ``3`` and ``"3"`` but
not ``1.5``; scalars in string fields become strings. Unknown keys are dropped and recorded.
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Union

from pydantic import BaseModel

from codeact.engine.errors import BlueprintLoadError

__all__ = ["Coerced", "block_at", "coerce_document", "field_block", "known_keys"]

_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_FLOAT_RE = re.compile(r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
_INT32 = (-(2**31), 2**31 - 1)
_PATH_SEGMENT = re.compile(r"\.([^.\[]+)|\[([0-9]+)\]")


@dataclass(frozen=True)
class _Scalar:
    kind: str  # "str" | "bool" | "number" | "integer"


@dataclass(frozen=True)
class _OpenMap:
    pass


@dataclass(frozen=True)
class _Block:
    model: type[BaseModel]


@dataclass(frozen=True)
class _List:
    item: _Node


@dataclass(frozen=True)
class _Named:
    value: _Node


_Node = _Scalar | _OpenMap | _Block | _List | _Named


@dataclass(frozen=True, kw_only=True)
class Coerced:
    """The document with checked types, plus the JSON paths of the keys that were dropped."""

    data: dict[str, Any]
    unknown: tuple[str, ...]


def _strip_optional(annotation: Any) -> Any:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _strip_optional(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        if len(args) == 1:
            return _strip_optional(args[0])
    return annotation


def _node_for(annotation: Any) -> _Node:
    annotation = _strip_optional(annotation)
    simple = {str: "str", bool: "bool", float: "number", int: "integer"}
    if annotation in simple:
        return _Scalar(simple[annotation])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _Block(annotation)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list:
        return _List(_node_for(args[0]))
    if origin is dict:
        value = _strip_optional(args[1])
        if isinstance(value, type) and issubclass(value, BaseModel):
            return _Named(_Block(value))
        return _OpenMap()
    raise TypeError(f"unsupported blueprint field type {annotation!r}")  # a programming error in models.py


@functools.cache
def _fields(model: type[BaseModel], codeact: bool) -> dict[str, _Node]:
    """YAML key -> expected node for the model's file-settable fields in one version."""
    only: frozenset[str] = getattr(model, "codeact_only", frozenset())
    result: dict[str, _Node] = {}
    for name, info in model.model_fields.items():
        if info.exclude:
            continue  # loader-filled metadata, never read from a file
        key = info.alias or name
        if key in only and not codeact:
            continue
        result[key] = _node_for(info.annotation)
    return result


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) <= 40 else "a string"
    return f"a {type(value).__name__}"


def _fail(code: str, path: str, expected: str, value: Any) -> BlueprintLoadError:
    return BlueprintLoadError(f"{path} must be {expected}, got {_kind(value)}.", code=code, path=path)


def _scalar(kind: str, value: Any, path: str) -> Any:
    if kind == "str":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float | _dt.date):
            return str(value)
        raise _fail("blueprint.type.string", path, "a string", value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise _fail("blueprint.type.boolean", path, "a boolean (true or false)", value)
    if kind == "number":
        number: float | None = None
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str) and _FLOAT_RE.match(value.strip()):
            number = float(value.strip())
        if number is None or not math.isfinite(number):
            raise _fail("blueprint.type.number", path, "a number", value)
        return number
    integer: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        integer = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        integer = int(value)
    elif isinstance(value, str) and _INT_RE.match(value.strip()):
        integer = int(value.strip())
    if integer is None or not _INT32[0] <= integer <= _INT32[1]:
        raise _fail("blueprint.type.integer", path, "an integer", value)
    return integer


def _string_keys(value: dict[Any, Any], path: str) -> dict[str, Any]:
    for key in value:
        if not isinstance(key, str):
            raise BlueprintLoadError(
                f"{path} contains a non-string key {key!r}; quote the key to make it a string.",
                code="blueprint.type.key",
                path=path,
            )
    return value


def _open_value(value: Any) -> Any:
    """Deep-copy free-form data (options, config, variables); nested scalar keys become strings."""
    if isinstance(value, dict):
        return {
            (("true" if key else "false") if isinstance(key, bool) else str(key)): _open_value(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_open_value(item) for item in value]
    if isinstance(value, set | frozenset):
        return sorted((_open_value(item) for item in value), key=repr)
    return value


class _Walker:
    def __init__(self, *, codeact: bool) -> None:
        self.codeact = codeact
        self.unknown: list[str] = []

    def node(self, node: _Node, value: Any, path: str) -> Any:
        if value is None:
            return None
        if isinstance(node, _Scalar):
            return _scalar(node.kind, value, path)
        if isinstance(node, _OpenMap):
            if not isinstance(value, dict):
                raise _fail("blueprint.type.map", path, "a map", value)
            return _open_value(_string_keys(value, path))
        if isinstance(node, _List):
            if not isinstance(value, list):
                raise _fail("blueprint.type.list", path, "a list", value)
            return [self.node(node.item, item, f"{path}[{index}]") for index, item in enumerate(value)]
        if isinstance(node, _Named):
            if not isinstance(value, dict):
                raise _fail("blueprint.type.map", path, "a map", value)
            return {
                key: self.node(node.value, item, f"{path}.{key}") for key, item in _string_keys(value, path).items()
            }
        return self.block(node.model, value, path)

    def block(self, model: type[BaseModel], value: Any, path: str, *, top: bool = False) -> dict[str, Any]:
        shorthand: str | None = getattr(model, "list_shorthand", None)
        if shorthand is not None and isinstance(value, list):  # ``knowledge: [...]`` is ``{sources: [...]}``
            value = {shorthand: value}
        if not isinstance(value, dict):
            raise _fail("blueprint.type.map", path, "a map", value)
        fields = _fields(model, self.codeact)
        result: dict[str, Any] = {}
        for key, item in _string_keys(value, path).items():
            child_path = f"{path}.{key}"
            if key in fields:
                result[key] = self.node(fields[key], item, child_path)
            elif top or self.codeact or getattr(model, "fail_closed", False):
                # ai4j reports unknown keys at the top level only, except where a key decides what
                # the model may do (a grant, the sandbox): there an ignored key is never silent.
                self.unknown.append(child_path)
        return result


def coerce_document(document: Any, model: type[BaseModel], *, codeact: bool) -> Coerced:
    """Check and coerce a parsed YAML document against ``model``.

    Args:
        document: What ``yaml.safe_load`` returned (not None).
        model: The top-level model (:class:`~codeact.engine.blueprint.models.Blueprint`).
        codeact: Whether ``codeact.agent/v1`` fields are known (else they are unknown fields).

    Returns:
        The coerced data (explicit nulls kept, absent keys absent) and the unknown keys' paths.

    Raises:
        BlueprintLoadError: ``blueprint.type.*`` with the location of the first bad value.
    """
    walker = _Walker(codeact=codeact)
    data = walker.block(model, document, "$", top=True)
    return Coerced(data=data, unknown=tuple(walker.unknown))


def block_at(model: type[BaseModel], path: str, *, codeact: bool) -> type[BaseModel] | None:
    """The block model of the mapping holding ``path`` (``$.toolkits[0].aproval`` -> ``ToolkitEntry``), or None."""
    segments = _PATH_SEGMENT.findall(path[1:] if path.startswith("$") else path)
    node: _Node = _Block(model)
    for _key, _index in segments[:-1]:
        if isinstance(node, _Block):
            child = _fields(node.model, codeact).get(_key)
            if child is None:
                return None
            node = child
        elif isinstance(node, _List | _Named):
            node = node.item if isinstance(node, _List) else node.value
        else:
            return None
    return node.model if isinstance(node, _Block) else None


def field_block(model: type[BaseModel], key: str) -> type[BaseModel] | None:
    """The block model a field of ``model`` holds, through lists and named maps (``toolkits`` -> ``ToolkitEntry``)."""
    node: _Node | None = _fields(model, True).get(key)
    while isinstance(node, _List | _Named):
        node = node.item if isinstance(node, _List) else node.value
    return node.model if isinstance(node, _Block) else None


def known_keys(model: type[BaseModel], path: str, *, codeact: bool) -> tuple[str, ...]:
    """The keys the mapping holding ``path`` (``$.workflow.maxTurn``) accepts, in the model's order.

    Used for the "did you mean" of an unknown field; () when ``path`` does not lead into a block.
    """
    block = block_at(model, path, codeact=codeact)
    return tuple(_fields(block, codeact)) if block is not None else ()
