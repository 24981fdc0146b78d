"""JSON value types shared across packages (a leaf: imports nothing of the project).

``JsonValue`` is what ``json.loads`` returns and ``json.dumps`` takes: for stored records, wire
messages and any other data that is JSON by contract. The sandbox runtime, which imports nothing
outside the standard library, has the same definition in ``sandbox/runtime/_codec_types.py``.
"""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonValue"]

JsonValue: TypeAlias = "dict[str, JsonValue] | list[JsonValue] | str | int | float | bool | None"
"""A JSON value."""

JsonObject: TypeAlias = "dict[str, JsonValue]"
"""A JSON object."""
