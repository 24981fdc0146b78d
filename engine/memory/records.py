"""Memory records: one :class:`MemoryItem` shape for every kind (entity, history, experience)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from codeact.engine.errors import CodeactError

__all__ = ["KINDS", "AgentMemoryError", "MemoryItem", "MemoryKind"]

MemoryKind = Literal["entity", "history", "experience"]
KINDS: tuple[MemoryKind, ...] = ("entity", "history", "experience")


class AgentMemoryError(CodeactError):
    """A memory operation failed (``memory.*`` codes)."""

    def __init__(self, message: str, *, code: str = "memory.error") -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, kw_only=True)
class MemoryItem:
    """One stored memory.

    Attributes:
        kind: ``entity`` (session scope), ``history`` (a run's summary, user scope) or ``experience``.
        scope: Whose it is: a session id (entities), ``user:U`` (history), or an experience scope
            (``user:U``, ``agent:ID``, ``project``).
        title: An entity's title, a history summary's question type, an experience's task.
        text: What retrieval searches (and the prompt shows, for history).
        data: The record's fields (the entity's data, the summary's fields, the experience).
        id: Unique within the kind.
        created_at: Seconds since the epoch.
        used_at: Last time it was written or retrieved (the ``lru`` eviction policy).
        approved: A curator reviewed it (``codeact memory approve``).
    """

    kind: MemoryKind
    scope: str
    title: str
    text: str
    data: Mapping[str, object] = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    created_at: float = field(default_factory=time.time)
    used_at: float = 0.0
    approved: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise AgentMemoryError(f"unknown memory kind {self.kind!r}: use one of {list(KINDS)}", code="memory.kind")
        if not self.used_at:
            object.__setattr__(self, "used_at", self.created_at)

    def to_json(self) -> dict[str, object]:
        """A JSON-able dict (the stored body, and ``codeact memory export``)."""
        return {
            "kind": self.kind,
            "scope": self.scope,
            "id": self.id,
            "title": self.title,
            "text": self.text,
            "data": dict(self.data),
            "created_at": self.created_at,
            "used_at": self.used_at,
            "approved": self.approved,
        }

    def dumps(self) -> str:
        """Compact JSON of :meth:`to_json`."""
        return json.dumps(self.to_json(), ensure_ascii=False, separators=(",", ":"), default=str)

    @property
    def size(self) -> int:
        """Characters of the stored JSON (the ``maxChars`` limits count these)."""
        return len(self.dumps())

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryItem:
        """Read a record written by :meth:`to_json` (or an imported one).

        Raises:
            AgentMemoryError: A field is missing or has the wrong type.
        """
        try:
            kind = str(data["kind"])
            body = data.get("data") or {}
            if not isinstance(body, Mapping):
                raise TypeError("data must be an object")
            return cls(
                kind=kind,  # type: ignore[arg-type]
                scope=str(data["scope"]),
                title=str(data.get("title", "")),
                text=str(data.get("text", "")),
                data=dict(body),
                id=str(data.get("id") or uuid.uuid4().hex),
                created_at=float(data.get("created_at") or time.time()),
                used_at=float(data.get("used_at") or 0.0),
                approved=bool(data.get("approved", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise AgentMemoryError(
                f"invalid memory record {dict(data).get('id', '?')!r}: {exc}; a record needs kind, scope, title, "
                "text and data (see `codeact memory export`)",
                code="memory.invalid_record",
            ) from None

    @classmethod
    def loads(cls, text: str) -> MemoryItem:
        """Read :meth:`dumps` output."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise AgentMemoryError(f"unreadable memory record: {exc}", code="memory.invalid_record") from None
        if not isinstance(data, dict):
            raise AgentMemoryError("unreadable memory record: not a JSON object", code="memory.invalid_record")
        return cls.from_json(data)

    def with_changes(self, **changes: Any) -> MemoryItem:
        """A copy with ``changes``."""
        return replace(self, **changes)
