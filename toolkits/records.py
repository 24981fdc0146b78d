"""What the bridge records and asks about: approval requests and decisions, call records and their caps.

Recorded calls are bounded per round (:class:`RecordCaps`, applied by :func:`cap_calls`, and by the
bridges' call log as the calls end: :class:`CallFold`): an argument or result over its byte cap is replaced by
``{"$capped": {"bytes": N, "sha256": H}}`` and the call's ``capped`` note says what was left out; calls
over the per-round count are folded into ONE record that counts them per operation and digests them.
No call is ever dropped silently. A round whose record holds a capped call cannot be replayed from the
record (replay reports it "not replayable"; ``codeact replay --live`` calls the tools instead).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from codeact.toolkits.errors import ToolkitError

__all__ = [
    "ApprovalDecision",
    "ApprovalRequest",
    "Approver",
    "CallFold",
    "CallRecord",
    "RecordCaps",
    "cap_call",
    "cap_calls",
]


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
    arguments: dict[str, object]


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
        capped: What the record left out, when a cap applied (``{"reason", ...}``), else None.
        call_id: The call's stable id, ``"{session}:{round}:{sequence in the round}"`` (``ToolkitContext.call_id``;
            the same when the round is resumed), or "" when the bridge was used without rounds.
    """

    sequence: int
    session_id: str
    toolkit: str
    operation: str
    arguments: dict[str, object]
    result: object = None
    error: dict[str, object] | None = None
    started_at: float = 0.0
    duration_s: float = 0.0
    capped: dict[str, object] | None = None
    call_id: str = ""

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
        """A JSON-able dict (for the store); ``capped`` and ``call_id`` only when set."""
        data = dataclasses.asdict(self)
        if data["capped"] is None:
            del data["capped"]
        if not data["call_id"]:
            del data["call_id"]
        return data

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
                capped=dict(data["capped"]) if data.get("capped") is not None else None,
                call_id=str(data.get("call_id") or ""),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ToolkitError(f"not a call record ({type(exc).__name__}: {exc}): {dict(data)!r:.200}") from None


_KIB = 1024


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ToolkitError(f"{name}={raw!r} is not a whole number; set it to a count (bytes or calls)") from None
    if value < 1:
        raise ToolkitError(f"{name}={raw!r} must be at least 1")
    return value


@dataclass(frozen=True, kw_only=True)
class RecordCaps:
    """Per-round bounds on what the call record keeps (see the module docstring).

    Attributes:
        argument_bytes: Cap on one call's encoded arguments (64 KiB).
        result_bytes: Cap on one call's encoded result or error (64 KiB).
        calls: Calls per round recorded one by one (1,000); the rest are folded into one summary.
    """

    argument_bytes: int = 64 * _KIB
    result_bytes: int = 64 * _KIB
    calls: int = 1000

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecordCaps:
        """The caps from the environment (the defaults where a variable is unset).

        The variables: ``CODEACT_RECORD_ARGUMENT_BYTES``, ``CODEACT_RECORD_RESULT_BYTES``, ``CODEACT_RECORD_CALLS``.

        Raises:
            ToolkitError: A variable is not a positive whole number.
        """
        env = os.environ if environ is None else environ
        default = cls()
        return cls(
            argument_bytes=_env_int(env, "CODEACT_RECORD_ARGUMENT_BYTES", default.argument_bytes),
            result_bytes=_env_int(env, "CODEACT_RECORD_RESULT_BYTES", default.result_bytes),
            calls=_env_int(env, "CODEACT_RECORD_CALLS", default.calls),
        )


def _encoded(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False, default=repr)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cap_call(call: CallRecord, caps: RecordCaps) -> CallRecord:
    """One kept call bounded by ``caps``: an argument, result or error over its byte cap is digested (``capped``)."""
    note: dict[str, object] = {}
    changes: dict[str, Any] = {}  # dataclasses.replace(**changes): each a field of its own type
    parts: list[tuple[str, object, int]] = [("arguments", call.arguments, caps.argument_bytes)]
    parts.append(
        ("error", call.error, caps.result_bytes)
        if call.error is not None
        else ("result", call.result, caps.result_bytes)
    )
    for name, value, limit in parts:
        if value is None:
            continue
        text = _encoded(value)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > limit:
            stub = {"bytes": size, "sha256": _digest(text)}
            note[name] = stub
            if name == "error":
                assert call.error is not None  # noqa: S101 - this part exists only then
                changes[name] = {k: call.error.get(k) for k in ("code", "name")} | {
                    "message": str(call.error.get("message", ""))[:1000],
                    "$capped": stub,
                }
            else:
                changes[name] = {"$capped": stub}
    if not note:
        return call
    note["reason"] = (
        "over the per-call record cap ("
        + ", ".join(f"{name} {stub['bytes']} bytes" for name, stub in note.items() if isinstance(stub, dict))
        + ")"
    )
    return dataclasses.replace(call, capped=note, **changes)


class CallFold:
    """The calls over the per-round count, folded into ONE record as they come (see :func:`cap_calls`).

    Holds no call: a count per operation, the errors, the summed duration, a running SHA-256 and the
    first call's place, so a round of 100,000 calls keeps no more than a round of 1,000.
    """

    __slots__ = ("_digest", "_duration", "_errors", "_first", "_operations", "calls")

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._operations: Counter[str] = Counter()
        self._errors = 0
        self._duration = 0.0
        self._first: tuple[int, str, float] | None = None
        self.calls = 0
        """Calls folded so far."""

    def add(self, call: CallRecord) -> None:
        """Fold one more call (in the order the record lists them: the digest depends on it)."""
        if self._first is None:
            self._first = (call.sequence, call.session_id, call.started_at)
        self.calls += 1
        self._operations[f"{call.toolkit}.{call.operation}"] += 1
        self._errors += call.error is not None
        self._duration += call.duration_s
        self._digest.update(_encoded([call.toolkit, call.operation, call.arguments, call.result, call.error]).encode())

    def record(self, cap: int) -> CallRecord | None:
        """The one record of the folded calls (None when none was), ``cap`` being the per-round count."""
        if self._first is None:
            return None
        sequence, session_id, started_at = self._first
        return CallRecord(
            sequence=sequence,
            session_id=session_id,
            toolkit="",
            operation="",
            arguments={},
            started_at=started_at,
            duration_s=self._duration,
            capped={
                "reason": f"{self.calls} call(s) over the per-round cap of {cap} recorded calls",
                "calls": self.calls,
                "operations": dict(self._operations),
                "errors": self._errors,
                "sha256": self._digest.hexdigest(),
            },
        )


def cap_calls(calls: Sequence[CallRecord], caps: RecordCaps | None = None) -> list[CallRecord]:
    """``calls`` bounded by ``caps`` (default ``RecordCaps.from_env()``): big parts digested, extra calls folded.

    The first ``caps.calls`` calls are kept one by one (a part over its byte cap replaced by its size and
    SHA-256); the calls after them become ONE record with ``capped = {"reason", "calls": N, "operations":
    {"toolkit.operation": count}, "errors": E, "sha256": digest of all of them}`` (:class:`CallFold`).
    """
    caps = caps if caps is not None else RecordCaps.from_env()
    kept = [cap_call(call, caps) for call in calls[: caps.calls]]
    fold = CallFold()
    for call in calls[caps.calls :]:
        fold.add(call)
    folded = fold.record(caps.calls)
    if folded is not None:
        kept.append(folded)
    return kept
