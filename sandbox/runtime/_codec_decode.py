"""The codec's decoder: codec output back into values, never importing by name (stdlib only)."""

from __future__ import annotations

import binascii
import sys

from codeact.sandbox.runtime._codec_data import DATA_DECODERS
from codeact.sandbox.runtime._codec_types import TAG, Record, Undecodable

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    import datetime
    import decimal
    import enum
    import fractions
    import uuid
    from collections import deque
    from collections.abc import Callable, Mapping
    from typing import TypeVar
else:  # `collections` (~1 ms of a cold start) only re-exports its C half's deque
    from _collections import deque

if TYPE_CHECKING:
    _T = TypeVar("_T")
    _R = TypeVar("_R")


def decode(obj: object, *, registry: Mapping[str, type] | None = None, data: bool = False) -> object:
    """Decode codec output back into values.

    Args:
        obj: JSON data produced by ``encode`` (possibly after a JSON round trip).
        registry: Classes by ``__qualname__`` to re-create dataclass, pydantic model, namedtuple and
            enum values with; without an entry they decode as ``Record`` / tuple / plain value.
        data: Also decode the numpy/pandas/sympy tags (``_codec_data``): only the sandbox's runtime
            does, for the variables it restores; elsewhere they are unknown tags.

    Returns:
        The value.

    Raises:
        Undecodable: ``obj`` is not valid codec output.
    """
    if type(obj) is not dict and type(obj) is not list:
        return obj
    decoder = _Decoder(registry or {}, data=data)
    return _guarded(decoder.walk, obj)


def loads(text: str | bytes, *, registry: Mapping[str, type] | None = None) -> object:
    """Parse JSON text and decode it (see ``decode``).

    Args:
        text: JSON text.
        registry: As in ``decode``.

    Returns:
        The value.

    Raises:
        Undecodable: Not JSON, or not valid codec output.
    """
    import json  # here: the runtime decodes what protocol.loads parsed, and does not import json to start

    hook = _Decoder(registry or {}).hook
    return _guarded(lambda t: json.loads(t, object_hook=hook), text)


_MALFORMED = (ValueError, TypeError, KeyError, OverflowError, IndexError, ZeroDivisionError)
# and decimal.InvalidOperation (an ArithmeticError), looked up only once decimal is imported (_guarded)


def _guarded(run: Callable[[_T], _R], arg: _T) -> _R:
    """``run(arg)``, with every way hostile data can make decoding fail turned into ``Undecodable``."""
    try:
        return run(arg)
    except Undecodable:
        raise
    except RecursionError:
        raise Undecodable("nesting too deep") from None
    except _MALFORMED as exc:
        raise Undecodable(f"malformed codec data: {type(exc).__name__}: {exc}") from None
    except ArithmeticError as exc:
        decimal = sys.modules.get("decimal")  # no InvalidOperation can be raised before decimal is imported
        if decimal is None or not isinstance(exc, decimal.InvalidOperation):
            raise
        raise Undecodable(f"malformed codec data: {type(exc).__name__}: {exc}") from None


class _Decoder:
    def __init__(self, registry: Mapping[str, type], *, data: bool = False) -> None:
        self.registry = registry
        self.data = data

    def walk(self, value: object) -> object:
        """Decode parsed JSON, building fresh containers (the input is never shared or changed)."""
        if type(value) is dict:
            out: dict[str, object] = {}
            for key, item in value.items():
                kind = type(item)
                out[key] = self.walk(item) if (kind is dict or kind is list) else item
            return self.hook(out) if TAG in out else out
        if type(value) is list:
            items: list[object] = []
            append = items.append
            for item in value:
                kind = type(item)
                append(self.walk(item) if (kind is dict or kind is list) else item)
            return items
        return value

    def hook(self, obj: dict[str, object]) -> object:
        tag = obj.get(TAG)
        if tag is None:
            return obj
        handler = _DECODERS.get(tag) if type(tag) is str else None
        if handler is None:
            data = DATA_DECODERS.get(tag) if self.data and type(tag) is str else None
            if data is None:
                raise Undecodable(f"unknown codec tag {tag!r}")
            if "v" not in obj:
                raise Undecodable(f"codec tag {tag!r} without a payload")
            return data(obj["v"])
        if "v" not in obj:
            raise Undecodable(f"codec tag {tag!r} without a payload")
        return handler(self, obj)

    def cls(self, obj: Mapping[str, object]) -> tuple[str, type | None]:
        name = obj.get("class")
        if type(name) is not str:
            raise Undecodable(f"codec tag {obj[TAG]!r} without a class name")
        return name, self.registry.get(name)

    def dataclass(self, obj: Mapping[str, object]) -> object:
        name, cls = self.cls(obj)
        fields = _mapping(obj["v"])
        dataclasses = sys.modules.get("dataclasses")  # a dataclass exists only once something imported it
        if cls is not None and dataclasses is not None and dataclasses.is_dataclass(cls):
            try:
                init = {f.name: fields[f.name] for f in dataclasses.fields(cls) if f.init and f.name in fields}
                instance = cls(**init)
                for f in dataclasses.fields(cls):
                    if not f.init and f.name in fields:
                        object.__setattr__(instance, f.name, fields[f.name])
            except Exception:  # noqa: BLE001 - the class changed since capture: keep the data
                return Record(fields, class_name=name, kind="dataclass")
            return instance
        return Record(fields, class_name=name, kind="dataclass")

    def model(self, obj: Mapping[str, object]) -> object:
        name, cls = self.cls(obj)
        fields = _mapping(obj["v"])
        validate = getattr(cls, "model_validate", None) if cls is not None else None
        if validate is not None:
            try:
                return validate(fields)
            except Exception:  # noqa: BLE001 - the class changed since capture: keep the data
                pass
        return Record(fields, class_name=name, kind="model")

    def namedtuple(self, obj: Mapping[str, object]) -> object:
        _name, cls = self.cls(obj)
        fields = _mapping(obj["v"])
        if cls is not None and issubclass(cls, tuple) and hasattr(cls, "_fields"):
            try:
                return cls(**fields)
            except Exception:  # noqa: BLE001, S110 - the class changed since capture: keep the data
                pass
        return tuple(fields.values())

    def enum(self, obj: Mapping[str, object]) -> object:
        _name, cls = self.cls(obj)
        member = obj.get("name")
        # No Enum class exists before its module is imported (a runtime does not import it to start).
        meta: type[enum.EnumMeta] | None = getattr(sys.modules.get("enum"), "EnumMeta", None)
        if cls is not None and meta is not None and isinstance(cls, meta) and type(member) is str:
            try:
                return cls[member]
            except KeyError:
                pass
        return obj["v"]


def _mapping(value: object) -> dict[str, object]:
    if type(value) is not dict:
        raise Undecodable("expected an object of fields")
    return value


def _list(value: object) -> list[object]:
    if type(value) is not list:
        raise Undecodable("expected a list payload")
    return value


def _text(value: object) -> str:
    if type(value) is not str:
        raise Undecodable("expected a text payload")
    return value


def _int(value: object) -> int:
    if type(value) is not int:
        raise Undecodable("expected an integer")
    return value


def _pairs(obj: Mapping[str, object]) -> dict[object, object]:
    result: dict[object, object] = {}
    for pair in _list(obj["v"]):
        if type(pair) is not list or len(pair) != 2:
            raise Undecodable("expected [key, value] pairs")
        result[pair[0]] = pair[1]
    return result


def _special_float(obj: Mapping[str, object]) -> float:
    text = obj["v"]
    if not isinstance(text, str) or text not in ("nan", "inf", "-inf"):
        raise Undecodable(f"unknown float {text!r}")
    return float(text)


def _complex_part(value: object) -> float:
    if isinstance(value, float) or type(value) is int:
        return float(value)
    raise Undecodable("expected a number")


def _three_ints(value: object) -> tuple[int, int, int]:
    items = _list(value)
    if len(items) != 3:
        raise Undecodable("expected three integers")
    return _int(items[0]), _int(items[1]), _int(items[2])


def _two(value: object) -> tuple[object, object]:
    items = _list(value)
    if len(items) != 2:
        raise Undecodable("expected two items")
    return items[0], items[1]


def _uuid(obj: Mapping[str, object]) -> uuid.UUID:
    import uuid  # here, not at the top: a runtime that never sees a UUID does not pay for the module

    return uuid.UUID(_text(obj["v"]))


# datetime, decimal and fractions are imported by the tags that need them (see _uuid), not to start.


def _fraction(obj: Mapping[str, object]) -> fractions.Fraction:
    import fractions

    numerator, denominator = _two(obj["v"])
    return fractions.Fraction(_int(numerator), _int(denominator))


def _complex(obj: Mapping[str, object]) -> complex:
    real, imag = _two(obj["v"])
    return complex(_complex_part(real), _complex_part(imag))


def _timedelta(obj: Mapping[str, object]) -> datetime.timedelta:
    import datetime

    days, seconds, microseconds = _three_ints(obj["v"])
    return datetime.timedelta(days=days, seconds=seconds, microseconds=microseconds)


def _datetime(obj: Mapping[str, object]) -> datetime.datetime:
    import datetime

    return datetime.datetime.fromisoformat(_text(obj["v"]))


def _date(obj: Mapping[str, object]) -> datetime.date:
    import datetime

    return datetime.date.fromisoformat(_text(obj["v"]))


def _time(obj: Mapping[str, object]) -> datetime.time:
    import datetime

    return datetime.time.fromisoformat(_text(obj["v"]))


def _decimal(obj: Mapping[str, object]) -> decimal.Decimal:
    import decimal

    return decimal.Decimal(_text(obj["v"]))


def _range(obj: Mapping[str, object]) -> range:
    start, stop, step = _three_ints(obj["v"])
    return range(start, stop, step)


def _b64decode(obj: Mapping[str, object]) -> bytes:
    try:
        return binascii.a2b_base64(_text(obj["v"]), strict_mode=True)  # base64.b64decode(..., validate=True)
    except ValueError as exc:  # binascii.Error is a ValueError
        raise Undecodable(f"bad base64 payload: {exc}") from None


_DECODERS: dict[str, Callable[[_Decoder, Mapping[str, object]], object]] = {
    "tuple": lambda _d, o: tuple(_list(o["v"])),
    "set": lambda _d, o: set(_list(o["v"])),
    "frozenset": lambda _d, o: frozenset(_list(o["v"])),
    "deque": lambda _d, o: deque(_list(o["v"])),
    "dict": lambda _d, o: _pairs(o),
    "float": lambda _d, o: _special_float(o),
    "bytes": lambda _d, o: _b64decode(o),
    "bytearray": lambda _d, o: bytearray(_b64decode(o)),
    "datetime": lambda _d, o: _datetime(o),
    "date": lambda _d, o: _date(o),
    "time": lambda _d, o: _time(o),
    "timedelta": lambda _d, o: _timedelta(o),
    "decimal": lambda _d, o: _decimal(o),
    "complex": lambda _d, o: _complex(o),
    "fraction": lambda _d, o: _fraction(o),
    "uuid": lambda _d, o: _uuid(o),
    "range": lambda _d, o: _range(o),
    "enum": _Decoder.enum,
    "dataclass": _Decoder.dataclass,
    "model": _Decoder.model,
    "namedtuple": _Decoder.namedtuple,
}
