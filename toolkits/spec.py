"""What an operation looks like from outside: its parameters, schema, approval policy and timeout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from codeact.toolkits._schema import annotation_from_schema
from codeact.toolkits.errors import ToolkitDefinitionError
from codeact.toolkits.pipeline import Approval

__all__ = ["APPROVALS", "OperationApproval", "OperationSpec", "ParameterKind", "ParameterSpec"]

OperationApproval = Literal["auto", "ask", "deny"]
"""The words ``@operation(approval=...)`` accepts (``Approval.of`` maps them: auto runs)."""
APPROVALS: tuple[OperationApproval, ...] = ("auto", "ask", "deny")
ParameterKind = Literal["positional_only", "positional_or_keyword", "var_positional", "keyword_only", "var_keyword"]
"""How a parameter is passed in Python (``inspect.Parameter.kind``, in lower case); on the wire every
parameter is a name: ``*args`` carries the list of the extra positional values, ``**kwargs`` the object
of the extra keywords."""


@dataclass(frozen=True, kw_only=True)
class ParameterSpec:
    """One parameter of an operation.

    Attributes:
        name: The parameter name (arguments always cross the bridge by name).
        annotation: The type as the model sees it in the stub (``"str"``, ``"list[int]"``).
        description: From the docstring's ``Args:`` section.
        required: Whether the caller must pass it.
        default: The default (JSON-able) when not required.
        schema: The JSON schema of the value (of the list, for ``*args``; of the object, for ``**kwargs``).
        kind: How Python code passes it; ``annotation`` of a variadic one is its items' type
            (``*args: int``).
    """

    name: str
    annotation: str = "Any"
    description: str = ""
    required: bool = True
    default: object = None
    schema: Mapping[str, Any] = field(default_factory=dict)
    kind: ParameterKind = "positional_or_keyword"

    @property
    def variadic(self) -> bool:
        """Whether it is ``*args`` or ``**kwargs``."""
        return self.kind in ("var_positional", "var_keyword")


@dataclass(frozen=True, kw_only=True)
class OperationSpec:
    """An operation as the model, the bridge and the function-calling form see it.

    Attributes:
        name: The operation name (a Python identifier not starting with ``_``).
        description: The docstring description (its first paragraph is the summary).
        parameters: In signature order.
        returns: The return type as shown in the stub.
        returns_description: From the docstring's ``Returns:`` section.
        approval: ``"auto"`` runs, ``"ask"`` asks the host's approver first, ``"deny"`` never runs.
        timeout: Seconds before the call fails with ``deadline_exceeded``; ``None`` uses the bridge default.
        input_schema: The JSON schema of the arguments object; derived from ``parameters`` when omitted.
        returns_schema: The JSON schema of the result (with its ``$defs``), when it names structured
            types the stub should spell out; None otherwise.
        examples: Lines of example code from the docstring's ``Example:`` section (the correct call a
            refused call is shown, ``toolkits/_call_help.py``).
    """

    name: str
    description: str = ""
    parameters: tuple[ParameterSpec, ...] = ()
    returns: str = "Any"
    returns_description: str = ""
    approval: OperationApproval = "auto"
    timeout: float | None = None
    input_schema: Mapping[str, Any] | None = None
    returns_schema: Mapping[str, Any] | None = None
    examples: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name.startswith("_"):
            raise ToolkitDefinitionError(
                f"operation name {self.name!r} is not allowed: use a Python identifier that does not start with '_'"
            )
        if self.approval not in APPROVALS:
            raise ToolkitDefinitionError(
                f"operation {self.name!r}: approval must be one of 'auto', 'ask', 'deny', got {self.approval!r}"
            )
        if self.timeout is not None and (isinstance(self.timeout, bool) or not self.timeout > 0):
            raise ToolkitDefinitionError(
                f"operation {self.name!r}: timeout must be a positive number of seconds, got {self.timeout!r}"
            )
        if self.input_schema is None:
            object.__setattr__(self, "input_schema", object_schema(self.parameters))

    @cached_property
    def policy(self) -> Approval:
        """``approval`` in the one approval vocabulary (mapped once, the first time the bridge asks)."""
        return Approval.of(self.approval)

    @property
    def summary(self) -> str:
        """The first paragraph of the description, on one line."""
        return " ".join(self.description.split("\n\n", 1)[0].split())

    @property
    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments object (``{"type": "object", "properties": ...}``)."""
        return dict(self.input_schema or {})

    @classmethod
    def from_json_schema(
        cls,
        name: str,
        *,
        description: str,
        schema: Mapping[str, Any],
        returns: str = "Any",
        returns_description: str = "",
        approval: OperationApproval = "auto",
        timeout: float | None = None,
    ) -> OperationSpec:
        """Build a spec from a JSON schema of the arguments object (for dynamic toolkits, MCP tools).

        Args:
            name: The operation name.
            description: What the operation does (shown to the model).
            schema: ``{"type": "object", "properties": {...}, "required": [...]}``.
            returns: The return type shown in the stub.
            returns_description: What the operation returns.
            approval: The approval policy.
            timeout: The per-call timeout in seconds (``None``: the bridge default).

        Returns:
            The spec; parameters follow the order of ``properties``.
        """
        properties = schema.get("properties") or {}
        if schema.get("type", "object") != "object" or not isinstance(properties, Mapping):
            raise ToolkitDefinitionError(
                f"operation {name!r}: the schema must describe an object with 'properties', got {dict(schema)!r}"
            )
        required = set(schema.get("required") or ())
        params = tuple(
            ParameterSpec(
                name=pname,
                annotation=_optional(annotation_from_schema(pschema), pname in required or "default" in pschema),
                description=str(pschema.get("description", "")),
                required=pname in required,
                default=pschema.get("default"),
                schema=pschema,
            )
            for pname, pschema in properties.items()
        )
        for param in params:
            if not param.name.isidentifier():
                raise ToolkitDefinitionError(
                    f"operation {name!r}: parameter name {param.name!r} is not a Python identifier"
                )
        return cls(
            name=name,
            description=description,
            parameters=params,
            returns=returns,
            returns_description=returns_description,
            approval=approval,
            timeout=timeout,
            input_schema=dict(schema),
        )


def _optional(annotation: str, required_or_defaulted: bool) -> str:
    """An optional parameter without a default shows as ``X | None = None`` in the stub."""
    if required_or_defaulted or annotation in ("Any", "None") or annotation.endswith("| None"):
        return annotation
    return f"{annotation} | None"


def object_schema(parameters: Sequence[ParameterSpec]) -> dict[str, Any]:
    """The JSON schema of an arguments object made of ``parameters``."""
    properties: dict[str, Any] = {}
    for param in parameters:
        prop = dict(param.schema)
        if param.description and "description" not in prop:
            prop["description"] = param.description
        if not param.required and param.default is not None and "default" not in prop:
            prop["default"] = param.default
        properties[param.name] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in parameters if p.required],
        "additionalProperties": False,
    }
