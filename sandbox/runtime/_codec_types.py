"""The codec's tag and the types its encoder and decoder share (sandbox/runtime/codec.py; stdlib only)."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the runtime does not import typing to start (see protocol.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Final

TAG: Final = "$type"

# A JSON value and object: defined with the wire messages (protocol.py), which carry them.
from codeact.sandbox.runtime.protocol import JsonObject as JsonObject  # noqa: E402
from codeact.sandbox.runtime.protocol import JsonValue as JsonValue  # noqa: E402


class Unencodable(Exception):  # noqa: N818 - the name says what happened to the value
    """A value the codec cannot represent.

    Attributes:
        reason: Why (``"circular reference"``, ``"cannot encode object of type 'generator'"``, ...).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TooLarge(Unencodable):
    """The encoded value exceeds ``max_bytes``.

    Attributes:
        size: Encoded size in bytes (compact JSON, UTF-8).
        limit: The limit it exceeds.
    """

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"encoded size of {size} bytes exceeds the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class Undecodable(ValueError):
    """Input that is not valid codec output (a malformed tag or payload)."""


class Record(dict[str, object]):
    """A decoded dataclass or pydantic model whose class was not in the registry.

    A plain ``dict`` of the fields that also reads fields as attributes (``record.name``) and
    re-encodes with its original tag and class name.
    """

    __slots__ = ("_codeact_class", "_codeact_kind")

    def __init__(self, fields: Mapping[str, object], *, class_name: str, kind: str = "dataclass") -> None:
        super().__init__(fields)
        self._codeact_class = class_name
        self._codeact_kind = kind

    def __getattr__(self, name: str) -> object:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{self._codeact_class!r} record has no field {name!r}") from None

    def __repr__(self) -> str:
        fields = ", ".join(f"{key}={value!r}" for key, value in self.items())
        return f"{self._codeact_class}({fields})"

    def __reduce__(self) -> tuple[object, ...]:  # pragma: no cover - copy support for the slots
        return (_make_record, (dict(self), self._codeact_class, self._codeact_kind))


def _make_record(fields: dict[str, object], class_name: str, kind: str) -> Record:  # pragma: no cover
    return Record(fields, class_name=class_name, kind=kind)
