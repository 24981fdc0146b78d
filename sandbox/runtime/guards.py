"""The guard functions RestrictedPython-transformed code calls, the safe builtins and the import allow-list.

Standard library only: this module runs INSIDE the sandbox (also in the Debian python3.11 container).
The host compiles the model's code with ``codeact.sandbox.policy.compile_code``; that transform rejects most
dangerous constructs statically (names and attributes starting with ``_``, frame/code internals, ...)
and routes every attribute read through ``_getattr_``, every attribute/item write through ``_write_``
and every ``for`` loop through ``_getiter_``. The functions here are the run-time half of the policy:

* Attribute reads: ``obj.x`` for most public names compiles to ``_codeact_attr_x_(obj)``, a getter of that
  name (``attribute_getter_name``; bound by the module's first statement, ``_codeact_getters_('x', ...)``):
  a native ``obj.x`` and the value check, so a module attribute that is itself a module outside the
  allow-list (``dataclasses.sys``, ``uuid.os``) can never be reached, whatever object holds it. Other
  names go through ``_getattr_``: private and allowed dunder names (decided by the object), and names
  whose value is replaced (``format``: ``str.format`` becomes a formatter that guards ``{0.attr}`` fields).
* ``_write_``: returns the object itself for ``dict``/``list`` and instances of classes the sandboxed
  code defined (recorded by the ``__metaclass__`` class factory, so it cannot be forged), and a proxy
  that refuses attribute writes otherwise (stdlib modules, classes and objects stay read-only).
* Safe builtins: no ``eval``/``exec``/``compile``/``input``/``breakpoint``/``globals``/``locals``/
  ``vars``/``memoryview`` (stubs that raise a clear error), guarded ``getattr``/``hasattr``/``setattr``/
  ``delattr``/``dir``, a ``type`` that only answers ``type(obj)``, an ``open`` that only reads files
  inside the working directory (the run's input files), and a guarded ``__import__``.

``restricted_globals`` returns a fresh namespace wired with all of these; the runtime runs the code
(and the prelude of restored definitions) in that very dict.
"""

from __future__ import annotations

import _operator  # not `operator`, which re-exports these very functions from it
import builtins
import sys
from types import CellType, CodeType, FunctionType, ModuleType, SimpleNamespace

from codeact.sandbox.runtime._guard_helpers import (
    _ClassFactory,
    _disabled,
    _GuardedFormatter,
    _needs_guarded_format,
    _read_only_open,
    _SafeType,
    _WriteProxy,
)

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
    from typing import Any, Final, TypeVar

    from codeact.sandbox.runtime._match_guard import PatternClasses

__all__ = [
    "ALLOWED_UNDERSCORE_ATTRIBUTES",
    "ALLOWED_DUNDER_METHODS",
    "DENIED_ATTRIBUTES",
    "ATTRIBUTE_GETTERS",
    "CAPTURED",
    "MATCH_VALUES",
    "PATTERN_CLASS",
    "SANDBOX_MODULE_NAME",
    "attribute_getter_name",
    "is_private_name",
    "plain_globals",
    "restricted_globals",
]

PATTERN_CLASS: Final = "_codeact_pattern_class_"
"""``_codeact_pattern_class_(C, n_positional, keyword_names)``: the class a class pattern matches with."""

CAPTURED: Final = "_codeact_captured_"
"""``_codeact_captured_(v1, v2, ...)``: checks the values a case captured (True, or raises)."""

MATCH_VALUES: Final = "_codeact_match_values_"
"""Builds the holder of one ``match`` statement's evaluated dotted names (``types.SimpleNamespace``)."""

SANDBOX_MODULE_NAME: Final = "__main__"
"""``__name__`` of the sandbox namespace (so ``if __name__ == "__main__":`` blocks run)."""

ALLOWED_UNDERSCORE_ATTRIBUTES: Final = frozenset(
    {
        "__init__", "__post_init__", "__name__", "__qualname__", "__doc__", "__module__",
        # the public API of namedtuples
        "_asdict", "_replace", "_fields", "_field_defaults", "_make",
    }
)  # fmt: skip
"""The only ``_``-prefixed attributes sandboxed code may READ (``super().__init__()``, ``type(x).__name__``)."""

ALLOWED_DUNDER_METHODS: Final = frozenset(
    {
        "__init__", "__post_init__", "__repr__", "__str__", "__format__", "__hash__", "__bool__", "__len__",
        "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__iter__", "__next__",
        "__aiter__", "__anext__", "__getitem__", "__setitem__", "__delitem__", "__missing__", "__reversed__",
        "__call__", "__enter__", "__exit__", "__aenter__", "__aexit__", "__neg__", "__pos__", "__abs__",
        "__invert__", "__round__", "__int__", "__float__", "__index__", "__complex__",
        "__add__", "__sub__", "__mul__", "__matmul__", "__truediv__", "__floordiv__", "__mod__", "__divmod__",
        "__pow__", "__lshift__", "__rshift__", "__and__", "__xor__", "__or__",
        "__radd__", "__rsub__", "__rmul__", "__rmatmul__", "__rtruediv__", "__rfloordiv__", "__rmod__",
        "__rdivmod__", "__rpow__", "__rlshift__", "__rrshift__", "__rand__", "__rxor__", "__ror__",
        "__iadd__", "__isub__", "__imul__", "__imatmul__", "__itruediv__", "__ifloordiv__", "__imod__",
        "__ipow__", "__ilshift__", "__irshift__", "__iand__", "__ixor__", "__ior__",
    }
)  # fmt: skip
"""Special methods a class defined in sandboxed code may DEFINE (their bodies are sandboxed code too)."""

DENIED_ATTRIBUTES: Final = frozenset(
    {
        # frames, code, generators, coroutines, async generators, tracebacks
        "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "cr_origin", "ag_frame",
        "ag_code", "ag_await", "tb_frame", "tb_next", "f_back", "f_globals", "f_locals", "f_builtins",
        "f_code", "f_trace", "f_generator", "co_code", "func_globals", "func_code", "mro",
        # stdlib helpers that evaluate strings or look attributes up by name, bypassing _getattr_
        "get_type_hints", "attrgetter", "methodcaller", "Formatter", "vformat", "get_field",
        "singledispatch", "singledispatchmethod", "make_dataclass",
        # types that build functions, code or frames
        "FunctionType", "CodeType", "FrameType", "TracebackType", "CellType", "LambdaType",
        # asyncio: processes, sockets, pipes, threads, signals, loop/policy replacement, task internals
        "create_subprocess_exec", "create_subprocess_shell", "subprocess_exec", "subprocess_shell",
        "open_connection", "open_unix_connection", "create_connection", "create_unix_connection",
        "create_server", "create_unix_server", "start_server", "start_unix_server", "create_datagram_endpoint",
        "connect_accepted_socket", "connect_read_pipe", "connect_write_pipe", "sock_recv", "sock_recv_into",
        "sock_recvfrom", "sock_recvfrom_into", "sock_sendall", "sock_sendto", "sock_connect", "sock_accept",
        "sock_sendfile", "sendfile", "start_tls", "getaddrinfo", "getnameinfo", "run_in_executor",
        "set_default_executor", "to_thread", "add_reader", "add_writer", "remove_reader", "remove_writer",
        "add_signal_handler", "remove_signal_handler", "add_child_handler", "get_child_watcher",
        "set_child_watcher", "set_event_loop", "set_event_loop_policy", "get_event_loop_policy",
        "set_task_factory", "get_task_factory", "set_exception_handler", "get_exception_handler",
        "call_exception_handler", "get_extra_info", "get_coro", "get_stack", "print_stack", "all_tasks",
        # uuid node discovery may spawn ifconfig/ip
        "getnode", "uuid1",
    }
)  # fmt: skip
"""Attribute names no sandboxed code may touch, on any object (checked at compile time AND at run time)."""

# A submodule of an allowed package is allowed, except below (asyncio: its submodules hold process,
# socket and pipe plumbing; json.tool reads files named on the command line).
_CLOSED_PACKAGES: Final = frozenset({"asyncio"})
_DENIED_SUBMODULES: Final = frozenset({"json.tool"})
# Pure-Python helpers that C code of an allowed module imports lazily through the caller's
# ``__import__`` (the sandbox's guarded one): helper -> the module that needs it.
_INTERNAL_IMPORTS: Final = {"_strptime": "datetime"}
# Base classes that set no private attributes of their own on instances (builtins: object,
# Exception, dict...; typing's Generic/Protocol; abc.ABC; enum's private names all end in "_").
_TRANSPARENT_BASES: Final = frozenset({"builtins", "typing", "abc", "enum"})
# Settings objects of allowed modules whose attributes are the documented way to configure them.
_SETTABLE: Final = frozenset({("decimal", "Context")})
# Names whose VALUE decides: str.format -> guarded formatter; builtins.compile/open never handed out.
_VALUE_CHECKED: Final = frozenset({"format", "format_map", "compile", "open"})
_OK_NAMES_CAP: Final = 65536

_SAFE_BUILTIN_NAMES: Final = (
    "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "classmethod", "complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash",
    "hex", "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
    "object", "oct", "ord", "pow", "print", "property", "range", "repr", "reversed", "round", "set", "slice",
    "sorted", "staticmethod", "str", "sum", "super", "tuple", "zip", "Ellipsis", "NotImplemented", "None",
    "True", "False", "__build_class__",
)  # fmt: skip
_DISABLED_BUILTINS: Final = (
    "eval", "exec", "compile", "input", "breakpoint", "globals", "locals", "vars", "memoryview",
    "help", "exit", "quit", "copyright", "credits", "license",
)  # fmt: skip
_DANGEROUS_VALUES: Final = frozenset(id(getattr(builtins, name)) for name in ("compile", "open"))
_FORMAT_NAMES: Final = frozenset({"format", "format_map"})

_IN_PLACE: Final[dict[str, Callable[[object, object], object]]] = {
    "+=": _operator.iadd,
    "-=": _operator.isub,
    "*=": _operator.imul,
    "/=": _operator.itruediv,
    "//=": _operator.ifloordiv,
    "%=": _operator.imod,
    "**=": _operator.ipow,
    "<<=": _operator.ilshift,
    ">>=": _operator.irshift,
    "|=": _operator.ior,
    "^=": _operator.ixor,
    "&=": _operator.iand,
    "@=": _operator.imatmul,
}

if TYPE_CHECKING:
    _T = TypeVar("_T")
_MISSING: Final = object()
_STR_FORMAT: Final = str.format
_STR_FORMAT_MAP: Final = str.format_map
_BuiltinMethod = type("".format)  # also the type of builtin functions: open, compile
# Every value check_value acts on (by value: the format names aside) is an instance of one of these: a
# module or a proxy of one, a builtin function (_DANGEROUS_VALUES); check_captured also acts on the raw
# formatters: "x".format (a builtin method) and str.format (a method descriptor).
_CHECKED_KINDS: Final = (ModuleType, _BuiltinMethod)
_CAPTURE_CHECKED_KINDS: Final = (*_CHECKED_KINDS, type(_STR_FORMAT))


ATTRIBUTE_GETTERS: Final = "_codeact_getters_"
"""The runtime function a restricted module calls first: binds the per-name attribute getters it uses."""

_GETTER_PREFIX: Final = "_codeact_attr_"
_NoneType: Final = type(None)


def attribute_getter_name(attr: str) -> str | None:
    """The namespace name of the getter for ``obj.<attr>`` reads, or None when they go through ``_getattr_``.

    A public name that is not denied and whose value needs no check of its own (``format``, ...) reads
    through a getter of its own: ``obj.x`` compiles to ``_codeact_attr_x_(obj)``, a function that does the
    native ``obj.x`` (specialised by the interpreter like any attribute load) and then exactly the value
    check ``_getattr_`` does. Private and dunder names keep ``_getattr_`` (their decision depends on the object).
    """
    if type(attr) is not str or not attr.isidentifier() or attr.startswith("_"):
        return None
    if attr in DENIED_ATTRIBUTES or attr in _VALUE_CHECKED:
        return None
    return f"{_GETTER_PREFIX}{attr}_"


def _getter_template(check_value: Callable[[object, str, object], object], name: str) -> Callable[[object], object]:
    # The template of every attribute getter: `_attribute_getter` swaps the attribute name into a copy of
    # `get`'s code. For values of these exact built-in types `check_value` is provably a no-op (they are not
    # modules, nor proxies of one: their `__class__` is object's, and built-in types take no new attributes;
    # and no dangerous builtin is one of them), so they return at once; any other value takes the full check.
    def get(obj: object) -> object:
        value = obj.codeact_attribute_placeholder  # type: ignore[attr-defined]
        cls = type(value)
        if cls is int or cls is str or cls is float or cls is bool or cls is _NoneType or cls is list:
            return value
        if cls is dict or cls is tuple:
            return value
        return check_value(obj, name, value)

    return get


_GETTER_CODE: Final[CodeType] = next(c for c in _getter_template.__code__.co_consts if isinstance(c, CodeType))


def _attribute_getter(check_value: Callable[[object, str, object], object], name: str) -> Callable[[object], object]:
    """``lambda obj: _getattr_(obj, name)`` for one allowed public name, as a specialisable native load."""
    code = _GETTER_CODE.replace(
        co_names=tuple(name if n == "codeact_attribute_placeholder" else n for n in _GETTER_CODE.co_names),
        co_name=f"getattr_{name}",
        co_qualname=f"getattr_{name}",
    )
    cells = {"check_value": CellType(check_value), "name": CellType(name)}
    return FunctionType(code, globals(), code.co_name, None, tuple(cells[v] for v in code.co_freevars))


def is_private_name(name: str) -> bool:
    """``_cache``, ``_helper``: one leading underscore, none trailing (the guard names are ``_x_``).

    Sandboxed code may bind such names and read such attributes of objects of the classes it
    defined (``self._v``); other objects' private attributes stay out of reach.
    """
    return len(name) > 1 and name[0] == "_" and name[1] != "_" and name[-1] != "_"


def _name_allowed(name: str) -> bool:
    if name.startswith("_"):
        return name in ALLOWED_UNDERSCORE_ATTRIBUTES
    return name not in DENIED_ATTRIBUTES


def _pattern_public(name: str) -> bool:
    """A name whose value class patterns check only for modules and ``_DANGEROUS_VALUES`` (_match_guard.py)."""
    return _name_allowed(name) and name not in _FORMAT_NAMES


def _denied_attribute(name: object) -> AttributeError:
    return AttributeError(f"attribute {name!r} is not allowed in sandboxed code")


def _inplacevar_(op: str, target: object, value: object) -> object:
    """``x op= y`` as RestrictedPython spells it (kept for compatibility; names use native in-place ops)."""
    try:
        func = _IN_PLACE[op]
    except KeyError:
        raise TypeError(f"unsupported in-place operator {op!r}") from None
    return func(target, value)


def _getiter_(obj: Iterable[object]) -> Iterator[object]:
    return iter(obj)


def _unpack_sequence_(value: Iterable[object], spec: object, getiter: object) -> list[object]:
    # Compatibility only: our transform leaves unpacking native (iteration is not restricted here).
    return list(value)


def _iter_unpack_sequence_(value: Iterable[object], spec: object, getiter: object) -> Iterator[object]:
    return iter(value)


def _apply_(func: Callable[..., object], *args: object, **kwargs: object) -> object:
    return func(*args, **kwargs)


class _Namespace:
    """The guards of one sandbox namespace (closures over its allow-list and its own classes)."""

    def __init__(self, allowed_imports: Collection[str]) -> None:
        self.allowed = frozenset(allowed_imports)
        self.allowed_text = ", ".join(sorted(self.allowed)) or "none"
        # types whose instances sandboxed code may change in place; classes are added as they are defined:
        # all by identity in owned_ids, those of metaclass `type` also in owned (see _ClassFactory)
        self.owned: set[object] = {dict, list}
        self.owned_ids: dict[int, object] = {id(dict): dict, id(list): list}
        self.ok_names: set[str] = set()
        self.getters: dict[str, Callable[[object], object]] = {}
        self.namespace: dict[str, object] = {}
        self.pattern_classes: PatternClasses | None = None  # made by the first class pattern (pattern_class)

    # -- modules ----------------------------------------------------------------------------------
    def module_allowed(self, name: str) -> bool:
        top, dot, _rest = name.partition(".")
        if top not in self.allowed:
            if name in _INTERNAL_IMPORTS:  # a helper the stdlib's C code imports on behalf of an allowed module
                return _INTERNAL_IMPORTS[name] in self.allowed
            return name in self.allowed
        if not dot:
            return True
        return top not in _CLOSED_PACKAGES and name not in _DENIED_SUBMODULES

    def import_denied(self, name: str) -> ImportError:
        return ImportError(
            f"import of {name!r} is not allowed in sandboxed code (allowed: {self.allowed_text})", name=name
        )

    def check_value(self, obj: object, name: str, value: object) -> object:
        # What this acts on, and nothing else: a module, a _DANGEROUS_VALUES builtin, the names in
        # _FORMAT_NAMES. Class patterns (_match_guard.py) call it only for those (and only for values of
        # _CHECKED_KINDS), so keep the four in step.
        if isinstance(value, ModuleType) and not self.module_allowed(value.__name__):
            raise AttributeError(
                f"attribute {name!r} is module {value.__name__!r}, which is not allowed in sandboxed code "
                f"(allowed modules: {self.allowed_text})"
            )
        if id(value) in _DANGEROUS_VALUES:
            raise _denied_attribute(name)
        if name in _FORMAT_NAMES:
            return self.guard_format(value)
        return value

    def guard_format(self, value: object) -> object:
        if value is _STR_FORMAT:
            return self.str_format
        if value is _STR_FORMAT_MAP:
            return self.str_format_map
        template = getattr(value, "__self__", None)
        if type(value) is _BuiltinMethod and isinstance(template, str):
            if value.__name__ == "format":
                return lambda *args, **kwargs: self.str_format(template, *args, **kwargs)
            if value.__name__ == "format_map":
                return lambda mapping: self.str_format_map(template, mapping)
        return value

    def check_captured(self, *values: object) -> bool:
        """``_codeact_captured_(v1, ...)``: a case's captured values pass the check ``obj.name`` values pass.

        Runs before the case binds the names its pattern captured (sandbox/policy.py binds them to hidden
        names first), so a refused value never reaches a name the code can read. ``str.format`` is refused
        here rather than replaced (a capture cannot be swapped for the guarded formatter).
        """
        for value in values:
            cls = type(value)
            if cls is int or cls is str or not isinstance(value, _CAPTURE_CHECKED_KINDS):  # as in _match_guard.py
                continue
            if isinstance(value, ModuleType) and not self.module_allowed(value.__name__):
                raise AttributeError(
                    f"a match pattern captured module {value.__name__!r}, which is not allowed in sandboxed "
                    f"code (allowed modules: {self.allowed_text})"
                )
            formats = value is _STR_FORMAT or value is _STR_FORMAT_MAP
            if cls is _BuiltinMethod and not formats:  # "x".format: what the guarded formatter replaces
                formats = self.guard_format(value) is not value
            if formats or id(value) in _DANGEROUS_VALUES:
                raise AttributeError(
                    f"a match pattern captured {value!r}, which is not allowed in sandboxed code: "
                    "read it with an attribute in the case body instead"
                )
        return True

    def pattern_class(self, cls: object, positional: int, keywords: tuple[str, ...]) -> object:
        """``_codeact_pattern_class_``: the class a class pattern matches with (``PatternClasses.pattern_class``).

        The match guard is imported by the first class pattern a namespace runs, not by every start (most
        rounds have none). It cannot be replaced before that: restricted code reaches no module outside its
        allow-list (``codeact`` is never on it), and ``sys.modules`` only through ``sys`` itself, which hands
        it every module anyway. That first call then binds the namespace entry to the match guard's own
        ``pattern_class``, which every later class pattern calls directly.
        """
        classes = self.pattern_classes
        if classes is None:
            from codeact.sandbox.runtime._match_guard import PatternClasses

            classes = self.pattern_classes = PatternClasses(
                public=_pattern_public,
                read=self.pattern_read,
                check=self.pattern_check,
                checked_ids=_DANGEROUS_VALUES,
                checked_kinds=_CHECKED_KINDS,
            )
        # From now on the code calls the match guard's own method: one Python call per class pattern tried,
        # not two (the entry is a hidden name: only the runtime binds it).
        self.namespace[PATTERN_CLASS] = classes.pattern_class
        return classes.pattern_class(cls, positional, keywords)

    def pattern_read(self, obj: object, name: str) -> bool:
        """A class pattern's read of ``obj.<name>``, decided as the code's ``obj.<name>`` is (_match_guard.py).

        Returns:
            True when the attribute is there, False when it is missing (the pattern then fails).

        Raises:
            AttributeError: The name or the value is refused, as ``obj.<name>`` would be.
        """
        if not _name_allowed(name) and not (is_private_name(name) and self.private_allowed(obj, name)):
            raise _denied_attribute(name)
        value = getattr(obj, name, _MISSING)
        if value is _MISSING:
            return False
        self.pattern_check(obj, name, value)
        return True

    def pattern_check(self, obj: object, name: str, value: object) -> None:
        """Raise unless ``value`` (``obj.<name>``) is what the code's ``obj.<name>`` would give it."""
        if self.check_value(obj, name, value) is not value:  # str.format: the code's read gets a guarded one
            raise AttributeError(
                f"a class pattern cannot read {name!r} of a {type(obj).__name__!r} object in sandboxed code: "
                f"read it in the case body (`obj.{name}`)"
            )

    def str_format(self, template: str, /, *args: object, **kwargs: object) -> str:
        if not isinstance(template, str):
            raise TypeError("format() needs a str")
        if _needs_guarded_format(template):
            return self.formatter.vformat(template, args, kwargs)
        return _STR_FORMAT(template, *args, **kwargs)

    def str_format_map(self, template: str, mapping: Mapping[str, object], /) -> str:
        if not isinstance(template, str):
            raise TypeError("format_map() needs a str")
        if _needs_guarded_format(template):
            return self.formatter.vformat(template, (), mapping)
        return _STR_FORMAT_MAP(template, mapping)

    # -- attribute access -------------------------------------------------------------------------
    def slow_getattr(self, obj: object, name: str, default: object = _MISSING) -> object:
        if type(name) is not str:
            raise TypeError(f"attribute name must be a string, not {type(name).__name__!r}")
        if not _name_allowed(name):
            if is_private_name(name) and self.private_allowed(obj, name):
                value = getattr(obj, name, _MISSING) if default is not _MISSING else getattr(obj, name)
                return default if value is _MISSING else self.check_value(obj, name, value)
            if default is not _MISSING:
                return default
            raise _denied_attribute(name)
        if name not in _VALUE_CHECKED and len(self.ok_names) < _OK_NAMES_CAP:
            self.ok_names.add(name)
        if default is _MISSING:
            value = getattr(obj, name)
        else:
            value = getattr(obj, name, _MISSING)
            if value is _MISSING:
                return default
        return self.check_value(obj, name, value)

    def private_allowed(self, obj: object, name: str) -> bool:
        """Whether ``obj.<name>`` (a private name) belongs to the code.

        True when it was set on an instance of one of the code's classes, or the first class in the
        MRO that defines it is one of the code's classes.
        """
        owns = self.owns
        if isinstance(obj, type):
            classes: tuple[type, ...] = type.__dict__["__mro__"].__get__(obj)
        else:
            classes = type(obj).__mro__
            if not any(owns(c) for c in classes if c is not dict and c is not list):
                return False
            # The instance's own attributes count as the code's only when no stdlib base class could
            # have set them (`class L(asyncio.SelectorEventLoop)` must not hand out `self._ssock`).
            if all(owns(c) or getattr(c, "__module__", None) in _TRANSPARENT_BASES for c in classes):
                try:
                    instance_dict = object.__getattribute__(obj, "__dict__")
                except AttributeError:
                    instance_dict = None
                if type(instance_dict) is dict and name in instance_dict:
                    return True
        for cls in classes:
            if name in cls.__dict__:
                return owns(cls) and cls is not dict and cls is not list
        return False

    def owns(self, cls: object) -> bool:
        """Whether ``cls`` is dict, list or a class the code defined: by identity, no ``==`` or ``hash`` of its own."""
        return self.owned_ids.get(id(cls)) is cls

    def is_owned(self, obj: object) -> bool:
        cls = type(obj)
        if self.owns(cls):
            return True
        if isinstance(obj, type):
            return self.owns(obj)
        return cls is FunctionType and obj.__globals__ is self.namespace  # type: ignore[attr-defined]

    def bind_getters(self, *names: str) -> None:
        """``_codeact_getters_('x', 'y')``: the module's first statement binds the getters of the names it reads."""
        ns = self.namespace
        getters = self.getters
        for name in names:
            key = attribute_getter_name(name)
            if key is None:
                raise ValueError(f"no attribute getter for {name!r}")
            getter = getters.get(name)
            if getter is None:
                getter = getters[name] = _attribute_getter(self.check_value, name)
            ns[key] = getter  # bound again each time: the namespace holds nothing else under this name

    # -- imports ----------------------------------------------------------------------------------
    def guarded_import(
        self,
        name: str,
        globals: Mapping[str, object] | None = None,  # noqa: A002 - the signature of builtins.__import__
        locals: Mapping[str, object] | None = None,  # noqa: A002
        fromlist: Iterable[str] | None = (),
        level: int = 0,
    ) -> ModuleType:
        if level != 0:
            raise ImportError("relative imports are not allowed in sandboxed code")
        if type(name) is not str or not name:
            raise ImportError("import needs a module name")
        items = tuple(fromlist or ())
        if not items:
            # `import a.b` binds `a`: both must be allowed
            if not self.module_allowed(name) or not self.module_allowed(name.partition(".")[0]):
                raise self.import_denied(name)
            module: ModuleType = builtins.__import__(name, None, None, (), 0)
            return module
        if not self.module_allowed(name):
            # `from pkg import allowed_submodule` with only the submodule on the allow-list
            if not all(type(item) is str and self.module_allowed(f"{name}.{item}") for item in items):
                raise self.import_denied(name)
        builtins.__import__(name, None, None, (), 0)
        module = sys.modules[name]  # `from a.b import c` works on a.b, not on the package a
        for item in items:
            if item == "*":  # only plain (unrestricted) code gets here: the transform rejects star imports
                continue
            if type(item) is not str or not _name_allowed(item) or item.startswith("_"):
                raise ImportError(f"cannot import name {item!r} from {name!r}: not allowed in sandboxed code")
            value = getattr(module, item, _MISSING)
            if value is _MISSING:
                submodule = f"{name}.{item}"
                if not self.module_allowed(submodule):
                    raise self.import_denied(submodule)
                builtins.__import__(submodule, None, None, (), 0)
                continue
            if isinstance(value, ModuleType) and not self.module_allowed(value.__name__):
                raise self.import_denied(value.__name__)
            if id(value) in _DANGEROUS_VALUES or item in ("format", "format_map"):
                raise ImportError(f"cannot import name {item!r} from {name!r}: not allowed in sandboxed code")
        return module

    def build(self, *, restricted: bool) -> dict[str, object]:
        ns = self.namespace
        ok_names = self.ok_names
        owned = self.owned
        slow_getattr = self.slow_getattr
        is_owned = self.is_owned
        check_value = self.check_value

        def _getattr_(obj: object, name: str) -> object:
            if name in ok_names:
                value = getattr(obj, name)
                if isinstance(value, ModuleType):  # a subclass too (the slow path checks the same way)
                    return check_value(obj, name, value)
                return value
            return slow_getattr(obj, name)

        def _write_(obj: _T) -> _T | _WriteProxy:
            if type(obj) in owned:
                return obj
            if is_owned(obj):
                return obj
            cls = type(obj)
            if (getattr(cls, "__module__", None), cls.__qualname__) in _SETTABLE:  # getcontext().prec = 30
                return obj
            return _WriteProxy(obj)

        def guarded_getattr(obj: object, name: str, *default: object) -> object:
            if len(default) > 1:
                raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
            return slow_getattr(obj, name, default[0] if default else _MISSING)

        def guarded_hasattr(obj: object, name: str) -> bool:
            try:
                slow_getattr(obj, name)
            except AttributeError:
                return False
            return True

        def guarded_setattr(obj: object, name: str, value: object) -> None:
            if type(name) is not str:
                raise TypeError(f"attribute name must be a string, not {type(name).__name__!r}")
            if (name.startswith("_") and not is_private_name(name)) or name in DENIED_ATTRIBUTES:
                raise _denied_attribute(name)
            setattr(_write_(obj), name, value)

        def guarded_delattr(obj: object, name: str) -> None:
            if type(name) is not str:
                raise TypeError(f"attribute name must be a string, not {type(name).__name__!r}")
            if (name.startswith("_") and not is_private_name(name)) or name in DENIED_ATTRIBUTES:
                raise _denied_attribute(name)
            delattr(_write_(obj), name)

        def guarded_dir(*args: object) -> list[str]:
            if len(args) != 1:
                raise TypeError("dir() needs exactly one argument in sandboxed code")
            return [name for name in dir(args[0]) if _name_allowed(name)]

        def _inplaceattr_(obj: object, name: str, op: str, value: object) -> None:
            setattr(_write_(obj), name, _inplacevar_(op, _getattr_(obj, name), value))

        def _inplaceitem_(obj: Any, key: object, op: str, value: object) -> None:  # any subscriptable object
            _write_(obj)[key] = _inplacevar_(op, obj[key], value)

        def _codeact_import_star_(name: str) -> None:
            # `from m import *`: the public names a `from m import name` would give, each checked alike
            module = self.guarded_import(name, None, None, ("*",), 0)
            public = getattr(module, "__all__", None)
            if isinstance(public, list | tuple):
                names = [n for n in public if type(n) is str]
            else:
                names = [n for n in dir(module) if not n.startswith("_")]
            for item in names:
                if item.startswith("_") or not _name_allowed(item) or item in ("format", "format_map"):
                    continue
                value = getattr(module, item, _MISSING)
                if value is _MISSING or id(value) in _DANGEROUS_VALUES:
                    continue
                if isinstance(value, ModuleType) and not self.module_allowed(value.__name__):
                    continue
                ns[item] = value

        self.formatter = _GuardedFormatter(_getattr_)
        self.str_format_bound = self.str_format
        safe = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES}
        for name, value in vars(builtins).items():
            if isinstance(value, type) and issubclass(value, BaseException):
                safe[name] = value
        for name in _DISABLED_BUILTINS:
            safe[name] = _disabled(name)
        safe.update(
            {
                "__import__": self.guarded_import,
                "getattr": guarded_getattr,
                "hasattr": guarded_hasattr,
                "setattr": guarded_setattr,
                "delattr": guarded_delattr,
                "dir": guarded_dir,
                "type": _SafeType,
                "open": _read_only_open,
            }
        )
        if not restricted:
            safe = dict(vars(builtins))
            safe["__import__"] = self.guarded_import
        ns["__builtins__"] = safe
        ns["__name__"] = SANDBOX_MODULE_NAME
        ns["_codeact_show_"] = show_value
        if restricted:
            ns.update(
                {
                    "__metaclass__": _ClassFactory(owned, self.owned_ids),
                    "_getattr_": _getattr_,
                    "_write_": _write_,
                    "_getitem_": _operator.getitem,
                    "_getiter_": _getiter_,
                    "_iter_unpack_sequence_": _iter_unpack_sequence_,
                    "_unpack_sequence_": _unpack_sequence_,
                    "_inplacevar_": _inplacevar_,
                    "_inplaceattr_": _inplaceattr_,
                    "_inplaceitem_": _inplaceitem_,
                    "_apply_": _apply_,
                    "_codeact_import_star_": _codeact_import_star_,
                    ATTRIBUTE_GETTERS: self.bind_getters,
                    PATTERN_CLASS: self.pattern_class,
                    CAPTURED: self.check_captured,
                    MATCH_VALUES: SimpleNamespace,
                }
            )
        return ns


def show_value(value: object, label: str | None = None) -> None:
    """``_codeact_show_``: a bare expression's value, printed as in a REPL (sandbox/_last_value.py).

    None is not shown; with ``label`` (when a round shows several values) the line is ``label -> repr``.
    """
    if value is not None:
        print(f"{label} -> {value!r}" if label else repr(value))


def restricted_globals(*, allowed_imports: Collection[str]) -> dict[str, object]:
    """A fresh namespace for code compiled with the RestrictedPython policy.

    Run the code (and the prelude of restored definitions) in the returned dict itself, not a copy:
    functions defined by the code are recognised as its own by their ``__globals__``.

    Args:
        allowed_imports: Top-level module names ``import`` may load (submodules follow their package,
            except asyncio's and ``json.tool``).

    Returns:
        ``{"__builtins__": <safe builtins>, "__name__": "__main__", "__metaclass__": ..., "_getattr_": ...,
        "_write_": ..., "_getitem_": ..., "_getiter_": ..., "_inplacevar_": ..., ...}``.
    """
    return _Namespace(allowed_imports).build(restricted=True)


def plain_globals(*, allowed_imports: Collection[str] | None) -> dict[str, object]:
    """A fresh namespace for code compiled WITHOUT the RestrictedPython transform (full builtins).

    Args:
        allowed_imports: When given, ``import`` is limited to these modules as in ``restricted_globals``;
            ``None`` leaves the real ``__import__`` (the container or OS layer is the boundary).

    Returns:
        ``{"__builtins__": <builtins>, "__name__": "__main__"}``.
    """
    if allowed_imports is None:
        return {"__builtins__": builtins, "__name__": SANDBOX_MODULE_NAME}
    return _Namespace(allowed_imports).build(restricted=False)
