"""``@toolkit`` and ``@operation``: a class whose decorated methods become operations the model can call."""

from __future__ import annotations

import inspect
import sys
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

import pydantic

from codeact.toolkits._docstring import parse_docstring
from codeact.toolkits._schema import ArgumentsValidator, render_annotation, returns_schema
from codeact.toolkits.context import Control, ToolkitContext
from codeact.toolkits.errors import ToolkitDefinitionError
from codeact.toolkits.spec import APPROVALS, OperationApproval, OperationSpec, ParameterKind, ParameterSpec

__all__ = ["MethodOperation", "ToolkitSpec", "operation", "toolkit", "toolkit_spec"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., Any])

_OPERATION_ATTR = "__codeact_operation__"
_TOOLKIT_ATTR = "__codeact_toolkit__"
_JSON_HINT = (
    "use JSON-able types: str, int, float, bool, None, list, dict, tuple, set, Literal, datetime, "
    "date, Decimal, bytes, a pydantic model or a TypedDict"
)


@dataclass(frozen=True, kw_only=True)
class _OperationOptions:
    approval: OperationApproval
    timeout: float | None


@dataclass(frozen=True, kw_only=True)
class MethodOperation:
    """A decorated method turned into an operation.

    Attributes:
        spec: What the model and the bridge see.
        method: The method's attribute name on the class.
        context_param: The parameter that receives the ``ToolkitContext``, if any.
        is_async: Whether the method is a coroutine function (sync ones run in a worker thread).
        validator: Validates and converts the arguments.
        layout: Every parameter after ``self`` (the context one too) with its kind, in signature order,
            when the method must be called with positional arguments (it has ``/`` or ``*args``);
            empty when a call by keywords does.
    """

    spec: OperationSpec
    method: str
    context_param: str | None
    is_async: bool
    validator: ArgumentsValidator
    layout: tuple[tuple[str, ParameterKind], ...] = ()

    def call_arguments(self, arguments: dict[str, object]) -> tuple[list[object], dict[str, object]]:
        """The ``(args, kwargs)`` to call the method with, from validated ``arguments`` by name.

        A variadic's value is spread (``*args``' list after the positional values, ``**kwargs``' object
        among the keywords); everything else is passed by keyword unless ``layout`` says it cannot be.
        """
        if not self.layout:
            return [], arguments
        args: list[object] = []
        kwargs: dict[str, object] = {}
        for name, kind in self.layout:
            if name not in arguments:
                continue
            value = arguments[name]
            if kind in ("positional_only", "positional_or_keyword"):
                args.append(value)
            elif kind == "var_positional":
                args.extend(cast("list[object]", value))  # validated: the list of the extra values
            elif kind == "var_keyword":
                kwargs.update(cast("dict[str, object]", value))  # validated: the object of the extra keywords
            else:
                kwargs[name] = value
        return args, kwargs


@dataclass(frozen=True, kw_only=True)
class ToolkitSpec:
    """What ``@toolkit`` attaches to a class.

    Attributes:
        name: The toolkit's name (the object name inside the sandbox).
        description: Shown to the model as the class docstring.
        operations: By operation name, in definition order.
        qualname: ``module.Class`` (used in messages).
    """

    name: str
    description: str
    operations: dict[str, MethodOperation]
    qualname: str


@overload
def operation(func: _F, /) -> _F: ...


@overload
def operation(*, approval: OperationApproval = "auto", timeout: float | None = None) -> Callable[[_F], _F]: ...


def operation(
    func: _F | None = None, /, *, approval: OperationApproval = "auto", timeout: float | None = None
) -> _F | Callable[[_F], _F]:
    """Mark a method of a ``@toolkit`` class as an operation the model can call.

    Usable bare (``@operation``) or with options (``@operation(approval="ask", timeout=30)``).
    The method may be sync (run in a worker thread) or async. Its schema comes from the type
    hints and the Google-style docstring; both are checked when ``@toolkit`` decorates the class.

    Args:
        func: The method (when used bare).
        approval: ``"auto"`` (run), ``"ask"`` (the host's approver decides each call) or ``"deny"``.
        timeout: Seconds before a call fails with ``deadline_exceeded`` (``None``: the bridge default).

    Returns:
        The method itself, marked.
    """

    def mark(f: _F) -> _F:
        where = getattr(f, "__qualname__", repr(f))
        if approval not in APPROVALS:
            raise ToolkitDefinitionError(
                f"@operation on {where}: approval must be one of 'auto', 'ask', 'deny', got {approval!r}"
            )
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0):
            raise ToolkitDefinitionError(
                f"@operation on {where}: timeout must be a positive number of seconds, got {timeout!r}"
            )
        if not inspect.isfunction(f):
            raise ToolkitDefinitionError(
                f"@operation on {where}: decorate a plain (sync or async) method, not {type(f).__name__}"
            )
        setattr(f, _OPERATION_ATTR, _OperationOptions(approval=approval, timeout=timeout))
        return f

    if func is not None:
        return mark(func)
    return mark


def toolkit(*, name: str, description: str | None = None) -> Callable[[type[_T]], type[_T]]:
    """Declare a class as a toolkit; its ``@operation`` methods become the operations.

    Args:
        name: The toolkit's name: the object the model's code calls (``devops.get_project_info``).
        description: One line shown to the model; defaults to the class docstring's summary.

    Returns:
        A class decorator that checks every operation and attaches a ``ToolkitSpec``.

    Raises:
        ToolkitDefinitionError: a bad name, no operations, a missing annotation or docstring, a
            parameter type that cannot cross as JSON; the message names ``Class.method``.
    """

    def decorate(cls: type[_T]) -> type[_T]:
        if not isinstance(cls, type):
            raise ToolkitDefinitionError(f"@toolkit(name={name!r}) decorates a class, got {type(cls).__name__}")
        _check_name(name, f"@toolkit on {cls.__qualname__}")
        desc = description if description is not None else parse_docstring(cls.__doc__).summary
        if not desc or not desc.strip():
            raise ToolkitDefinitionError(
                f"@toolkit on {cls.__qualname__}: no description; pass @toolkit(name={name!r}, description=...) "
                "or give the class a docstring"
            )
        # The frame defining the class: lets hints name classes local to a function (pydantic does the same).
        caller = sys._getframe(1)
        localns = {**caller.f_locals, cls.__name__: cls} if caller.f_code.co_name != "<module>" else {}
        operations = _collect_operations(cls, localns)
        if not operations:
            raise ToolkitDefinitionError(
                f"@toolkit on {cls.__qualname__}: no operations; decorate at least one method with @operation"
            )
        spec = ToolkitSpec(
            name=name,
            description=" ".join(desc.split()),
            operations=operations,
            qualname=f"{cls.__module__}.{cls.__qualname__}",
        )
        setattr(cls, _TOOLKIT_ATTR, spec)
        return cls

    return decorate


def toolkit_spec(obj: object) -> ToolkitSpec | None:
    """The ``ToolkitSpec`` of a decorated class or of an instance of one, else ``None``."""
    cls = obj if isinstance(obj, type) else type(obj)
    spec = getattr(cls, _TOOLKIT_ATTR, None)
    return spec if isinstance(spec, ToolkitSpec) else None


def _check_name(name: object, where: str) -> None:
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_") or _is_keyword(name):
        raise ToolkitDefinitionError(
            f"{where}: toolkit name {name!r} is not allowed; use a Python identifier that does not start "
            "with '_' (for example 'devops')"
        )


def _is_keyword(name: str) -> bool:
    import keyword

    return keyword.iskeyword(name)


def _collect_operations(cls: type, localns: dict[str, Any]) -> dict[str, MethodOperation]:
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        members.update(vars(klass))
    operations: dict[str, MethodOperation] = {}
    for attr, member in members.items():
        inner = getattr(member, "__func__", None)
        if isinstance(member, staticmethod | classmethod) and hasattr(inner, _OPERATION_ATTR):
            raise ToolkitDefinitionError(
                f"@operation on {cls.__qualname__}.{attr}: operations must be instance methods, "
                f"not {type(member).__name__}s"
            )
        options = getattr(member, _OPERATION_ATTR, None)
        if not isinstance(options, _OperationOptions):
            continue
        if attr.startswith("_"):
            raise ToolkitDefinitionError(
                f"@operation on {cls.__qualname__}.{attr}: private methods cannot be operations; "
                "rename it without the leading '_'"
            )
        operations[attr] = _build_operation(cls, attr, member, options, localns)
    return operations


def _build_operation(
    cls: type, attr: str, func: Callable[..., Any], options: _OperationOptions, localns: dict[str, Any]
) -> MethodOperation:
    where = f"{cls.__qualname__}.{attr}"
    try:
        hints = typing.get_type_hints(func, localns={**localns, cls.__name__: cls}, include_extras=True)
    except Exception as exc:  # NameError, TypeError from a bad forward reference: report, do not crash
        raise ToolkitDefinitionError(f"operation {where}: cannot resolve its type hints: {exc}") from exc
    doc = parse_docstring(func.__doc__)
    if not doc.description:
        raise ToolkitDefinitionError(
            f"operation {where} has no docstring: add one; its first line is what the model reads"
        )
    signature = inspect.signature(func)
    params = list(signature.parameters.values())
    if not params or params[0].name != "self":
        raise ToolkitDefinitionError(f"operation {where}: the first parameter must be 'self'")
    context_param: str | None = None
    fields: list[tuple[str, object, object, str]] = []
    specs: list[ParameterSpec] = []
    for param in params[1:]:
        if param.name not in hints:
            star = "*" if param.kind is param.VAR_POSITIONAL else "**" if param.kind is param.VAR_KEYWORD else ""
            raise ToolkitDefinitionError(
                f"operation {where}: parameter {param.name!r} has no type annotation; annotate it "
                f"(for example `{star}{param.name}: str`)"
            )
        hint = hints[param.name]
        if _is_context(hint):
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise ToolkitDefinitionError(
                    f"operation {where}: the ToolkitContext parameter {param.name!r} cannot be variadic"
                )
            context_param = param.name
            continue
        # A variadic parameter crosses as one value under its name: the list of the extra positional
        # values (``*args: int`` -> ``tuple[int, ...]``), the object of the extra keywords.
        kind: ParameterKind = _KINDS[param.kind]
        field_type = (
            tuple[hint, ...]  # type: ignore[valid-type]
            if kind == "var_positional"
            else dict[str, hint]  # type: ignore[valid-type]
            if kind == "var_keyword"
            else hint
        )
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(field_type)
            schema = adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticInvalidForJsonSchema, TypeError) as exc:
            raise ToolkitDefinitionError(
                f"operation {where}: parameter {param.name!r} has type {render_annotation(hint)}, which cannot "
                f"cross the bridge as JSON; {_JSON_HINT}"
            ) from exc
        del schema  # only generated to prove the type is JSON-able; the full schema comes from the model
        variadic = kind in ("var_positional", "var_keyword")
        required = not variadic and param.default is inspect.Parameter.empty
        default = (() if kind == "var_positional" else {}) if variadic else ... if required else param.default
        description = doc.args.get(param.name, "")
        fields.append((param.name, field_type, default, description))
        specs.append(
            ParameterSpec(
                name=param.name,
                annotation=render_annotation(hint),
                description=description,
                required=required,
                default=None if required or variadic else param.default,
                kind=kind,
            )
        )
    unknown = sorted(set(doc.args) - {p.name for p in params})
    if unknown:
        raise ToolkitDefinitionError(
            f"operation {where}: the docstring describes {', '.join(map(repr, unknown))}, which is not a parameter; "
            "fix the Args: section"
        )
    validator = ArgumentsValidator(f"{cls.__name__}_{attr}_arguments", fields)
    input_schema = validator.json_schema()
    properties = input_schema.get("properties", {})
    for p in specs:
        if p.variadic and p.name in properties:
            properties[p.name] = _variadic_schema(properties[p.name])
    specs = [
        ParameterSpec(
            name=p.name,
            annotation=p.annotation,
            description=p.description,
            required=p.required,
            default=p.default,
            schema=_variadic_schema(properties.get(p.name, {})) if p.variadic else properties.get(p.name, {}),
            kind=p.kind,
        )
        for p in specs
    ]
    returns = hints.get("return", Any)
    spec = OperationSpec(
        name=attr,
        description=doc.description,
        parameters=tuple(specs),
        returns="NoReturn" if returns is Control else render_annotation(returns),
        returns_description=doc.returns,
        approval=options.approval,
        timeout=options.timeout,
        input_schema=input_schema,
        returns_schema=None if returns is Control else returns_schema(returns),
        examples=doc.examples,
    )
    kinds = [_KINDS[p.kind] for p in params[1:]]
    positional = "positional_only" in kinds or "var_positional" in kinds
    return MethodOperation(
        spec=spec,
        method=attr,
        context_param=context_param,
        is_async=inspect.iscoroutinefunction(func),
        validator=validator,
        layout=tuple((p.name, _KINDS[p.kind]) for p in params[1:]) if positional else (),
    )


_KINDS: dict[object, ParameterKind] = {
    inspect.Parameter.POSITIONAL_ONLY: "positional_only",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
    inspect.Parameter.VAR_POSITIONAL: "var_positional",
    inspect.Parameter.KEYWORD_ONLY: "keyword_only",
    inspect.Parameter.VAR_KEYWORD: "var_keyword",
}


def _variadic_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A variadic's schema without pydantic's ``default`` (``[]``/``{}``: nothing passed is not a default value)."""
    return {key: value for key, value in schema.items() if key != "default"}


def _is_context(hint: object) -> bool:
    if hint is ToolkitContext:
        return True
    args = typing.get_args(hint)
    return bool(args) and ToolkitContext in args and all(a in (ToolkitContext, type(None)) for a in args)
