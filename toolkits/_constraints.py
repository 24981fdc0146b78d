"""A value's bounds as the stub shows them: ``1 <= quantity <= 100``, ``at most 20 characters``.

They come from the JSON schema (pydantic's ``Field(ge=1, le=100)``, ``Annotated[int, Field(...)]``,
``constr``-like bounds, or a dynamic toolkit's own schema), so the model reads them before its first
call instead of learning them from a refusal. Written as Python's own chained comparison rather than
as ``Field(ge=1, le=100)``: a small model reads ``1 <= quantity <= 100`` as the check it is, where
``ge``/``le`` are pydantic's abbreviations it may not know (or may take for the default).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["constraint_text"]


def constraint_text(schema: Mapping[str, Any], subject: str) -> str:
    """The bounds ``schema`` puts on a value called ``subject``, as one line (``""`` when there are none).

    Args:
        schema: The value's JSON schema (``Optional[...]``'s null branch is skipped).
        subject: How the text names the value (the parameter or field name, ``each item``).

    Returns:
        The parts joined by ``"; "``: ``1 <= quantity <= 100``, ``a multiple of 5``, ``1 to 20 characters``,
        ``matches r'^[A-Z]{3}$'``, ``at most 5 items``, ``each item >= 0``.
    """
    schema = _not_null(schema)
    parts = [
        part
        for part in (
            _range(schema, subject),
            _multiple(schema),
            _size(schema, "minLength", "maxLength", "character"),
            _pattern(schema),
            _size(schema, "minItems", "maxItems", "item"),
            _size(schema, "minProperties", "maxProperties", "key"),
            "unique items" if schema.get("uniqueItems") is True else "",
        )
        if part
    ]
    items = schema.get("items")
    if isinstance(items, Mapping):
        inner = constraint_text(items, "each item")
        if inner:
            parts.append(inner if inner.startswith("each item") else f"each item: {inner}")
    return "; ".join(parts)


def _not_null(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """``X | None``'s ``X`` (the bounds are on it); any other schema as it is."""
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            real = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
            if len(real) == 1:
                return real[0]
    return schema


def _number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return repr(value)


def _range(schema: Mapping[str, Any], subject: str) -> str:
    low, low_op = _number(schema.get("exclusiveMinimum")), "<"
    if low is None:
        low, low_op = _number(schema.get("minimum")), "<="
    high, high_op = _number(schema.get("exclusiveMaximum")), "<"
    if high is None:
        high, high_op = _number(schema.get("maximum")), "<="
    if low is not None and high is not None:
        return f"{low} {low_op} {subject} {high_op} {high}"
    if low is not None:
        return f"{subject} {'>' if low_op == '<' else '>='} {low}"
    if high is not None:
        return f"{subject} {high_op} {high}"
    return ""


def _multiple(schema: Mapping[str, Any]) -> str:
    step = _number(schema.get("multipleOf"))
    return f"a multiple of {step}" if step is not None else ""


def _size(schema: Mapping[str, Any], low_key: str, high_key: str, unit: str) -> str:
    low, high = schema.get(low_key), schema.get(high_key)
    low = low if isinstance(low, int) and not isinstance(low, bool) and low > 0 else None
    high = high if isinstance(high, int) and not isinstance(high, bool) else None
    if low is not None and high is not None:
        return f"exactly {_count(low, unit)}" if low == high else f"{low} to {_count(high, unit)}"
    if low is not None:
        return f"at least {_count(low, unit)}"
    if high is not None:
        return f"at most {_count(high, unit)}"
    return ""


def _count(n: int, unit: str) -> str:
    return f"{n} {unit}" if n == 1 else f"{n} {unit}s"


def _pattern(schema: Mapping[str, Any]) -> str:
    pattern = schema.get("pattern")
    if not isinstance(pattern, str):
        return ""
    # A raw string literal when it can be one: what the model would write in its own re.match.
    raw = "\\" in pattern and not pattern.endswith("\\") and "'" not in pattern and "\n" not in pattern
    literal = f"r'{pattern}'" if raw else repr(pattern)
    return f"matches {literal}"
