"""Structured parameter and return types in stubs: a pydantic model or TypedDict becomes a TypedDict stub.

``item: Item`` (a pydantic model with ``sku``, ``name``, ``qty``) is shown to the model as
``item: Item`` together with a ``class Item(TypedDict)`` listing its fields with their types,
defaults, bounds (``qty: int  # 1 <= qty <= 100``) and descriptions, instead of a bare ``dict``.
Types come from the operation's JSON schema (``$defs``), so dynamic toolkits that publish ``$defs``
get the same treatment. Bounded: types nested deeper than ``MAX_DEPTH`` levels, or past
``MAX_TYPES`` types in one prompt, are shown as ``dict``; a type shows at most ``MAX_FIELDS`` fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codeact.toolkits._constraints import constraint_text

__all__ = ["MAX_DEPTH", "MAX_FIELDS", "MAX_TYPES", "TypeCollector"]

MAX_DEPTH = 3
MAX_TYPES = 24
MAX_FIELDS = 30
_JSON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
    "object": "dict",
    "array": "list",
}


@dataclass
class TypeCollector:
    """Collects the TypedDict stubs the operations of one prompt refer to (dependencies first)."""

    types: list[dict[str, Any]] = field(default_factory=list)
    _names: dict[str, str] = field(default_factory=dict)  # rendered body key -> stub name
    _taken: set[str] = field(default_factory=set)

    def annotation(self, schema: Mapping[str, Any], defs: Mapping[str, Any], *, prefix: str, fallback: str) -> str:
        """The annotation of ``schema``: ``fallback`` unless the schema names a structured type."""
        if not _mentions_ref(schema):
            return fallback
        return self._render(schema, defs, prefix=prefix, depth=1, active={})

    def _render(
        self, schema: Mapping[str, Any], defs: Mapping[str, Any], *, prefix: str, depth: int, active: dict[str, str]
    ) -> str:
        ref = _ref_of(schema)
        if ref is not None:
            return self._declare(ref, defs, prefix=prefix, depth=depth, active=active)
        if "const" in schema:
            return f"Literal[{schema['const']!r}]"
        if isinstance(schema.get("enum"), list):
            return "Literal[" + ", ".join(repr(v) for v in schema["enum"]) + "]"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                parts = [self._render(o, defs, prefix=prefix, depth=depth, active=active) for o in options]
                return " | ".join(dict.fromkeys(parts))
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(_JSON_TYPES.get(str(k), "Any") for k in kind) or "Any"
        if kind == "array" and isinstance(schema.get("items"), Mapping):
            return f"list[{self._render(schema['items'], defs, prefix=prefix, depth=depth, active=active)}]"
        extra = schema.get("additionalProperties")
        if kind == "object" and isinstance(extra, Mapping) and extra:
            return f"dict[str, {self._render(extra, defs, prefix=prefix, depth=depth, active=active)}]"
        return _JSON_TYPES.get(str(kind), "Any")

    def _declare(self, ref: str, defs: Mapping[str, Any], *, prefix: str, depth: int, active: dict[str, str]) -> str:
        name = ref.rsplit("/", 1)[-1]
        if name in active:  # a recursive type refers to itself by name
            return active[name]
        target = defs.get(name)
        if not isinstance(target, Mapping) or depth > MAX_DEPTH or len(self.types) >= MAX_TYPES:
            return "dict"
        if isinstance(target.get("enum"), list) or "properties" not in target:
            return self._render(target, defs, prefix=prefix, depth=depth, active=active)
        stub = name if name.isidentifier() else "Model"
        active = {**active, name: stub}
        properties = target.get("properties") or {}
        required = set(target.get("required") or ())
        fields = []
        for fname, fschema in list(properties.items())[:MAX_FIELDS]:
            if not isinstance(fschema, Mapping):
                continue
            fields.append(
                {
                    "name": fname if fname.isidentifier() else repr(fname),
                    "annotation": self._render(fschema, defs, prefix=prefix, depth=depth + 1, active=active),
                    "required": fname in required,
                    "default": json.dumps(fschema["default"]) if "default" in fschema else None,
                    "bounds": constraint_text(fschema, fname),
                    "description": _one_line(str(fschema.get("description", ""))),
                }
            )
        body = {"fields": fields, "description": _one_line(str(target.get("description", "")))}
        key = json.dumps(body, sort_keys=True)
        known = self._names.get(f"{stub}:{key}")
        if known is not None:
            return known
        if stub in self._taken:  # two toolkits' different types of the same name
            stub = f"{prefix}_{stub}"
            n = 2
            while stub in self._taken:
                stub, n = f"{prefix}_{name}{n}", n + 1
        self._taken.add(stub)
        self._names[f"{name}:{key}"] = stub
        self.types.append({"name": stub, **body, "more": max(0, len(properties) - MAX_FIELDS)})
        return stub


def _ref_of(schema: Mapping[str, Any]) -> str | None:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return ref
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], Mapping):
        return _ref_of(all_of[0])
    return None


def _mentions_ref(value: Any) -> bool:
    if isinstance(value, Mapping):
        return "$ref" in value or any(_mentions_ref(v) for v in value.values())
    if isinstance(value, list):
        return any(_mentions_ref(v) for v in value)
    return False


def _one_line(text: str) -> str:
    return " ".join(text.split())
