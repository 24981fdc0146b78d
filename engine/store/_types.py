"""The records a session store keeps: ``SessionMeta``, ``RoundRecord``, the status vocabularies.

A leaf of ``codeact.engine.store`` (it imports nothing of the package): the ``Store`` interface
(``base.py``), the record codecs (``_records.py``, ``_entries.py``) and the backends all build on it.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, get_args

from codeact.engine.errors import StoreError
from codeact.prompts.jsontypes import JsonObject
from codeact.sandbox.runtime.protocol import dumps as _fast_dumps

__all__ = [
    "ROUND_STATUSES",
    "SESSION_STATUSES",
    "RoundRecord",
    "SessionBusyError",
    "SessionMeta",
    "SessionStatus",
    "check_session_id",
    "dumps",
]

SessionStatus = Literal["active", "completed", "failed", "paused", "interrupted"]
SESSION_STATUSES: tuple[str, ...] = get_args(SessionStatus)
ROUND_STATUSES: tuple[str, ...] = (
    "ok",
    "error",
    "no_code",
    "parse_error",
    "deadline_exceeded",
    "crashed",
    "interrupted",
)
"""Usual ``RoundRecord.status`` values (the sandbox's ``ExecutionStatus`` plus the parser's outcomes).
The store does not enforce them: the loop owns the vocabulary."""

_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
# Fields of SessionMeta that update_session may change (session_id/created_at are fixed, rounds and
# updated_at are maintained by the store itself).
_UPDATABLE = frozenset({"blueprint_id", "blueprint_hash", "model", "status", "title", "input", "extra"})


class SessionBusyError(StoreError):
    """Another run holds the session's lock; the message says until when and what to do.

    Attributes:
        session_id: The session that is in use.
        held_until: Unix time at which the other run's lock expires unless it is refreshed.
    """

    code = "store.session_busy"

    def __init__(self, message: str, *, session_id: str, held_until: float) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.held_until = held_until


def check_session_id(session_id: str) -> str:
    """Return ``session_id`` if it is a valid store key, else raise ``StoreError``.

    Ids are 1-128 characters of letters, digits, ``_``, ``-`` and ``.``, starting with a letter or
    digit, so they can be embedded in Redis keys and file names without escaping.
    """
    if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id):
        raise StoreError(
            f"invalid session id {session_id!r}: use 1-128 letters, digits, '_', '-' or '.', "
            "starting with a letter or digit",
            code="store.invalid_session_id",
        )
    return session_id


def dumps_entry(value: object, *, what: str) -> str:
    """``dumps`` for the call journal's many small entries: the protocol's prebuilt C encoder, then ``dumps``.

    ``json.dumps`` with options builds a new encoder on every call, which shows at one entry per call start
    and end; a value the fast encoder refuses (NaN: the codec never makes one) goes through ``dumps``.
    """
    try:
        return _fast_dumps(value)
    except (TypeError, ValueError):
        return dumps(value, what=what)


def dumps(value: object, *, what: str) -> str:
    """Serialize ``value`` to compact JSON, raising ``StoreError`` naming ``what`` when it cannot.

    Args:
        value: A JSON-able value (variables must already be codec-encoded).
        what: What is being written, for the message (``"variable 'df'"``, ``"round 3"``).
    """
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"cannot store {what}: it is not JSON-serializable ({exc}); encode values with the sandbox codec first",
            code="store.not_serializable",
        ) from exc


@dataclass(frozen=True, kw_only=True)
class SessionMeta:
    """What the store knows about a session besides its rounds.

    Attributes:
        session_id: The session id (see ``check_session_id``).
        blueprint_id: The blueprint's id (``metadata.id`` or the file stem).
        blueprint_hash: A hash of the blueprint the session was started with.
        model: The model name used for code (litellm name).
        created_at: Unix time of creation.
        updated_at: Unix time of the last write (maintained by the store).
        status: ``active`` while a run goes on, then ``completed``, ``failed``, ``paused`` or
            ``interrupted`` (Ctrl-C, a cancel, a store outage, or its run's host died).
        rounds: Number of recorded rounds (maintained by the store).
        title: A short human title, if any.
        input: The first user input, if any.
        extra: Open JSON data (run ids, reasons, answer, ...).
    """

    session_id: str
    blueprint_id: str
    blueprint_hash: str
    model: str
    created_at: float = field(default_factory=time.time)
    updated_at: float = 0.0
    status: SessionStatus = "active"
    rounds: int = 0
    title: str | None = None
    input: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.updated_at == 0.0:
            object.__setattr__(self, "updated_at", self.created_at)

    def to_json(self) -> dict[str, object]:
        """A JSON-able dict of every field."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SessionMeta:
        """Build from ``to_json()`` output; unknown keys are ignored (forward compatibility)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def with_updates(self, **changes: Any) -> SessionMeta:
        """Return a copy with ``changes`` applied, validated as ``Store.update_session`` does."""
        unknown = sorted(set(changes) - _UPDATABLE)
        if unknown:
            raise StoreError(
                f"cannot update session field(s) {unknown} of session {self.session_id!r}; "
                f"updatable fields: {sorted(_UPDATABLE)}",
                code="store.invalid_field",
            )
        if "status" in changes and changes["status"] not in SESSION_STATUSES:
            raise StoreError(
                f"invalid status {changes['status']!r} for session {self.session_id!r}; "
                f"use one of {list(SESSION_STATUSES)}",
                code="store.invalid_field",
            )
        return replace(self, **changes, updated_at=time.time())


_TUPLE_FIELDS = ("segment_ids", "calls", "uncaptured", "artifacts")


@dataclass(frozen=True, kw_only=True)
class RoundRecord:
    """Everything one round did: what replay and resume read back.

    Attributes:
        session_id: The session.
        index: 1-based round number; ``append_round`` requires last + 1.
        started_at: Unix time the round started.
        duration_s: Wall time of the whole round.
        prompt_hash: Hash of the prompt sent to the model.
        prompt: The full prompt text, or None when only the hash and ``segment_ids`` are kept.
        segment_ids: Ids of the segments the prompt was built from, in order.
        reply: The raw model reply.
        code: The program that ran (FIM prefix + middle + suffix, what replay re-executes), or None when the
            reply held no code.
        parse_error: Why no code could be parsed, or None.
        calls: Bridge call records, in call order: ``{"toolkit", "operation", "arguments",
            "result" | "error", "started_at", "duration_s"}``.
        stdout: Captured standard output (already truncated by the sandbox).
        stderr: Captured standard error.
        error: ``ExecutionError.to_json()`` of what the code raised, or None.
        status: The round outcome (see ``ROUND_STATUSES``).
        control: A control signal the code raised (``{"kind": "finish", "answer": ...}``), or None.
        variables: The full codec-encoded state after the round.
        uncaptured: ``{"name", "type", "reason"}`` for values the codec could not carry.
        usage: Tokens and cost per model call (``{"calls": [...], "total_tokens": ..., "cost": ...}``).
        timings: Named phases in seconds (``model``, ``sandbox``, ``store``, ...).
        nondeterminism: What the code read from the clock and the system's randomness
            (``ExecutionResult.nondeterminism``: the round's random seed and the reads, in order), fed
            back by replay; empty when the round ran no code or was recorded before this existed.
        edits: Variables hooks set or removed before this round's code ran: ``{"set": {name: encoded},
            "removed": [...], "by": ["hook.method", ...]}``; replay applies them first. ``"tools"``: the
            toolkits hooks injected that were in force for the round (name -> manifest entry), which
            replay gives the round's code. Empty when none.
        artifacts: Files the round wrote into ``outputs/``: ``{"name", "mime", "size", "refused",
            "data_b64"}`` (``refused`` set and no content when over a size cap).
        finish: The finishing protocol's step in this round (docs/finishing.md): ``{"step": "confirm" |
            "final_answer", "trigger", "prompt", "reply", "answer"?}``; ``answer`` is present when the
            step ended the run. Empty when no such step ran.
    """

    session_id: str
    index: int
    started_at: float
    duration_s: float
    prompt_hash: str
    reply: str
    prompt: str | None = None
    segment_ids: tuple[str, ...] = ()
    code: str | None = None
    parse_error: str | None = None
    calls: tuple[JsonObject, ...] = ()
    stdout: str = ""
    stderr: str = ""
    error: JsonObject | None = None
    status: str = "ok"
    control: dict[str, Any] | None = None
    variables: JsonObject = field(default_factory=dict)
    uncaptured: tuple[JsonObject, ...] = ()
    usage: JsonObject = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    nondeterminism: JsonObject = field(default_factory=dict)
    edits: dict[str, Any] = field(default_factory=dict)
    artifacts: tuple[dict[str, Any], ...] = ()
    finish: JsonObject = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        """A JSON-able dict of every field (tuples become lists)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in _TUPLE_FIELDS:
            data[name] = list(data[name])
        if not data["edits"]:
            del data["edits"]  # records without hook edits read as they did before the field existed
        if not data["finish"]:
            del data["finish"]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoundRecord:
        """Build from ``to_json()`` output; unknown keys are ignored (forward compatibility)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        for name in _TUPLE_FIELDS:
            if name in values:
                values[name] = tuple(values[name])
        return cls(**values)
