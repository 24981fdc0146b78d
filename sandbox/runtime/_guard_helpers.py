"""Helpers of the sandbox guards (sandbox/runtime/guards.py): guarded formatting, write proxies, ``type``, classes.

Standard library only (runs inside the sandbox).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]  # C helpers behind str.format parsing (stdlib)
import os
from types import ModuleType

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import string
    from collections.abc import Callable, Mapping, Sequence


class _GuardedFormatter:
    """``str.format`` whose ``{0.attr}`` / ``{0[key]}`` fields go through the attribute guard.

    A ``string.Formatter`` built on first use: ``string`` imports ``re`` (and compiles a pattern), which
    a runtime start does not need; only a round formatting with a lookup in a field gets here.
    """

    def __init__(self, getattr_: Callable[[object, str], object]) -> None:
        self._getattr = getattr_
        self._formatter: string.Formatter | None = None

    def vformat(self, format_string: str, args: Sequence[object], kwargs: Mapping[str, object]) -> str:
        """``string.Formatter.vformat``, every field looked up through the attribute guard."""
        if self._formatter is None:
            self._formatter = _formatter_class()(self._getattr)
        return self._formatter.vformat(format_string, args, kwargs)


_FORMATTER_CLASS: list[Callable[[Callable[[object, str], object]], string.Formatter]] = []  # by _formatter_class


def _formatter_class() -> Callable[[Callable[[object, str], object]], string.Formatter]:
    if _FORMATTER_CLASS:
        return _FORMATTER_CLASS[0]
    import string

    class GuardedFormatter(string.Formatter):
        def __init__(self, getattr_: Callable[[object, str], object]) -> None:
            self._getattr = getattr_

        def get_field(
            self, field_name: str, args: Sequence[object], kwargs: Mapping[str, object]
        ) -> tuple[object, str]:
            first, rest = _string.formatter_field_name_split(field_name)
            obj = self.get_value(first, args, kwargs)
            for is_attr, key in rest:
                obj = self._getattr(obj, key) if is_attr else obj[key]
            return obj, first

    _FORMATTER_CLASS.append(GuardedFormatter)
    return GuardedFormatter


def _needs_guarded_format(template: str) -> bool:
    """Whether a format string looks anything up (``{0.x}``, ``{a[k]}``, nested fields in a spec)."""
    for _literal, field, spec, _conversion in _string.formatter_parser(template):
        if field is not None and ("." in field or "[" in field):
            return True
        if spec and "{" in spec:
            return True
    return False


class _WriteProxy:
    """What ``_write_`` returns for objects sandboxed code does not own: item writes pass, attributes do not."""

    __slots__ = ("_target",)

    def __init__(self, target: object) -> None:
        object.__setattr__(self, "_target", target)

    def __setattr__(self, name: str, value: object) -> None:
        target = object.__getattribute__(self, "_target")
        raise AttributeError(_write_denied(target, name))

    def __delattr__(self, name: str) -> None:
        target = object.__getattribute__(self, "_target")
        raise AttributeError(_write_denied(target, name))

    def __setitem__(self, key: object, value: object) -> None:
        object.__getattribute__(self, "_target")[key] = value

    def __delitem__(self, key: object) -> None:
        del object.__getattribute__(self, "_target")[key]


def _write_denied(target: object, name: str) -> str:
    if isinstance(target, ModuleType):
        what = f"module {target.__name__!r}"
    elif isinstance(target, type):
        what = f"class {target.__qualname__!r}"
    else:
        what = f"{type(target).__name__!r} object"
    return (
        f"cannot set or delete attribute {name!r} of {what} in sandboxed code: "
        "only objects of classes defined in the code can be changed"
    )


class _TypeMeta(type):
    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, type)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, type)

    def __call__(cls, *args: object, **kwargs: object) -> object:
        if len(args) == 1 and not kwargs:
            return type(args[0])
        raise TypeError(
            "type() with three arguments (creating a class) is not allowed in sandboxed code; use a class statement"
        )


class _SafeType(metaclass=_TypeMeta):
    """``type(obj)`` only; ``isinstance(x, type)`` still works."""


_SafeType.__name__ = _SafeType.__qualname__ = "type"
_SafeType.__module__ = "builtins"


def _disabled(name: str) -> Callable[..., object]:
    def disabled(*args: object, **kwargs: object) -> object:
        raise NameError(f"{name}() is not allowed in sandboxed code")

    disabled.__name__ = disabled.__qualname__ = name
    return disabled


def _calculate_metaclass(bases: tuple[type, ...]) -> type:
    winner: type = type
    for base in bases:
        meta = type(base)
        if issubclass(winner, meta):
            continue
        if issubclass(meta, winner):
            winner = meta
            continue
        raise TypeError(
            "metaclass conflict: the metaclass of a derived class must be a (non-strict) subclass "
            "of the metaclasses of all its bases"
        )
    return winner


_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_DICT = type.__dict__["__dict__"]


def _plain_dict(namespace: object) -> bool:
    """A dict whose item reads are dict's own: no ``__getitem__`` or ``__missing__`` in its class or a base.

    A class body reads names (``_write_``, ``_getattr_``, the getters) from its namespace before the module's:
    a mapping that answers those reads (a ``defaultdict``, a ``dict`` subclass of the code's, returned by a
    metaclass's ``__prepare__``) would hand the body guards of its own. Checked on the MRO's own ``__dict__``s
    (``type``'s descriptors, which a metaclass cannot override). ``enum``'s namespace only overrides ``__setitem__``.
    """
    classes = _TYPE_MRO.__get__(type(namespace))
    if not any(cls is dict for cls in classes):  # not isinstance: that believes a `__class__` of the object's own
        return False
    for cls in classes:
        if cls is dict or cls is object:
            continue
        own = _TYPE_DICT.__get__(cls)
        if "__getitem__" in own or "__missing__" in own:
            return False
    return True


class _ClassFactory:
    """``__metaclass__`` for RestrictedPython's ``class X(..., metaclass=__metaclass__)`` rewrite.

    Creates the class with the metaclass Python would have picked (so ``Enum``, ``NamedTuple``,
    ``Generic``, ``Protocol`` subclasses work) and records it as defined by sandboxed code: by identity
    in ``owned_ids`` (id -> class; the class is kept, so its id is never reused), and in ``owned`` too when
    its metaclass is exactly ``type``. Set membership compares with ``==`` and ``hash``, which a metaclass
    the code wrote can answer as it likes (``__eq__`` always true, the ``hash`` of a stdlib class):
    ``owned`` holds only classes whose ``==`` and ``hash`` are ``type``'s own (identity), so
    ``type(obj) in owned`` never takes another class for one of them.
    """

    __slots__ = ("_owned", "_owned_ids")

    def __init__(self, owned: set[object], owned_ids: dict[int, object]) -> None:
        self._owned = owned
        self._owned_ids = owned_ids

    def __prepare__(self, name: str, bases: tuple[type, ...], **kwargs: object) -> Mapping[str, object]:
        namespace = _calculate_metaclass(bases).__prepare__(name, bases, **kwargs)
        if type(namespace) is not dict and not _plain_dict(namespace):
            raise TypeError(
                f"class {name!r}: its metaclass's __prepare__ returned a {type(namespace).__name__!r}; sandboxed "
                "code needs a plain dict as a class namespace (the class body looks its guards up in it)"
            )
        return namespace

    def __call__(self, name: str, bases: tuple[type, ...], namespace: dict[str, object], **kwargs: object) -> type:
        cls: type = _calculate_metaclass(bases)(name, bases, namespace, **kwargs)
        self._owned_ids[id(cls)] = cls
        if type(cls) is type:
            self._owned.add(cls)
        return cls


_READ_MODES = frozenset({"r", "rt", "rb", "tr", "br"})


def _read_only_open(file: object, mode: str = "r", buffering: int = -1, encoding: str | None = None,
                    errors: str | None = None, newline: str | None = None) -> object:  # fmt: skip
    """``open()`` of sandboxed code: reads files inside the working directory, nothing else.

    The run's input files are placed there (``Sandbox.input_files``); the path is resolved (``..``
    and symlinks followed) before the check, so nothing outside the working directory is reachable.
    Writing is refused: results leave the sandbox as variables, or as files a plain-CPython sandbox
    writes into ``outputs/``.
    """
    if type(file) is not str:
        raise TypeError(f"open() in sandboxed code takes a file name (str), not {type(file).__name__}")
    if mode not in _READ_MODES:
        raise PermissionError(
            f"open({file!r}, {mode!r}): sandboxed code may only read files (mode 'r' or 'rb'); "
            "keep results in variables instead"
        )
    root = os.path.realpath(os.getcwd())
    path = os.path.realpath(os.path.join(root, file))
    if os.path.commonpath([root, path]) != root:
        raise PermissionError(f"open({file!r}): sandboxed code may only read files in its working directory")
    return open(path, mode, buffering, encoding, errors, newline)  # noqa: PTH123, SIM115 - the guarded open
