"""``plain(obj)``: codec data (``{"$type": ..., "v": ...}`` tags) as plain JSON, for readers outside the sandbox.

The tags exist so that a value crosses the bridge and the store without loss; a person or a foreign
client (an SSE consumer, an MCP client, an A2A peer, the console, the model reading the prompt's
variables header) wants the value itself. Standard library only, like the codec.

=====================================================  ==============================================
tag                                                    plain JSON
=====================================================  ==============================================
``tuple``, ``set``, ``frozenset``, ``deque``           list of the items
``dict`` (non-str keys)                                object, each key as its JSON text (str kept)
``model``, ``dataclass``, ``namedtuple``               object of the fields
``enum``                                               the member's value
``datetime``, ``date``, ``time``, ``decimal``,         the payload text (ISO 8601, decimal digits,
``uuid``, ``bytes``, ``bytearray``, ``float``          canonical id, base64, ``"nan"``/``"inf"``)
``timedelta``                                          seconds (a number)
``complex``, ``fraction``, ``range``                   the payload list (``[real, imag]``, ...)
``ndarray``, ``dataframe``, ``sympy``, ... (numpy,      their one-line ``repr`` text
pandas, sympy values: ``_codec_data``)
an unknown tag                                         its payload
=====================================================  ==============================================
"""

from __future__ import annotations

from codeact.sandbox.runtime._codec_data import DATA_TAGS
from codeact.sandbox.runtime._codec_types import TAG, JsonValue

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["plain"]

_LISTS = frozenset({"tuple", "set", "frozenset", "deque"})
_RECORDS = frozenset({"model", "dataclass", "namedtuple", "enum"})


def plain(obj: object) -> Any:  # Any: callers index the result as the JSON they expect
    """``obj`` (codec-encoded JSON data) with every tag replaced by plain JSON (a new value; ``obj`` is unchanged)."""
    if isinstance(obj, list):
        return [plain(item) for item in obj]
    if not isinstance(obj, dict):
        return obj
    if TAG not in obj or "v" not in obj:
        return {key: plain(value) for key, value in obj.items()}
    tag, payload = obj[TAG], obj["v"]
    if tag in DATA_TAGS and isinstance(obj.get("repr"), str):
        return obj["repr"]  # numpy/pandas/sympy: their repr (the payload is for the sandbox)
    if tag in _LISTS or tag in _RECORDS:
        return plain(payload)
    if tag == "dict" and isinstance(payload, list):
        out: dict[str, JsonValue] = {}
        for pair in payload:
            if isinstance(pair, list) and len(pair) == 2:
                key = plain(pair[0])
                out[key if isinstance(key, str) else _json_text(key)] = plain(pair[1])
        return out
    if tag == "timedelta" and isinstance(payload, list) and len(payload) == 3:
        days, seconds, micro = payload
        return days * 86400 + seconds + micro / 1_000_000
    return plain(payload)


def _json_text(value: object) -> str:
    """``json.dumps(value)``: a key that is not a string (rare: the runtime does not import json to start)."""
    import json

    return json.dumps(value)
