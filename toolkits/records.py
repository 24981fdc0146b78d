"""What the bridge records and asks about: approval requests and decisions, call records."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolkits.errors import ToolkitError

__all__ = ["ApprovalDecision", "ApprovalRequest", "Approver", "CallRecord"]


@dataclass(frozen=True, kw_only=True)
class ApprovalRequest:
    """What the host's approver is asked about (the engine surfaces it as ``action.requested``).

    Attributes:
        session_id: The calling session.
        sequence: The call's sequence number in this bridge.
        toolkit: The toolkit name.
        operation: The operation name.
        description: The operation's summary.
        arguments: The arguments as the sandbox sent them (codec-encoded JSON).
    """

    session_id: str
    sequence: int
    toolkit: str
    operation: str
    description: str
    arguments: dict[str, Any]


@dataclass(frozen=True, kw_only=True)
class ApprovalDecision:
    """The approver's answer.

    Attributes:
        allow: Run the operation.
        reason: Why (shown to the model when denied).
    """

    allow: bool
    reason: str = ""


Approver = Callable[[ApprovalRequest], Awaitable[ApprovalDecision]]


@dataclass(frozen=True, kw_only=True)
class CallRecord:
    """One toolkit call as the bridge saw it; the engine stores these per round and replay answers from them.

    Attributes:
        sequence: Order of arrival in this bridge (0-based).
        session_id: The calling session.
        toolkit: The toolkit name ("" when the request did not carry a string).
        operation: The operation name ("" when the request did not carry a string).
        arguments: As received (codec-encoded JSON).
        result: The codec-encoded result (``{"$control": ...}`` for control signals), when it succeeded.
        error: ``{"code", "name", "message"[, "data"]}`` when it failed.
        started_at: Wall-clock start (``time.time()``).
        duration_s: How long the call took on the host.
    """

    sequence: int
    session_id: str
    toolkit: str
    operation: str
    arguments: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    started_at: float = 0.0
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True when the call returned a result."""
        return self.error is None

    @property
    def control(self) -> dict[str, Any] | None:
        """The ``$control`` object when the call returned a control signal (``finish``, ``ask_user``)."""
        if self.error is None and isinstance(self.result, dict) and isinstance(self.result.get("$control"), dict):
            return dict(self.result["$control"])
        return None

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (for the store)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CallRecord:
        """The inverse of :meth:`to_json`.

        Raises:
            ToolkitError: ``data`` is not a call record.
        """
        try:
            return cls(
                sequence=int(data["sequence"]),
                session_id=str(data["session_id"]),
                toolkit=str(data["toolkit"]),
                operation=str(data["operation"]),
                arguments=dict(data.get("arguments") or {}),
                result=data.get("result"),
                error=dict(data["error"]) if data.get("error") is not None else None,
                started_at=float(data.get("started_at", 0.0)),
                duration_s=float(data.get("duration_s", 0.0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ToolkitError(f"not a call record ({type(exc).__name__}: {exc}): {dict(data)!r:.200}") from None
