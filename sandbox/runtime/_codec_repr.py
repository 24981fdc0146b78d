"""``python_repr(obj)``: codec data as the text Python's ``repr`` shows for the value it stands for.

A person or a model reads a value (a react observation, the prompt's variables header, the CLI's
tool-call lines, ``sessions show``, the console) as Python shows it: ``('A', 4)``, never the codec's
``{"$type": "tuple", "v": ["A", 4]}`` and never JSON's ``true``/``null`` in a Python program. Nothing is
decoded into live objects (the text is built from the data; safe on hostile input) and the wire and
store formats do not change. Standard library only, like the codec.

=====================================================  ==============================================
codec data                                             text
=====================================================  ==============================================
``None``, ``true``, ``"a"``, ``[1]``, ``{"k": 1}``     ``None``, ``True``, ``'a'``, ``[1]``, ``{'k': 1}``
``tuple``, ``set``, ``frozenset``, ``deque``           ``('A', 4)``, ``{1, 2}``, ``frozenset({1})``, ``deque([1])``
``dict`` (non-str keys)                                ``{1: 'a', (1, 2): 'b'}``
``float`` (``nan``, ``inf``)                           ``nan``, ``inf``, ``-inf``
``bytes``, ``bytearray``                               ``b'ab'``, ``bytearray(b'ab')``
``datetime``, ``date``, ``time``, ``timedelta``        ``datetime.datetime(2026, 1, 2, 9, 30)``, ...
``decimal``, ``fraction``, ``complex``, ``uuid``,      ``Decimal('1.10')``, ``Fraction(1, 3)``, ``(1+2j)``,
``range``                                              ``UUID('...')``, ``range(0, 10, 2)``
``dataclass``, ``model``, ``namedtuple``               ``Point(x=1, y=2)`` (the class's name)
``enum``                                               ``<Color.RED: 1>``
numpy, pandas, sympy (``_codec_data``)                 their one-line ``repr``
``source`` (a function, class or import kept as code)  ``<function f>``, ``<class P>``, the import line
an unknown tag                                         its payload's text
=====================================================  ==============================================
"""

from __future__ import annotations

import binascii

from codeact.sandbox.runtime._codec_data import DATA_TAGS
from codeact.sandbox.runtime._codec_types import TAG

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["display_text", "has_tags", "python_repr"]

_LISTS = {"tuple": ("(", ")"), "set": ("{", "}"), "frozenset": ("frozenset({", "})"), "deque": ("deque([", "])")}
_EMPTY = {"tuple": "()", "set": "set()", "frozenset": "frozenset()", "deque": "deque([])"}
_TIMES = frozenset({"datetime", "date", "time"})  # datetime's classes by these names (imported when shown)


class _Full(Exception):
    """The text passed its budget: the rest would be cut anyway."""


class _Writer:
    def __init__(self, limit: int | None) -> None:
        self.parts: list[str] = []
        self.used = 0
        self.limit = limit

    def put(self, text: str) -> None:
        self.parts.append(text)
        self.used += len(text)
        if self.limit is not None and self.used > self.limit:
            raise _Full


def python_repr(obj: object, *, limit: int | None = None) -> str:
    """The ``repr`` text of the value ``obj`` (codec-encoded JSON data) stands for.

    Args:
        obj: Codec data (plain JSON with ``{"$type": ..., "v": ...}`` tags).
        limit: Cut the text to this many characters, ending in ``...`` (a large value is never
            rendered whole).

    Returns:
        One line of text (a string's line breaks are escaped, as in ``repr``).
    """
    writer = _Writer(limit)
    try:
        _write(obj, writer)
    except _Full:
        pass
    except RecursionError:  # hostile nesting: show what was written
        writer.parts.append("...")
    text = "".join(writer.parts)
    if limit is not None and len(text) > limit:
        return text[: max(limit - 3, 0)] + "..."
    return text


def has_tags(obj: object) -> bool:
    """Whether codec data holds a tagged value anywhere (it is not plain JSON)."""
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if TAG in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def display_text(obj: object, *, limit: int | None = None) -> str:
    """Codec data for a person to read: its JSON text when it is plain JSON, else ``python_repr``.

    Plain data reads the same in both (and JSON is what a log or a function-calling model expects);
    a value JSON cannot hold (a tuple, a date, bytes) is shown as Python shows it, ``('A', 4)``,
    never as the codec's tag. A string stays as it is.

    Args:
        obj: Codec data.
        limit: Cut the text to this many characters, ending in ``...``.
    """
    if isinstance(obj, str):
        text = obj
    elif has_tags(obj):
        return python_repr(obj, limit=limit)
    else:
        import json  # here: the runtime does not import json to start

        text = json.dumps(obj, ensure_ascii=False, default=str)
    if limit is not None and len(text) > limit:
        return text[: max(limit - 3, 0)] + "..."
    return text


def _write(obj: object, out: _Writer) -> None:
    if isinstance(obj, list):
        _items(obj, out, "[", "]")
    elif isinstance(obj, dict):
        if TAG in obj and "v" in obj or obj.get(TAG) == "source":
            _tagged(obj, out)
        else:
            _mapping(list(obj.items()), out)
    elif isinstance(obj, str) and out.limit is not None and len(obj) > out.limit:
        out.put(repr(obj[: out.limit]))  # the rest would be cut anyway
    else:
        out.put(repr(obj))


def _items(items: list[object], out: _Writer, opening: str, closing: str) -> None:
    out.put(opening)
    for index, item in enumerate(items):
        if index:
            out.put(", ")
        _write(item, out)
    out.put(closing)


def _mapping(pairs: Sequence[Sequence[object]], out: _Writer) -> None:
    out.put("{")
    for index, (key, value) in enumerate(pairs):
        if index:
            out.put(", ")
        _write(key, out)
        out.put(": ")
        _write(value, out)
    out.put("}")


def _fields(name: str, fields: object, out: _Writer) -> None:
    """``Name(a=1, b=2)``: a dataclass's, a pydantic model's or a namedtuple's repr."""
    out.put(f"{name}(")
    if isinstance(fields, dict):
        for index, (key, value) in enumerate(fields.items()):
            if index:
                out.put(", ")
            out.put(f"{key}=")
            _write(value, out)
    out.put(")")


def _tagged(obj: dict[str, Any], out: _Writer) -> None:  # noqa: C901 -- one branch per tag, as in the table
    tag, payload = obj[TAG], obj.get("v")
    cls = obj.get("class")
    if tag in DATA_TAGS and isinstance(obj.get("repr"), str):
        out.put(obj["repr"])
    elif tag in _LISTS and isinstance(payload, list):
        if not payload:
            out.put(_EMPTY[tag])
        elif tag == "tuple" and len(payload) == 1:
            out.put("(")
            _write(payload[0], out)
            out.put(",)")
        else:
            _items(payload, out, *_LISTS[tag])
    elif tag == "dict" and isinstance(payload, list):
        _mapping([p for p in payload if isinstance(p, list) and len(p) == 2], out)
    elif tag in ("dataclass", "model", "namedtuple") and isinstance(cls, str):
        _fields(cls.rsplit(".", 1)[-1], payload, out)
    elif tag == "enum" and isinstance(cls, str) and isinstance(obj.get("name"), str):
        out.put(f"<{cls.rsplit('.', 1)[-1]}.{obj['name']}: ")
        _write(payload, out)
        out.put(">")
    elif tag == "source":
        _source(obj, out)
    else:
        text = _scalar(tag, payload)
        if text is not None:
            out.put(text)
        else:
            _write(payload, out)  # an unknown tag, or a malformed payload: the payload's text


def _source(obj: dict[str, object], out: _Writer) -> None:
    raw = obj.get("v")
    code = raw if isinstance(raw, str) else ""
    first = code.strip().splitlines()[0] if code.strip() else ""
    kind = obj.get("kind")
    if kind == "import":
        out.put(first)
        return
    words = first.replace("(", " ").replace(":", " ").split()
    name = words[words.index("def") + 1] if "def" in words[:-1] else words[1] if len(words) > 1 else "?"
    out.put(f"<{'class' if kind == 'class' else 'function'} {name}>")


def _scalar(tag: str, payload: object) -> str | None:  # noqa: C901, PLR0911 -- one return per tag
    """The repr of a tag whose payload is one value; None when the payload does not fit the tag."""
    try:
        if tag == "float" and payload in ("nan", "inf", "-inf"):
            return str(payload)
        if tag in ("bytes", "bytearray") and isinstance(payload, str):
            data = binascii.a2b_base64(payload, strict_mode=True)  # base64.b64decode(payload, validate=True)
            return repr(data) if tag == "bytes" else f"bytearray({data!r})"
        if tag in _TIMES and isinstance(payload, str):
            import datetime  # here: a runtime that shows no time value does not import datetime

            kind: type[datetime.date] | type[datetime.time] = getattr(datetime, tag)
            return repr(kind.fromisoformat(payload))
        if tag == "timedelta" and isinstance(payload, list) and len(payload) == 3:
            import datetime

            return repr(datetime.timedelta(days=payload[0], seconds=payload[1], microseconds=payload[2]))
        if tag == "decimal" and isinstance(payload, str):
            return f"Decimal({payload!r})"
        if tag == "uuid" and isinstance(payload, str):
            return f"UUID({payload!r})"
        if tag == "fraction" and isinstance(payload, list) and len(payload) == 2:
            return f"Fraction({int(payload[0])}, {int(payload[1])})"
        if tag == "range" and isinstance(payload, list) and len(payload) == 3:
            start, stop, step = (int(n) for n in payload)
            return f"range({start}, {stop})" if step == 1 else f"range({start}, {stop}, {step})"
        if tag == "complex" and isinstance(payload, list) and len(payload) == 2:
            real, imag = (_float(part) for part in payload)
            return repr(complex(real, imag))
    except (ValueError, TypeError, OverflowError, binascii.Error):
        return None
    return None


def _float(part: object) -> float:
    if isinstance(part, dict) and part.get(TAG) == "float":
        return float(str(part.get("v")))
    if isinstance(part, int | float) and not isinstance(part, bool):
        return float(part)
    raise ValueError("not a number")
