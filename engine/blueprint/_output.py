"""``outputSchema`` (seed 002's ``BaseAgent.outputSchema``): read and checked here, used by ``engine.agent.output``.

A JSON Schema as a mapping, or as JSON text (the seed keeps it as a string). ``jsonschema`` is imported
only when a schema is checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from codeact.engine.blueprint.issues import ValidationIssue

__all__ = ["check_output_schema", "read_schema"]


def read_schema(value: object, *, where: str) -> tuple[dict[str, object] | None, str | None]:
    """``(the schema, None)``, or ``(None, what is wrong with it)``; ``where`` names it in the message."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            return None, f"{where} is text but not JSON ({exc})"
    if not isinstance(value, Mapping):
        return None, f"{where} must be a JSON Schema object, not {type(value).__name__}"
    from jsonschema import validators
    from jsonschema.exceptions import SchemaError

    schema = dict(value)
    try:
        validators.validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.path)
        return None, f"{where}{path} is not a valid JSON Schema: {exc.message}"
    return schema, None


def check_output_schema(value: object) -> list[ValidationIssue]:
    """The validator's issues of a blueprint's ``outputSchema`` (none when it is absent or valid)."""
    if value is None:
        return []
    _, problem = read_schema(value, where="outputSchema")
    if problem is None:
        return []
    message = f"{problem}. Give a JSON Schema, e.g. outputSchema: {{type: object, properties: {{...}}}}."
    return [ValidationIssue.error("$.outputSchema", "blueprint.outputSchema.invalid", message)]
