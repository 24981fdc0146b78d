"""What a model is shown when its call of an operation was refused by the argument check (issue 39).

Small models send the same wrong call round after round (``dna.transcribe_dna_to_mrna(dna_sequence=4)``
three times, the error message notwithstanding). The bridge knows the operation's signature and its
docstring's example, so the Evaluation of such a round shows both: the one-line signature and one
correct call, from the docstring's ``Example:`` when it has one, else built from the JSON schema with
a plausible value per parameter (``prompts/call_help.j2``).

The refusals recognised are the bridge's ``invalid arguments for t.op(): ...`` (a ``ToolError``) and
the runtime proxy's ``TypeError`` (``t.op() missing required argument(s) ...``, ``takes 1 positional
argument(s) ...``, ``got an unexpected keyword argument ...``, ``got multiple values ...``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from codeact import prompts
from codeact.toolkits._constraints import constraint_text
from codeact.toolkits.spec import OperationSpec
from codeact.toolkits.stubs import call_signature

__all__ = ["TEMPLATE", "call_help", "example_call", "example_value", "refused_operation"]

TEMPLATE = "call_help.j2"

_BRIDGE_REFUSAL = re.compile(r"^invalid arguments for (?P<toolkit>[A-Za-z_]\w*)\.(?P<operation>[A-Za-z_]\w*)\(\): ")
_PROXY_REFUSAL = re.compile(
    r"^(?P<toolkit>[A-Za-z_]\w*)\.(?P<operation>[A-Za-z_]\w*)\(\) "
    r"(?:takes \d+ positional|got an unexpected keyword argument|got multiple values|missing required argument)"
)
_MAX_DEPTH = 3


def refused_operation(error: Mapping[str, object] | None) -> tuple[str, str] | None:
    """``(toolkit, operation)`` when ``error`` (a round's ``{"type", "message", ...}``) is an argument refusal."""
    if not error:
        return None
    kind, message = error.get("type"), error.get("message")
    if not isinstance(message, str):
        return None
    pattern = _BRIDGE_REFUSAL if kind == "ToolError" else _PROXY_REFUSAL if kind == "TypeError" else None
    match = pattern.match(message) if pattern is not None else None
    return (match.group("toolkit"), match.group("operation")) if match else None


def call_help(spec: OperationSpec, *, toolkit: str) -> str:
    """The note for a refused call of ``toolkit.<spec.name>``: its signature, bounds and one correct call."""
    example = example_call(spec, toolkit=toolkit)
    bounds = []
    for param in spec.parameters:
        subject = f"each of {param.name}" if param.variadic else param.name
        text = constraint_text(_value_schema(param.schema, param.kind), subject)
        if text:
            bounds.append(text if subject in text else f"{param.name}: {text}")
    return prompts.render(
        TEMPLATE,
        operation=f"{toolkit}.{spec.name}",
        signature=call_signature(spec, toolkit=toolkit),
        bounds=bounds,
        example=example,
        documented=_documented(spec, toolkit) is not None,
    ).strip()


def _value_schema(schema: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    key = {"var_positional": "items", "var_keyword": "additionalProperties"}.get(kind)
    inner = schema.get(key) if key else None
    return inner if isinstance(inner, Mapping) else schema


def _documented(spec: OperationSpec, toolkit: str) -> str | None:
    """The docstring example's call of the operation (``toolkit.`` added when it calls it bare), if any."""
    bare = re.compile(rf"(?<![\w.])(?:{re.escape(toolkit)}\.)?{re.escape(spec.name)}\(")
    for line in spec.examples:
        match = bare.search(line)
        if match is not None:
            call = line[match.start() :].split("  #", 1)[0].strip()
            return call if call.startswith(f"{toolkit}.") else f"{toolkit}.{call}"
    return None


def example_call(spec: OperationSpec, *, toolkit: str) -> str:
    """One correct call of the operation, as the model's code writes it (``dna.transcribe(seq='ATGC')``).

    The first line of the docstring's ``Example:`` section that calls the operation when there is one
    (``toolkit.`` added if it calls it bare), else the required parameters with a value each from their
    schema (``*args`` gets two items; optional parameters and ``**kwargs`` are left out).
    """
    documented = _documented(spec, toolkit)
    if documented is not None:
        return documented
    defs = (spec.input_schema or {}).get("$defs") or {}
    varargs = next((p for p in spec.parameters if p.kind == "var_positional"), None)
    positional: list[str] = []
    keywords: list[str] = []
    for param in spec.parameters:
        if param.kind == "var_positional":
            items = param.schema.get("items")
            item_schema = items if isinstance(items, Mapping) else {}
            positional += [repr(example_value(item_schema, defs, index=i)) for i in range(2)]
        elif param.kind == "var_keyword":
            continue
        elif varargs is not None and param.kind in ("positional_only", "positional_or_keyword"):
            # before *args every one is filled positionally, the optional ones with their default
            positional.append(repr(example_value(param.schema, defs) if param.required else param.default))
        elif not param.required:
            continue
        elif param.kind == "positional_only":
            positional.append(repr(example_value(param.schema, defs)))
        else:
            keywords.append(f"{param.name}={example_value(param.schema, defs)!r}")
    return f"{toolkit}.{spec.name}({', '.join(positional + keywords)})"


def example_value(schema: Mapping[str, Any], defs: Mapping[str, Any], *, index: int = 0, depth: int = 0) -> Any:
    """A plausible value that fits ``schema`` (its bounds, choices and required fields); ``index`` varies it."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref.rsplit("/", 1)[-1])
        return example_value(target, defs, index=index, depth=depth + 1) if isinstance(target, Mapping) else {}
    for key in ("allOf", "anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            real = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
            return example_value(real[0], defs, index=index, depth=depth) if real else None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        choices = schema["enum"]
        return choices[index % len(choices)]
    if "examples" in schema and isinstance(schema["examples"], list) and schema["examples"]:
        return schema["examples"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return int(_number(schema, 1 + index))
    if kind == "number":
        return float(_number(schema, 1.0 + index))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    if kind == "array":
        items = schema.get("items")
        count = max(1, int(schema.get("minItems") or 1))
        if depth >= _MAX_DEPTH or not isinstance(items, Mapping):
            return []
        return [example_value(items, defs, index=i, depth=depth + 1) for i in range(count)]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties")
        if depth >= _MAX_DEPTH or not isinstance(properties, Mapping):
            return {}
        required = [name for name in schema.get("required") or () if name in properties]
        return {name: example_value(properties[name], defs, depth=depth + 1) for name in required}
    return _text(schema)


def _number(schema: Mapping[str, Any], wanted: float) -> float:
    """``wanted`` moved inside the schema's bounds (and onto its ``multipleOf``)."""
    value = wanted
    low, high = schema.get("minimum"), schema.get("maximum")
    low_x, high_x = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(low, int | float) and value < low:
        value = low
    if isinstance(low_x, int | float) and value <= low_x:
        value = low_x + 1 if schema.get("type") == "integer" else low_x + 0.5
    if isinstance(high, int | float) and value > high:
        value = high
    if isinstance(high_x, int | float) and value >= high_x:
        value = high_x - 1 if schema.get("type") == "integer" else high_x - 0.5
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        value = math.ceil(value / step) * step  # up: the lower bound is the one the value was moved to
        if isinstance(high, int | float) and value > high or isinstance(high_x, int | float) and value >= high_x:
            value -= step
    return value


def _text(schema: Mapping[str, Any]) -> str:
    formats = {"date": "2025-01-31", "date-time": "2025-01-31T12:00:00", "time": "12:00:00", "email": "a@example.com"}
    text = formats.get(str(schema.get("format")), "text")
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        text = _matching(pattern) or text
    low, high = schema.get("minLength"), schema.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text = (text * (low // len(text) + 1))[:low]
    if isinstance(high, int) and len(text) > high:
        text = text[: max(high, 0)]
    return text


_ATOM = re.compile(r"\\d|\\w|\\s|\\.|\[[^\]]+\]|[^\\\[\](){}|*+?^$.]")
_REPEAT = re.compile(r"\{(\d+)(?:,(\d*))?\}|[*+?]")
_CLASS_SAMPLE = {"\\d": "1", "\\w": "a", "\\s": " "}


def _matching(pattern: str) -> str | None:
    """A short text ``pattern`` matches, for simple patterns (classes, literals, counts); else None.

    ``^[A-Z]{3}-[0-9]{3}$`` gives ``AAA-111``. Anything with groups, alternation or look-arounds is left
    alone (None): the stub's bounds show the pattern itself.
    """
    body = pattern.removeprefix("^").removesuffix("$")
    out: list[str] = []
    pos = 0
    while pos < len(body):
        atom = _ATOM.match(body, pos)
        if atom is None:
            return None
        pos = atom.end()
        sample = _sample(atom.group())
        if sample is None:
            return None
        count = 1
        repeat = _REPEAT.match(body, pos)
        if repeat is not None:
            pos = repeat.end()
            token = repeat.group()
            count = int(repeat.group(1)) if repeat.group(1) else {"*": 0, "+": 1, "?": 0}.get(token, 1)
        out.append(sample * count)
    text = "".join(out)
    try:
        return text if re.search(pattern, text) else None
    except re.error:
        return None


def _sample(atom: str) -> str | None:
    if atom in _CLASS_SAMPLE:
        return _CLASS_SAMPLE[atom]
    if atom.startswith("\\"):
        return atom[1:]  # an escaped literal (\\. -> .)
    if atom.startswith("["):
        inner = atom[1:-1]
        if inner.startswith("^"):
            return None
        if inner.startswith("\\d"):
            return "1"
        return inner[0] if inner[0] != "\\" else None
    return atom
