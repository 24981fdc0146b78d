"""What the model sees of the toolkits: Python stubs (``prompts/toolkit.j2``) and the function-calling form."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

from codeact import prompts
from codeact.toolkits._constraints import constraint_text
from codeact.toolkits._grants import Grants, as_toolkit_map, normalize_grants
from codeact.toolkits._stub_types import TypeCollector
from codeact.toolkits.bound import BoundToolkit
from codeact.toolkits.spec import OperationSpec, ParameterSpec

__all__ = ["openai_tools", "render_stubs"]

TEMPLATE = "toolkit.j2"


def _selected(toolkits: Iterable[object], grants: Grants | None) -> list[tuple[BoundToolkit, list[OperationSpec]]]:
    bound = as_toolkit_map(toolkits)
    allowed = normalize_grants(bound, grants)
    out = []
    for name, ops in allowed.items():
        specs = [spec for op, spec in bound[name].operations.items() if op in ops and spec.approval != "deny"]
        if specs:
            out.append((bound[name], specs))
    return out


def _escape(text: str) -> str:
    """Make text safe inside a triple-quoted docstring."""
    return text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip()


def _parameters(spec: OperationSpec, types: TypeCollector, prefix: str) -> list[tuple[str, str]]:
    """``(text, bounds)`` per entry of the signature after ``self``, as Python writes them.

    Entries: ``name: type = default``, ``/``, ``*args: int``, ``*``, ``**kwargs: str``; ``bounds`` is the
    ``constraint_text`` of the value (of each item, for a variadic).
    """
    out: list[tuple[str, str]] = []
    defs = (spec.input_schema or {}).get("$defs") or {}
    params = spec.parameters
    last_positional_only = max((i for i, p in enumerate(params) if p.kind == "positional_only"), default=-1)
    starred = False
    for index, param in enumerate(params):
        if param.kind == "keyword_only" and not starred:
            out.append(("*", ""))
            starred = True
        schema = _item_schema(param)
        annotation = types.annotation(schema, defs, prefix=prefix, fallback=param.annotation)
        if param.kind == "var_positional":
            starred = True
            text = f"*{param.name}: {annotation}"
        elif param.kind == "var_keyword":
            text = f"**{param.name}: {annotation}"
        else:
            text = f"{param.name}: {annotation}"
            if not param.required:
                text += f" = {param.default!r}"
        subject = f"each of {param.name}" if param.variadic else param.name
        out.append((text, constraint_text(schema, subject)))
        if index == last_positional_only:
            out.append(("/", ""))
    return out


def _signature(spec: OperationSpec, types: TypeCollector, prefix: str) -> str:
    """The stub's parameter list: on one line, or one parameter a line with its bounds as a comment.

    ``quantity: int,  # 1 <= quantity <= 100`` puts the bound where the model writes the argument
    (see ``toolkits/_constraints.py`` for why a comparison and not ``Field(ge=1, le=100)``).
    """
    entries = [("self", ""), *_parameters(spec, types, prefix)]
    if not any(bounds for _, bounds in entries):
        return ", ".join(text for text, _ in entries)
    lines = [f"        {text},{f'  # {bounds}' if bounds else ''}" for text, bounds in entries]
    return "\n" + "\n".join(lines) + "\n    "


def call_signature(spec: OperationSpec, *, toolkit: str) -> str:
    """``toolkit.operation(name: type = default, ...) -> returns`` on one line (no ``self``, no bounds)."""
    types = TypeCollector()
    params = ", ".join(text for text, _ in _parameters(spec, types, toolkit))
    return f"{toolkit}.{spec.name}({params}) -> {_returns(spec, types, toolkit)}"


def _starred(param: ParameterSpec) -> str:
    return {"var_positional": "*", "var_keyword": "**"}.get(param.kind, "") + param.name


def _item_schema(param: ParameterSpec) -> Mapping[str, Any]:
    """The schema of one value of the parameter (an item of ``*args``, a value of ``**kwargs``)."""
    schema = param.schema
    if param.kind == "var_positional" and isinstance(schema.get("items"), Mapping):
        return cast("Mapping[str, Any]", schema["items"])
    if param.kind == "var_keyword" and isinstance(schema.get("additionalProperties"), Mapping):
        return cast("Mapping[str, Any]", schema["additionalProperties"])
    return schema


def render_stubs(toolkits: Iterable[object], *, grants: Grants | None = None) -> str:
    """Render toolkits as Python classes of ``async def`` stubs: exactly what the model reads.

    Operations with ``approval="deny"`` are left out (they can never run). Parameters and
    results typed as pydantic models or TypedDicts are shown with ``TypedDict`` stubs of their
    fields (see ``toolkits/_stub_types.py`` for the bounds).

    Args:
        toolkits: A ``ToolkitRegistry`` or toolkits (anything ``bind_toolkit`` accepts).
        grants: ``{toolkit: "*" | [operation, ...]}`` to show only what a session was granted.

    Returns:
        Python source (valid syntax), toolkits separated by two blank lines.
    """
    data: list[dict[str, Any]] = []
    types = TypeCollector()
    for bound, specs in _selected(toolkits, grants):
        first_type = len(types.types)
        operations = [
            {
                "name": spec.name,
                "signature": _signature(spec, types, bound.name),
                "returns": _returns(spec, types, bound.name),
                "description": _escape(spec.description),
                "approval": spec.approval,
                "args": [
                    {"name": _starred(p), "description": _escape(p.description)}
                    for p in spec.parameters
                    if p.description
                ],
                "returns_description": _escape(spec.returns_description),
            }
            for spec in specs
        ]
        data.append(
            {
                "name": bound.name,
                "description": _escape(bound.description),
                "types": [{**t, "description": _escape(t["description"])} for t in types.types[first_type:]],
                "operations": operations,
            }
        )
    return prompts.render(TEMPLATE, toolkits=data)


def _returns(spec: OperationSpec, types: TypeCollector, prefix: str) -> str:
    schema = spec.returns_schema
    if not schema:
        return spec.returns
    return types.annotation(schema, schema.get("$defs") or {}, prefix=prefix, fallback=spec.returns)


def openai_tools(toolkits: Iterable[object], *, grants: Grants | None = None) -> list[dict[str, Any]]:
    """The same operations in the JSON-schema function-calling form (``{"type": "function", ...}``).

    Function names are ``<toolkit>__<operation>`` (the API allows no dots).

    Args:
        toolkits: A ``ToolkitRegistry`` or toolkits.
        grants: ``{toolkit: "*" | [operation, ...]}`` to list only what a session was granted.

    Returns:
        One function definition per operation.
    """
    tools: list[dict[str, Any]] = []
    for bound, specs in _selected(toolkits, grants):
        for spec in specs:
            description = spec.description
            if spec.returns_description:
                description += f"\n\nReturns: {spec.returns_description}"
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": f"{bound.name}__{spec.name}",
                        "description": description,
                        "parameters": spec.json_schema,
                    },
                }
            )
    return tools
