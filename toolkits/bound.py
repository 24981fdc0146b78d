"""One uniform view of a toolkit, whichever way it was declared (decorated class or dynamic)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from codeact.toolkits._schema import ArgumentsValidator, type_from_schema
from codeact.toolkits._sync import SyncOperation
from codeact.toolkits.context import ToolkitContext
from codeact.toolkits.decorators import MethodOperation, toolkit_spec
from codeact.toolkits.dynamic import DynamicToolkit
from codeact.toolkits.errors import ToolkitDefinitionError, ToolkitNotFoundError
from codeact.toolkits.spec import OperationSpec

__all__ = ["BoundToolkit", "bind_toolkit"]

_Invoke = Callable[[dict[str, object], ToolkitContext], Awaitable[object]]


@dataclass(frozen=True, kw_only=True)
class _BoundOperation:
    spec: OperationSpec
    validate: Callable[[Mapping[str, object]], dict[str, object]]
    invoke: _Invoke
    wants_context: bool = True


class BoundToolkit:
    """A toolkit ready to be called: its name, description, operation specs and the object behind them.

    Built by :func:`bind_toolkit`; the registry and the bridge only deal with this type.
    """

    def __init__(
        self,
        *,
        name: str,
        description: str,
        source: str,
        target: object,
        operations: Mapping[str, _BoundOperation],
        prepare: Callable[[str], Awaitable[None]] | None = None,
    ) -> None:
        self.name = name
        #: Awaited by the bridge before a call's timeout starts (``DynamicToolkit.prepare``); ``None``: nothing to do.
        self.prepare = prepare
        self.description = description
        self.source = source
        self.target = target
        self._ops = dict(operations)
        self.operations: Mapping[str, OperationSpec] = MappingProxyType({k: v.spec for k, v in self._ops.items()})

    def __repr__(self) -> str:
        return f"<BoundToolkit {self.name!r} from {self.source} ({len(self._ops)} operations)>"

    def _op(self, operation: str) -> _BoundOperation:
        try:
            return self._ops[operation]
        except KeyError:
            raise ToolkitNotFoundError(
                f"toolkit {self.name!r} has no operation {operation!r}; it has: {', '.join(self._ops)}"
            ) from None

    def wants_context(self, operation: str) -> bool:
        """Whether ``operation`` receives the ``ToolkitContext`` (dynamic toolkits always do)."""
        return self._op(operation).wants_context

    def validate(self, operation: str, arguments: Mapping[str, object]) -> dict[str, object]:
        """Validate and convert ``arguments`` (decoded values) for ``operation``.

        Raises:
            ToolkitNotFoundError: no such operation.
            pydantic.ValidationError: the arguments do not fit the schema.
        """
        return self._op(operation).validate(arguments)

    async def invoke(self, operation: str, arguments: dict[str, object], context: ToolkitContext) -> object:
        """Run ``operation`` with already validated ``arguments`` (no grants, approval or timeout here)."""
        return await self._op(operation).invoke(arguments, context)

    async def call(self, operation: str, arguments: Mapping[str, object], context: ToolkitContext) -> object:
        """Validate and run: the in-process path, for tests and host code that calls tools directly."""
        return await self.invoke(operation, self.validate(operation, arguments), context)


def bind_toolkit(obj: object) -> BoundToolkit:
    """Bind a toolkit object: the uniform view the registry and the bridge use.

    ``obj`` may be a ``@toolkit`` class (instantiated with no arguments), an instance of one, a
    ``DynamicToolkit`` (instance or class) or an already bound toolkit.

    Raises:
        ToolkitDefinitionError: ``obj`` is not a toolkit, cannot be instantiated without
            arguments, or a dynamic toolkit describes itself wrongly.
    """
    if isinstance(obj, BoundToolkit):
        return obj
    if isinstance(obj, type):
        if toolkit_spec(obj) is None and not issubclass(obj, DynamicToolkit):
            raise _not_a_toolkit(obj)
        cls = obj
        try:
            obj = cls()
        except Exception as exc:
            raise ToolkitDefinitionError(
                f"toolkit class {cls.__qualname__} could not be instantiated without arguments "
                f"({type(exc).__name__}: {exc}); pass an instance instead"
            ) from exc
    if isinstance(obj, DynamicToolkit):
        return _bind_dynamic(obj)
    spec = toolkit_spec(obj)
    if spec is None:
        raise _not_a_toolkit(obj)
    ops = {name: _bind_method(obj, op) for name, op in spec.operations.items()}
    return BoundToolkit(name=spec.name, description=spec.description, source=spec.qualname, target=obj, operations=ops)


def _not_a_toolkit(obj: object) -> ToolkitDefinitionError:
    what = obj.__qualname__ if isinstance(obj, type) else f"a {type(obj).__qualname__} object"
    return ToolkitDefinitionError(
        f"{what} is not a toolkit: decorate the class with @toolkit(name=...), or subclass DynamicToolkit"
    )


def _bind_method(instance: object, op: MethodOperation) -> _BoundOperation:
    method = getattr(instance, op.method)
    context_param = op.context_param
    if op.layout:  # `/` or `*args`: called with positional arguments, the variadics spread
        method = _spreading(method, op)

    if op.is_async:

        async def invoke(arguments: dict[str, object], context: ToolkitContext) -> object:
            if context_param is not None:
                arguments = {**arguments, context_param: context}
            return await method(**arguments)

    else:
        # A blocking tool must not stall the other calls of the round: it runs in a worker thread,
        # or inline once its calls have proven fast (toolkits._sync).
        run_sync = SyncOperation(method)

        async def invoke(arguments: dict[str, object], context: ToolkitContext) -> object:
            if context_param is not None:
                arguments = {**arguments, context_param: context}
            return await run_sync(arguments)

    return _BoundOperation(
        spec=op.spec, validate=op.validator, invoke=invoke, wants_context=op.context_param is not None
    )


def _spreading(method: Callable[..., Any], op: MethodOperation) -> Callable[..., Any]:
    """``method`` called by argument names, as the bridge does, with ``op.call_arguments``' shape."""

    @functools.wraps(method)  # keeps `blocking = True` (toolkits._sync) and the coroutine-ness for readers
    def spread(**arguments: Any) -> Any:
        args, kwargs = op.call_arguments(arguments)
        return method(*args, **kwargs)

    return spread


def _bind_dynamic(dynamic: DynamicToolkit) -> BoundToolkit:
    kind = type(dynamic).__qualname__
    name = getattr(dynamic, "name", None)
    description = getattr(dynamic, "description", None)
    if not isinstance(name, str) or not name.isidentifier() or name.startswith("_"):
        raise ToolkitDefinitionError(
            f"dynamic toolkit {kind}: name {name!r} is not allowed; set `name` to a Python identifier "
            "that does not start with '_'"
        )
    if not isinstance(description, str) or not description.strip():
        raise ToolkitDefinitionError(f"dynamic toolkit {kind} ({name!r}): set a non-empty `description`")
    specs = dynamic.operations()
    if not specs:
        raise ToolkitDefinitionError(f"dynamic toolkit {kind} ({name!r}): operations() returned no operations")
    ops: dict[str, _BoundOperation] = {}
    for spec in specs:
        if not isinstance(spec, OperationSpec):
            raise ToolkitDefinitionError(
                f"dynamic toolkit {kind} ({name!r}): operations() must return OperationSpec objects, "
                f"got {type(spec).__name__}"
            )
        if spec.name in ops:
            raise ToolkitDefinitionError(f"dynamic toolkit {kind} ({name!r}): operation {spec.name!r} is listed twice")
        validator = ArgumentsValidator(
            f"{name}_{spec.name}_arguments",
            [
                (p.name, type_from_schema(p.schema), ... if p.required else p.default, p.description)
                for p in spec.parameters
            ],
            omit_unset=True,
        )
        ops[spec.name] = _BoundOperation(spec=spec, validate=validator, invoke=_dynamic_invoke(dynamic, spec.name))
    return BoundToolkit(
        name=name,
        description=" ".join(description.split()),
        source=f"{type(dynamic).__module__}.{kind}",
        target=dynamic,
        operations=ops,
        prepare=dynamic.prepare if type(dynamic).prepare is not DynamicToolkit.prepare else None,
    )


def _dynamic_invoke(dynamic: DynamicToolkit, operation: str) -> _Invoke:
    async def invoke(arguments: dict[str, object], context: ToolkitContext) -> object:
        result = dynamic.execute(operation, arguments, context)
        if inspect.isawaitable(result):
            return await result
        return result

    return invoke
