"""Reading a session's other entries back: segments, variables, metadata; and what truncate reports.

The counterpart of ``engine/store/_records.py`` (rounds) for the rest of a session: each decoder
raises a ``CorruptRecordError`` naming the session, the entry and the ``codeact sessions truncate``
that repairs it; ``repair_meta`` is what truncate does to metadata fields that do not decode.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from codeact.engine.errors import StoreError
from codeact.engine.store._records import CorruptRecordError, RoundEntry, RoundsRead, kind, repair_hint
from codeact.engine.store._types import SESSION_STATUSES, SessionMeta
from codeact.prompts.jsontypes import JsonObject, JsonValue

_T = TypeVar("_T")

__all__ = [
    "TruncateReport",
    "decode_meta",
    "decode_segment",
    "decode_segments",
    "decode_variable",
    "repair_meta",
    "segments_after",
]


def _round_of_position(position: int, entries: Iterable[RoundEntry]) -> int | None:
    for entry in entries:
        if entry.table_segments is not None and entry.table_segments >= position:
            return entry.index
    return None


def decode_segment(session_id: str, position: int, body: str, *, entries: Iterable[RoundEntry] = ()) -> JsonObject:
    """One stored segment (1-based ``position`` in the session's list); ``CorruptRecordError`` naming it."""
    reason: str | None = None
    try:
        data = json.loads(body)
    except (ValueError, TypeError) as exc:
        reason = f"not JSON ({exc})"
    else:
        if not isinstance(data, dict):
            reason = f"expected a JSON object, got {kind(data)}"
        elif not isinstance(data.get("id"), str):
            reason = "it has no string 'id'"
        else:
            return data
    owner = _round_of_position(position, entries)
    after = None if owner is None else owner - 1
    where = f" (added by round {owner})" if owner is not None else ""
    raise CorruptRecordError(
        f"segment {position} of session {session_id!r}{where} is unreadable: {reason}"
        + repair_hint(session_id, after, f"drop the rounds from round {owner} on"),
        session_id=session_id,
        part="segment",
        round=owner,
        field=str(position),
        repair_after=after,
    )


async def decode_segments(store: Any, session_id: str, rows: Iterable[tuple[int, str]]) -> list[JsonObject]:
    """Every stored segment (``(position, body)`` in order); the first unreadable one raised, with its round."""
    out: list[JsonObject] = []
    for position, body in rows:
        try:
            out.append(decode_segment(session_id, position, body))
        except CorruptRecordError:
            read: RoundsRead = await store.read_rounds(session_id)  # only now: to name the round
            decode_segment(session_id, position, body, entries=read.entries)
    return out


def decode_variable(session_id: str, name: str, text: str, *, rounds: int | None) -> JsonValue:
    """One stored variable (the session's current state, after round ``rounds``); ``CorruptRecordError`` naming it."""
    try:
        value: JsonValue = json.loads(text)
    except (ValueError, TypeError) as exc:
        where = f" (after round {rounds})" if rounds is not None else ""
        raise CorruptRecordError(
            f"variable {name!r} of session {session_id!r}{where} is unreadable: not JSON ({exc})"
            + repair_hint(session_id, rounds, "restore the variables from the round records"),
            session_id=session_id,
            part="variable",
            round=rounds,
            field=name,
            repair_after=rounds,
        ) from None
    return value


_META_CHECKS: dict[str, tuple[Callable[[Any], object], object]] = {  # each parses a stored str or number
    # field -> (parse raw -> value or raise ValueError, default when repairing)
    "session_id": (lambda v: _need(isinstance(v, str) and v, v), None),
    "blueprint_id": (lambda v: _need(isinstance(v, str), v), "unknown"),
    "blueprint_hash": (lambda v: _need(isinstance(v, str), v), ""),
    "model": (lambda v: _need(isinstance(v, str), v), "unknown"),
    "created_at": (lambda v: float(v), None),
    "updated_at": (lambda v: float(v), None),
    "status": (lambda v: _need(v in SESSION_STATUSES, v), "paused"),
    "rounds": (lambda v: _need(str(v).isdigit(), int(v)), None),
    "title": (lambda v: _need(v is None or isinstance(v, str), v), None),
    "input": (lambda v: _need(v is None or isinstance(v, str), v), None),
    "extra": (lambda v: _need(isinstance(parsed := json.loads(v) if isinstance(v, str) else v, dict), parsed), {}),
}
_META_REQUIRED = ("session_id", "blueprint_id", "blueprint_hash", "model", "created_at", "status", "rounds")


def _need(ok: object, value: _T) -> _T:
    if not ok:
        raise ValueError(f"unexpected value {value!r:.80}")
    return value


def _meta_fields(raw: Mapping[str, object]) -> tuple[dict[str, object], dict[str, str]]:
    values: dict[str, object] = {}
    bad: dict[str, str] = {}
    for name, (parse, _default) in _META_CHECKS.items():
        if name not in raw or raw[name] is None:
            if name in _META_REQUIRED:
                bad[name] = "missing"
            continue
        try:
            values[name] = parse(raw[name])
        except (ValueError, TypeError) as exc:
            bad[name] = str(exc) if not isinstance(exc, json.JSONDecodeError) else f"not JSON ({exc})"
    return values, bad


def decode_meta(session_id: str, raw: Mapping[str, object]) -> SessionMeta:
    """Session metadata from its stored fields (strings or numbers); ``CorruptRecordError`` naming the field."""
    values, bad = _meta_fields(raw)
    if bad:
        name, reason = next(iter(bad.items()))
        rounds = values.get("rounds")
        raise CorruptRecordError(
            f"the metadata of session {session_id!r} is unreadable: field {name!r}: {reason}"
            + repair_hint(
                session_id, rounds if isinstance(rounds, int) else None, "reset the unreadable fields to defaults"
            ),
            session_id=session_id,
            part="session",
            round=None,
            field=name,
            repair_after=rounds if isinstance(rounds, int) else None,
        )
    return SessionMeta.from_json(values)


def repair_meta(
    session_id: str, raw: Mapping[str, object], *, rounds: int, now: float
) -> tuple[SessionMeta, list[str]]:
    """The metadata with unreadable fields reset to defaults, ``rounds`` set; returns it and the fields reset."""
    values, bad = _meta_fields(raw)
    for name in bad:
        default = _META_CHECKS[name][1]
        if default is not None:
            values[name] = default
    values["session_id"] = session_id
    values.setdefault("created_at", now)
    values["updated_at"] = now
    values["rounds"] = rounds
    return SessionMeta.from_json(values), sorted(bad)


@dataclass(frozen=True, kw_only=True)
class TruncateReport:
    """What ``Store.truncate`` did.

    Attributes:
        session_id: The session.
        after: The last round kept.
        dropped_rounds: How many rounds were removed.
        dropped_segments: How many segments were removed.
        variables: How many variables the session holds now (as of round ``after``).
        repaired: Metadata fields reset to defaults because they were unreadable.
    """

    session_id: str
    after: int
    dropped_rounds: int
    dropped_segments: int
    variables: int
    repaired: tuple[str, ...] = ()


def segments_after(read: RoundsRead, after: int, segment_ids: list[str]) -> int:
    """How many of the session's segments (ids in order) belong to rounds 1..``after``."""
    if after == 0:
        return 0
    if after > len(read.rounds):
        raise read.problem or StoreError(f"round {after} is not recorded", code="store.not_found")
    entry = read.entries[after - 1]
    if entry.table_segments is not None:
        return min(entry.table_segments, len(segment_ids))
    # Format 1: the round's prompt was built from every segment up to it.
    wanted = set(read.rounds[after - 1].segment_ids)
    last = 0
    for position, segment_id in enumerate(segment_ids, start=1):
        if segment_id in wanted:
            last = position
    return last
