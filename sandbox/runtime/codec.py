"""The tagged JSON codec for variables, toolkit arguments and toolkit results.

Standard library only (runs inside the sandbox; the host and the toolkit bridge import it too).

``encode(value)`` returns plain JSON data (dict/list/str/int/float/bool/None). Values JSON cannot hold
are tagged objects ``{"$type": <tag>, "v": <payload>}``:

==============  =========================================================  ============================
tag             payload ``v``                                              decodes to
==============  =========================================================  ============================
``tuple``       list of items                                              ``tuple``
``set``         list of items                                              ``set``
``frozenset``   list of items                                              ``frozenset``
``dict``        list of ``[key, value]`` pairs (non-str keys, or a         ``dict``
                ``"$type"`` key in a plain dict: the escape)
``float``       ``"nan"``, ``"inf"`` or ``"-inf"``                         ``float``
``bytes``       base64 text                                                ``bytes``
``bytearray``   base64 text                                                ``bytearray``
``datetime``    ISO 8601 (offset kept when tz-aware; zone names are not)  ``datetime.datetime``
``date``        ISO 8601                                                   ``datetime.date``
``time``        ISO 8601                                                   ``datetime.time``
``timedelta``   ``[days, seconds, microseconds]``                          ``datetime.timedelta``
``decimal``     text                                                       ``decimal.Decimal``
``complex``     ``[real, imag]`` (encoded floats)                          ``complex``
``fraction``    ``[numerator, denominator]``                               ``fractions.Fraction``
``uuid``        canonical text                                             ``uuid.UUID``
``range``       ``[start, stop, step]``                                    ``range``
``deque``       list of items                                              ``collections.deque``
``enum``        the member's encoded value; ``"class"``, ``"name"``        member (class in registry)
                                                                           or the plain value
``dataclass``   ``{field: value}``; ``"class"``                            instance (class in registry)
                                                                           or ``Record``
``model``       ``model_dump()`` of a pydantic model; ``"class"``          ``model_validate`` (class in
                                                                           registry) or ``Record``
``namedtuple``  ``{field: value}``; ``"class"``                            instance (class in registry)
                                                                           or a plain ``tuple``
==============  =========================================================  ============================

With ``data=True`` (the runtime's variable capture) numpy, pandas and sympy values get the tags of
``_codec_data`` (``ndarray``, ``dataframe``, ``sympy``, ...), which only ``decode(obj, data=True)``
inside the sandbox turns back into values; everywhere else they are unknown tags, kept opaque.

Readers outside the sandbox never see the tags: ``plain(obj)`` gives plain JSON (for clients that
want data), ``python_repr(obj)`` the text Python's ``repr`` shows (``('A', 4)``; for a model or a
person reading the value), ``display_text(obj)`` JSON text for plain data and that repr otherwise.

``"class"`` is the class ``__qualname__``. ``decode(obj, registry={"Point": Point})`` re-creates
instances of the classes it is given (the runtime passes the classes defined in the namespace, so a
dataclass instance captured in round 1 is a ``Point`` again in round 3); without one, dataclasses and
models come back as ``Record`` (a ``dict`` that also allows ``record.field``) and enum members as
their value. Decoding never imports or looks up anything by name beyond that registry: it is safe on
hostile input (errors raise ``Undecodable``).

Lossy on purpose: subclasses of str/int/float/list/dict (``IntEnum`` members nested in plain JSON data,
``OrderedDict``, ``Counter``, ``defaultdict``) encode as the base type; tz-aware datetimes keep their
UTC offset, not their zone name. Circular references raise ``Unencodable("circular reference")``.
"""

from __future__ import annotations

import binascii
import sys

from codeact.sandbox.runtime._codec_data import encode_data
from codeact.sandbox.runtime._codec_decode import decode, loads
from codeact.sandbox.runtime._codec_plain import plain
from codeact.sandbox.runtime._codec_repr import display_text, has_tags, python_repr
from codeact.sandbox.runtime._codec_types import TAG, JsonObject, JsonValue, Record, TooLarge, Undecodable, Unencodable
from codeact.sandbox.runtime.protocol import compact_json

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import datetime
    from collections import deque
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any, Protocol, TypeGuard, TypeVar
else:  # `collections` (~1 ms of a cold start) only re-exports its C half's deque
    from _collections import deque

__all__ = [
    "TAG",
    "Record",
    "TooLarge",
    "Undecodable",
    "Unencodable",
    "decode",
    "display_text",
    "dumps",
    "encode",
    "encode_sized",
    "has_tags",
    "loads",
    "plain",
    "python_repr",
]


_json_dumps = compact_json  # json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode

if TYPE_CHECKING:
    _J = TypeVar("_J")

    class _Model(Protocol):
        """A pydantic model, as the encoder sees one."""

        def model_dump(self) -> object: ...


# -- encode -----------------------------------------------------------------------------------------


def encode(value: object, *, max_bytes: int | None = None, data: bool = False) -> JsonValue:
    """Encode ``value`` as JSON-able data (see the module docstring for the tags).

    Args:
        value: Any value.
        max_bytes: Refuse values whose compact JSON exceeds this many bytes (``TooLarge``).
        data: Also encode numpy, pandas and sympy values (``_codec_data``'s tags, decoded only inside
            the sandbox): the runtime does for the variables it captures.

    Returns:
        dict/list/str/int/float/bool/None data. Plain JSON input may be returned as is (not copied).

    Raises:
        Unencodable: The value (or something inside it) cannot be encoded; ``TooLarge`` over ``max_bytes``.
    """
    return _encode(value, max_bytes, data)[0]


def encode_sized(value: object, *, max_bytes: int | None = None, data: bool = False) -> tuple[JsonValue, int]:
    """``encode`` plus the size of the result as compact JSON in UTF-8 bytes.

    Args:
        value: Any value.
        max_bytes: As in ``encode``.
        data: As in ``encode``.

    Returns:
        ``(data, size)``.

    Raises:
        Unencodable: As in ``encode``.
    """
    encoded, text = _encode(value, max_bytes, data)
    if text is None:
        text = _json_dumps(encoded)
    return encoded, _utf8_len(text)


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def dumps(value: object, *, max_bytes: int | None = None) -> str:
    """``encode`` then compact JSON text.

    Args:
        value: Any value.
        max_bytes: As in ``encode``.

    Returns:
        JSON text.

    Raises:
        Unencodable: As in ``encode``.
    """
    data, text = _encode(value, max_bytes)
    return text if text is not None else _json_dumps(data)


def _encode(value: object, max_bytes: int | None, with_data: bool = False) -> tuple[JsonValue, str | None]:
    try:
        data = value if _plain_json(value) else _Encoder(with_data).encode(value)
    except RecursionError:
        raise Unencodable("nesting too deep") from None
    text: str | None = None
    if max_bytes is not None:
        text = _json_dumps(data)
        _check_size(text, max_bytes)
    return data, text


def _plain_json(value: object) -> TypeGuard[JsonValue]:
    """Whether ``value`` is a dict or list that is JSON data already (``_is_plain``)."""
    kind = type(value)
    if kind is not dict and kind is not list:
        return False
    try:
        return _is_plain(value)
    except RecursionError:  # deep or circular: the slow path says which
        return False


def _is_plain(value: object) -> bool:
    """Whether ``value`` is JSON data already (exact types, str keys, finite floats, no ``"$type"`` key)."""
    if type(value) is dict:
        if TAG in value:
            return False
        for key, item in value.items():
            if type(key) is not str:
                return False
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is float:
                if item - item == 0.0:  # math.isfinite (inf - inf and nan - nan are nan), without importing math
                    continue
                return False
            if not _is_plain(item):
                return False
        return True
    if type(value) is list:
        for item in value:
            kind = type(item)
            if kind is str or kind is int or kind is bool or item is None:
                continue
            if kind is float:
                if item - item == 0.0:  # math.isfinite (inf - inf and nan - nan are nan), without importing math
                    continue
                return False
            if not _is_plain(item):
                return False
        return True
    return False


def _check_size(text: str, max_bytes: int | None) -> None:
    if max_bytes is None or len(text) * 4 <= max_bytes:
        return
    size = _utf8_len(text)
    if size > max_bytes:
        raise TooLarge(size, max_bytes)


def _tagged(tag: str, payload: JsonValue, **extra: JsonValue) -> JsonObject:
    return {TAG: tag, **extra, "v": payload}


def _float(value: float) -> JsonValue:
    if value - value == 0.0:  # finite: math.isfinite without importing math (~0.15 ms of a cold start)
        return value
    return _tagged("float", "nan" if value != value else ("inf" if value > 0 else "-inf"))


def _class_name(value: object) -> str:
    return str(type(value).__qualname__)


class _Encoder:
    """The slow path: one pass with cycle detection over values the C encoder cannot take as they are."""

    def __init__(self, data: bool = False) -> None:
        self.active: set[int] = set()
        self.data = data

    def roundtrip(self, encoded: JsonValue) -> object:
        """``encoded`` decoded as the sandbox will restore it (the data encoders verify with it)."""
        return decode(encoded, data=True)

    def encode(self, value: Any) -> JsonValue:  # Any: `kind is str` narrows it, which mypy cannot follow
        kind = type(value)
        if kind is str or kind is int or kind is bool or value is None:
            scalar: str | int | bool | None = value
            return scalar
        if kind is float:
            return _float(value)
        handler = _EXACT.get(kind)
        if handler is not None:
            return handler(self, value)
        return self.other(value)

    def container(self, value: object, build: Callable[[], _J]) -> _J:
        key = id(value)
        if key in self.active:
            raise Unencodable("circular reference")
        self.active.add(key)
        try:
            return build()
        finally:
            self.active.discard(key)

    def items(self, values: Iterable[object]) -> list[JsonValue]:
        return [self.encode(item) for item in values]

    def encode_list(self, value: list[object]) -> JsonValue:
        return self.container(value, lambda: self.items(value))

    def encode_dict(self, value: Mapping[Any, object]) -> JsonValue:
        def build() -> JsonValue:
            if TAG not in value and all(type(key) is str for key in value):
                return {key: self.encode(item) for key, item in value.items()}
            return _tagged("dict", [[self.encode(key), self.encode(item)] for key, item in value.items()])

        return self.container(value, build)

    def fields(self, value: object, names: Iterable[str]) -> JsonObject:
        return {name: self.encode(getattr(value, name)) for name in names}

    def other(self, value: object) -> JsonValue:  # noqa: C901 - one isinstance ladder, in priority order
        if _DATES is None and _stdlib_types_possible():
            _add_stdlib_types()  # the first value since datetime, decimal or fractions was imported
            handler = _EXACT.get(type(value))
            if handler is not None:
                return handler(self, value)
        if self.data:
            tagged = self.container(value, lambda: encode_data(self, value))
            if tagged is not None:
                return tagged
        if isinstance(value, Record):
            return self.container(
                value,
                lambda: _tagged(value._codeact_kind, self.fields_of_mapping(value), **{"class": value._codeact_class}),
            )
        enum = sys.modules.get("enum")  # no Enum exists before its module is imported (a runtime does not)
        if enum is not None and isinstance(value, enum.Enum):
            return _tagged("enum", self.encode(value.value), **{"class": _class_name(value), "name": value.name})
        if isinstance(value, bool):
            return bool(value)
        if isinstance(value, str):
            return str(value)
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            return _float(float(value))
        dates = _DATES
        if dates is not None and isinstance(value, dates[0]):  # datetime is a date subclass: both by isoformat
            tag = "datetime" if isinstance(value, dates[1]) else "date"
            return _tagged(tag, value.isoformat())
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            names = getattr(type(value), "_fields")  # noqa: B009 - namedtuple classes only
            return self.container(
                value, lambda: _tagged("namedtuple", self.fields(value, names), **{"class": _class_name(value)})
            )
        dataclasses = sys.modules.get("dataclasses")  # none exists before it is imported (a runtime does not)
        if dataclasses is not None and dataclasses.is_dataclass(value) and not isinstance(value, type):
            names = [f.name for f in dataclasses.fields(value)]
            return self.container(
                value, lambda: _tagged("dataclass", self.fields(value, names), **{"class": _class_name(value)})
            )
        if _is_model(value):
            return self.container(
                value,
                lambda: _tagged("model", self.encode(value.model_dump()), **{"class": _class_name(value)}),
            )
        for base, subclass_handler in _SUBCLASSES:
            if isinstance(value, base):
                return subclass_handler(self, value)
        uuid = sys.modules.get("uuid")  # a UUID exists only once its module is imported (a runtime does not)
        if uuid is not None and isinstance(value, uuid.UUID):
            return _tagged("uuid", str(value))
        raise Unencodable(f"cannot encode object of type {_class_name(value)!r}")

    def fields_of_mapping(self, value: Mapping[str, object]) -> JsonObject:
        return {str(key): self.encode(item) for key, item in value.items()}


def _is_model(value: object) -> TypeGuard[_Model]:
    kind = type(value)
    return callable(getattr(kind, "model_dump", None)) and hasattr(kind, "model_fields")


def _sequence(tag: str) -> Callable[[_Encoder, Iterable[object]], JsonValue]:
    return lambda encoder, value: encoder.container(value, lambda: _tagged(tag, encoder.items(value)))


def _b64(value: bytes | bytearray) -> str:
    return binascii.b2a_base64(value, newline=False).decode("ascii")  # base64.b64encode


_EXACT: dict[type, Callable[[_Encoder, Any], JsonValue]] = {  # each takes its key type
    list: _Encoder.encode_list,
    dict: _Encoder.encode_dict,
    tuple: _sequence("tuple"),
    set: _sequence("set"),
    frozenset: _sequence("frozenset"),
    deque: _sequence("deque"),
    bytes: lambda _e, v: _tagged("bytes", _b64(v)),
    bytearray: lambda _e, v: _tagged("bytearray", _b64(v)),
    complex: lambda _e, v: _tagged("complex", [_float(v.real), _float(v.imag)]),
    range: lambda _e, v: _tagged("range", [v.start, v.stop, v.step]),
}  # + datetime, date, time, timedelta, Decimal and Fraction (_add_stdlib_types)

# Subclasses (after the enum/dataclass/namedtuple checks): handled as their base type.
_SUBCLASSES_FIRST: tuple[tuple[type, Callable[[_Encoder, Any], JsonValue]], ...] = (
    (dict, _Encoder.encode_dict),
    (list, _Encoder.encode_list),
    (tuple, _EXACT[tuple]),
    (frozenset, _EXACT[frozenset]),
    (set, _EXACT[set]),
    (deque, _EXACT[deque]),
    (bytes, _EXACT[bytes]),
    (bytearray, _EXACT[bytearray]),
)  # + time, timedelta, Decimal, Fraction (_add_stdlib_types), then:
_SUBCLASSES_LAST: tuple[tuple[type, Callable[[_Encoder, Any], JsonValue]], ...] = ((complex, _EXACT[complex]),)
_SUBCLASSES = _SUBCLASSES_FIRST + _SUBCLASSES_LAST

# datetime, decimal and fractions (with numbers: ~2.7 ms to import) are not imported to encode: none of
# their values exists before one of these modules is imported, so their encoders join the tables above
# the first time the slow path (every such value takes it until then) runs with one of them loaded.
# A runtime whose rounds never touch them never imports them.
_STDLIB_TYPE_MODULES = ("datetime", "_datetime", "decimal", "_decimal", "_pydecimal", "fractions")
_DATES: tuple[type[datetime.date], type[datetime.datetime]] | None = None  # set last, by _add_stdlib_types


def _stdlib_types_possible() -> bool:
    modules = sys.modules
    return any(name in modules for name in _STDLIB_TYPE_MODULES)


def _add_stdlib_types() -> None:
    """Add the datetime, decimal and fractions encoders (idempotent: a second call adds the same)."""
    global _SUBCLASSES, _DATES  # noqa: PLW0603 - the tables grow once, when the first such value can exist
    import datetime
    import decimal
    import fractions

    _EXACT.update(
        {
            datetime.datetime: lambda _e, v: _tagged("datetime", v.isoformat()),
            datetime.date: lambda _e, v: _tagged("date", v.isoformat()),
            datetime.time: lambda _e, v: _tagged("time", v.isoformat()),
            datetime.timedelta: lambda _e, v: _tagged("timedelta", [v.days, v.seconds, v.microseconds]),
            decimal.Decimal: lambda _e, v: _tagged("decimal", str(v)),
            fractions.Fraction: lambda _e, v: _tagged("fraction", [v.numerator, v.denominator]),
        }
    )
    _SUBCLASSES = (
        *_SUBCLASSES_FIRST,
        (datetime.time, _EXACT[datetime.time]),
        (datetime.timedelta, _EXACT[datetime.timedelta]),
        (decimal.Decimal, _EXACT[decimal.Decimal]),
        (fractions.Fraction, _EXACT[fractions.Fraction]),
        *_SUBCLASSES_LAST,
    )
    _DATES = (datetime.date, datetime.datetime)
