"""Type hints -> JSON schema, stub annotations and pydantic validators (and back, for dynamic toolkits)."""

from __future__ import annotations

import collections.abc
import datetime as _dt
import decimal
import enum
import types
import typing
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, Field

_SIMPLE_NAMES: dict[object, str] = {
    type(None): "None",
    _dt.datetime: "datetime",
    _dt.date: "date",
    _dt.time: "time",
    _dt.timedelta: "timedelta",
    decimal.Decimal: "Decimal",
    uuid.UUID: "str",
}
_ABC_NAMES: dict[object, str] = {
    collections.abc.Sequence: "list",
    collections.abc.MutableSequence: "list",
    collections.abc.Iterable: "list",
    collections.abc.Collection: "list",
    collections.abc.Mapping: "dict",
    collections.abc.MutableMapping: "dict",
    collections.abc.Set: "set",
    collections.abc.MutableSet: "set",
}


def render_annotation(tp: object) -> str:
    """Render a type hint the way the model should read it in a stub.

    Pydantic models and TypedDicts become ``dict`` (the sandbox passes plain dicts), enums become
    ``Literal[...]`` of their values, ``Optional[X]`` becomes ``X | None``.
    """
    if tp is None or tp is type(None):
        return "None"
    if tp is Any:
        return "Any"
    if isinstance(tp, list | tuple):  # Callable's parameter list
        return "[" + ", ".join(render_annotation(a) for a in tp) + "]"
    if not isinstance(tp, typing.Hashable):
        return repr(tp)
    if tp in _SIMPLE_NAMES:
        return _SIMPLE_NAMES[tp]
    origin = get_origin(tp)
    args = get_args(tp)
    if origin is typing.Annotated:
        return render_annotation(args[0])
    if origin is Union or origin is types.UnionType:
        return " | ".join(render_annotation(a) for a in args)
    if origin is Literal:
        return "Literal[" + ", ".join(repr(a.value if isinstance(a, enum.Enum) else a) for a in args) + "]"
    if origin is not None:
        name = _ABC_NAMES.get(origin) or getattr(origin, "__name__", str(origin))
        if not args:
            return str(name)
        rendered = ", ".join("..." if a is Ellipsis else render_annotation(a) for a in args)
        return f"{name}[{rendered}]"
    if isinstance(tp, type):
        if issubclass(tp, enum.Enum):
            return "Literal[" + ", ".join(repr(m.value) for m in tp) + "]"
        if issubclass(tp, BaseModel) or typing.is_typeddict(tp):
            return "dict"
        if tp in _ABC_NAMES:
            return _ABC_NAMES[tp]
        return tp.__name__
    return str(tp).replace("typing.", "")


_JSON_TYPES: dict[str, str] = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "object": "dict",
    "array": "list",
}


def annotation_from_schema(schema: Mapping[str, Any]) -> str:
    """Render a JSON schema as a Python annotation for a stub (best effort; unknown -> ``Any``)."""
    if "enum" in schema and isinstance(schema["enum"], list):
        return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(annotation_from_schema(s) for s in schema[key] if isinstance(s, Mapping)) or "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(_JSON_TYPES.get(str(k), "Any") for k in kind) or "Any"
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"list[{annotation_from_schema(schema['items'])}]"
    return _JSON_TYPES.get(str(kind), "Any")


_PY_TYPES: dict[str, object] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "null": type(None),
    "object": dict[str, Any],
    "array": list[Any],
}


def type_from_schema(schema: Mapping[str, Any]) -> object:
    """A Python type that validates (the top level of) a JSON schema; unknown -> ``Any``."""
    values = schema.get("enum")
    if isinstance(values, list) and values and all(isinstance(v, str | int | float | bool) for v in values):
        return Literal[tuple(values)]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            return _union([type_from_schema(s) for s in options if isinstance(s, Mapping)])
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union([_PY_TYPES.get(str(k), Any) for k in kind])
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return list[type_from_schema(schema["items"])]  # type: ignore[misc]
    return _PY_TYPES.get(str(kind), Any)


def _union(options: list[object]) -> object:
    if not options:
        return Any
    if len(options) == 1:
        return options[0]
    return Union[tuple(options)]  # noqa: UP007 -- built at run time from a list


def clean_schema(schema: Any) -> Any:
    """Drop pydantic's auto-generated ``title`` keys (never a property that happens to be named title)."""
    if isinstance(schema, list):
        return [clean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: clean_schema(sub) for name, sub in value.items()}
        else:
            out[key] = clean_schema(value)
    return out


class ArgumentsValidator:
    """Validates an arguments mapping against an operation's parameters with pydantic.

    Fields are stored under positional aliases so parameter names such as ``json`` or ``schema``
    never shadow ``BaseModel`` attributes.
    """

    def __init__(
        self, model_name: str, fields: Sequence[tuple[str, object, object, str]], *, omit_unset: bool = False
    ) -> None:
        """Build the model.

        Args:
            model_name: Used in pydantic's messages (not shown to the model).
            fields: ``(name, type, default or ..., description)`` in order.
            omit_unset: Leave parameters the caller did not pass out of the result (dynamic toolkits).
        """
        self._omit_unset = omit_unset
        definitions: dict[str, Any] = {}  # ``**`` into create_model, whose keywords mix fields and options
        self._names: list[tuple[str, str]] = []
        for index, (name, tp, default, description) in enumerate(fields):
            attr = f"p{index}"
            definitions[attr] = (tp, Field(default, alias=name, description=description or None))
            self._names.append((attr, name))
        self.model: type[BaseModel] = pydantic.create_model(
            model_name,
            __config__=ConfigDict(extra="forbid", populate_by_name=False, arbitrary_types_allowed=False),
            **definitions,
        )

    def json_schema(self) -> dict[str, Any]:
        """The arguments object's JSON schema (titles dropped)."""
        schema = clean_schema(self.model.model_json_schema(by_alias=True))
        schema.setdefault("required", [])
        schema["additionalProperties"] = False
        return dict(schema)

    def __call__(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """Validate; returns ``{name: value}`` for the parameters that were passed or defaulted."""
        instance = self.model.model_validate(arguments)
        if self._omit_unset:
            passed = instance.model_fields_set
            return {name: getattr(instance, attr) for attr, name in self._names if attr in passed}
        return {name: getattr(instance, attr) for attr, name in self._names}


def returns_schema(tp: Any) -> dict[str, Any] | None:  # a type form (pydantic's typing)
    """The JSON schema of a result type when it refers to structured types (``$ref`` into ``$defs``), else None."""
    if tp is Any or tp is None:
        return None
    try:
        wrapper = pydantic.create_model("Result", value=(tp, ...))
        schema = clean_schema(wrapper.model_json_schema())
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticInvalidForJsonSchema, TypeError):
        return None
    defs = schema.get("$defs")
    if not defs:
        return None
    return {**schema["properties"]["value"], "$defs": defs}


def field_errors(exc: pydantic.ValidationError) -> list[dict[str, str]]:
    """Pydantic's errors as JSON-able ``{"field", "message", "type"}`` dicts (input values left out)."""
    errors = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(part) for part in err.get("loc", ()))
        errors.append({"field": loc, "message": str(err.get("msg", "")), "type": str(err.get("type", ""))})
    return errors
