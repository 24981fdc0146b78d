"""How rounds and session metadata are stored, and how they are read back (both backends).

Owns the stored shape of a ``RoundRecord`` and every check on the way back in; the backends
only move the bytes. What a record holds:

1. **Format 2** (written since the store went linear): every ``RoundRecord`` field except
   ``segment_ids`` and ``variables``, plus ``"v": 2`` and what the round *changed*:
   ``"segments": {"keep": K, "add": [ids]}`` (the round's ``segment_ids`` are the first ``K`` of the
   round before's, then ``add``), ``"vars": {"set": {name: value}, "del": [names]}`` (the variables
   after the round are the ones before it without ``del``, with ``set``) and
   ``"table": {"segments": P}`` (how many segments the session's segment list held after the round,
   so ``truncate`` knows which to drop and a bad segment is attributed to its round). A record's size
   therefore depends on what its round did, not on how many rounds came before it.
2. **Format 1** (no ``"v"``): ``RoundRecord.to_json()`` whole. Still read: a session may hold
   format-1 rounds followed by format-2 ones, whose deltas apply to the last full state.
3. Reading decodes the chain in order (``decode_rounds``). A record that is not JSON, not an object,
   or whose fields have the wrong type stops the chain there with a ``CorruptRecordError`` that names
   the session, the round and the field, and says which ``codeact sessions truncate`` repairs it;
   the records after it are still decoded on their own (for ``sessions show``), but the store never
   hands them out as trustworthy rounds.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from codeact.engine.errors import StoreError
from codeact.engine.store._types import RoundRecord, dumps
from codeact.prompts.jsontypes import JsonValue

__all__ = [
    "FORMAT",
    "CorruptRecordError",
    "RoundEntry",
    "RoundsRead",
    "Tail",
    "TailCache",
    "body_digest",
    "decode_rounds",
    "decode_rounds_from",
    "decode_tail",
    "encode_round",
    "pick_round",
    "kind",
    "repair_hint",
    "round_error",
]

FORMAT = 2
"""The record format ``encode_round`` writes."""

Part = Literal["round", "variable", "segment", "session"]


class CorruptRecordError(StoreError):
    """A stored entry does not decode; the message names the session, the round and the field.

    Attributes:
        session_id: The session.
        part: ``round``, ``variable``, ``segment`` or ``session`` (its metadata).
        round: The round the entry belongs to, when known.
        field: The field (or variable name, segment position) that is unreadable.
        repair_after: The ``--after`` of the ``codeact sessions truncate`` that repairs it.
    """

    code = "store.corrupt"

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        part: Part,
        round: int | None,
        field: str | None,
        repair_after: int | None,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.part = part
        self.round = round
        self.field = field
        self.repair_after = repair_after


def repair_hint(session_id: str, after: int | None, what: str) -> str:
    if after is None:
        return ""
    return f"; to repair, {what}: codeact sessions truncate {session_id} --after {after}"


def round_error(session_id: str, index: int, reason: str, *, field: str | None = None) -> CorruptRecordError:
    """The error for round ``index`` of ``session_id`` (repair: keep the rounds before it)."""
    where = f"field {field!r}: " if field else ""
    after = max(0, index - 1)
    kept = "no rounds" if after == 0 else "round 1" if after == 1 else f"rounds 1-{after}"
    return CorruptRecordError(
        f"round {index} of session {session_id!r} is unreadable: {where}{reason}"
        + repair_hint(session_id, after, f"drop it and the rounds after it (keeping {kept})"),
        session_id=session_id,
        part="round",
        round=index,
        field=field,
        repair_after=after,
    )


# ---- field checks ----------------------------------------------------------------------------------


def kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _list_of(item: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: isinstance(value, list) and all(item(v) for v in value)


def _optional(check: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda value: value is None or check(value)


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_dict(value: object) -> bool:
    return isinstance(value, dict)


# field -> (check, what it should be); the required ones have no default in RoundRecord.
_ROUND_FIELDS: dict[str, tuple[Callable[[object], bool], str]] = {
    "session_id": (_is_str, "a string"),
    "index": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "started_at": (_is_number, "a number"),
    "duration_s": (_is_number, "a number"),
    "prompt_hash": (_is_str, "a string"),
    "reply": (_is_str, "a string"),
    "prompt": (_optional(_is_str), "a string or null"),
    "segment_ids": (_list_of(_is_str), "a list of strings"),
    "code": (_optional(_is_str), "a string or null"),
    "parse_error": (_optional(_is_str), "a string or null"),
    "calls": (_list_of(_is_dict), "a list of objects"),
    "stdout": (_is_str, "a string"),
    "stderr": (_is_str, "a string"),
    "error": (_optional(_is_dict), "an object or null"),
    "status": (_is_str, "a string"),
    "control": (_optional(_is_dict), "an object or null"),
    "variables": (_is_dict, "an object"),
    "uncaptured": (_list_of(_is_dict), "a list of objects"),
    "usage": (_is_dict, "an object"),
    "timings": (_is_dict, "an object"),
    "nondeterminism": (_is_dict, "an object"),
    "artifacts": (_list_of(_is_dict), "a list of objects"),
    "finish": (_is_dict, "an object"),
}
_REQUIRED = ("session_id", "index", "started_at", "duration_s", "prompt_hash", "reply")
_DELTA_FIELDS = ("segment_ids", "variables")
_DELTA_CHECKED = tuple(n for n in _ROUND_FIELDS if n not in _DELTA_FIELDS)


def _check_fields(session_id: str, index: int, data: Mapping[str, object], names: Iterable[str]) -> None:
    for name in _REQUIRED:
        if name not in data:
            raise round_error(session_id, index, "missing", field=name)
    for name in names:
        if name in data:
            check, expected = _ROUND_FIELDS[name]
            if not check(data[name]):
                raise round_error(session_id, index, f"expected {expected}, got {kind(data[name])}", field=name)
    if data["index"] != index:
        raise round_error(session_id, index, f"the record says round {data['index']}", field="index")
    if data["session_id"] != session_id:
        owner = data["session_id"]
        raise round_error(session_id, index, f"the record belongs to session {owner!r}", field="session_id")


_RECORD_FIELDS = frozenset(f.name for f in fields(RoundRecord)) - set(_DELTA_FIELDS)


def _record(data: Mapping[str, Any], segment_ids: tuple[str, ...], variables: dict[str, JsonValue]) -> RoundRecord:
    values = {k: v for k, v in data.items() if k in _RECORD_FIELDS}
    for name in ("calls", "uncaptured", "artifacts"):
        if name in values:
            values[name] = tuple(values[name])
    return RoundRecord(**values, segment_ids=segment_ids, variables=variables)


# ---- the chain -----------------------------------------------------------------------------------


def body_digest(body: str | None) -> str:
    """The digest of a stored record body (SHA-1 hex, what Redis's ``redis.sha1hex`` computes); "" for none."""
    return "" if body is None else hashlib.sha1(body.encode("utf-8"), usedforsecurity=False).hexdigest()


@dataclass(frozen=True, kw_only=True)
class Tail:
    """The state after a round: what the next round's record is encoded against.

    Attributes:
        index: The round (0: before the first).
        segment_ids: That round's ``segment_ids``.
        variables: The variables after it.
        texts: Each variable's stored JSON text (to find what the next round changed).
        table_segments: Segments in the session's segment list after it (None: unknown, format 1).
        digest: ``body_digest`` of the round's stored record ("" for round 0).
    """

    index: int = 0
    segment_ids: tuple[str, ...] = ()
    variables: Mapping[str, JsonValue] = field(default_factory=dict)
    texts: Mapping[str, str] | None = None
    table_segments: int | None = 0
    digest: str = ""

    def variable_texts(self) -> Mapping[str, str]:
        """``texts``, computed from ``variables`` when the tail was decoded rather than written."""
        if self.texts is None:
            object.__setattr__(
                self, "texts", {name: dumps(value, what=f"variable {name!r}") for name, value in self.variables.items()}
            )
        assert self.texts is not None  # noqa: S101 - just set
        return self.texts


@dataclass(frozen=True, kw_only=True)
class RoundEntry:
    """One stored round as read back.

    Attributes:
        index: The round.
        record: The round, or None when its record is unreadable. After an unreadable round, the
            variables of later records rest on an unknown state: ``trusted`` is False.
        changed: The variables the round set (new or changed values).
        removed: The variables the round deleted.
        added: The names in ``changed`` that the round before did not hold.
        problem: Why the record is unreadable, or None.
        trusted: False for rounds after an unreadable one.
        table_segments: Segments in the segment list after this round, when the record says.
    """

    index: int
    record: RoundRecord | None
    changed: Mapping[str, JsonValue] = field(default_factory=dict)
    removed: tuple[str, ...] = ()
    added: tuple[str, ...] = ()
    problem: CorruptRecordError | None = None
    trusted: bool = True
    table_segments: int | None = None


@dataclass(frozen=True, kw_only=True)
class RoundsRead:
    """Every stored round of a session, decoded.

    Attributes:
        rounds: The readable rounds before the first unreadable one (what replay may use).
        problem: The first unreadable round, or None.
        entries: Every round, readable or not (what ``sessions show`` prints).
        tail: The state after the last readable round of ``rounds``.
    """

    rounds: tuple[RoundRecord, ...]
    problem: CorruptRecordError | None
    entries: tuple[RoundEntry, ...]
    tail: Tail


def _parse(session_id: str, index: int, body: str, known_segments: int | None) -> tuple[dict[str, Any], int]:
    """The record's JSON object and format, every field checked.

    ``known_segments`` is the round before's segment count, to bound ``keep`` (None: unknown).
    """
    try:
        data = json.loads(body)
    except (ValueError, TypeError) as exc:
        raise round_error(session_id, index, f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise round_error(session_id, index, f"expected a JSON object, got {kind(data)}")
    version = data.get("v", 1)
    if version == 1:
        _check_fields(session_id, index, data, _ROUND_FIELDS)
    elif version == FORMAT:
        _check_fields(session_id, index, data, _DELTA_CHECKED)
        segments, delta, table_info = data.get("segments"), data.get("vars"), data.get("table")
        if not (
            isinstance(segments, dict)
            and isinstance(segments.get("keep"), int)
            and 0 <= segments["keep"] <= (2**62 if known_segments is None else known_segments)
            and _list_of(_is_str)(segments.get("add"))
        ):
            expected = "expected {keep: N, add: [ids]} within the round before"
            raise round_error(session_id, index, expected, field="segments")
        if not (isinstance(delta, dict) and _is_dict(delta.get("set")) and _list_of(_is_str)(delta.get("del"))):
            raise round_error(session_id, index, "expected {set: {...}, del: [names]}", field="vars")
        if not (isinstance(table_info, dict) and isinstance(table_info.get("segments"), int)):
            raise round_error(session_id, index, "expected {segments: N}", field="table")
    else:
        reason = f"unknown record format {version!r} (written by a newer codeact?)"
        raise round_error(session_id, index, reason, field="v")
    return data, version


def _decode_one(
    session_id: str, index: int, body: str, prev: Tail, *, lenient: bool = False
) -> tuple[RoundEntry, Tail]:
    data, version = _parse(session_id, index, body, None if lenient else len(prev.segment_ids))
    if version == 1:
        segment_ids = tuple(data.get("segment_ids", ()))
        variables: dict[str, JsonValue] = dict(data.get("variables", {}))
        changed = {k: v for k, v in variables.items() if k not in prev.variables or prev.variables[k] != v}
        removed = tuple(sorted(set(prev.variables) - set(variables)))
        table: int | None = None
    else:
        segments, delta = data["segments"], data["vars"]
        keep = segments["keep"]
        kept = prev.segment_ids if keep == len(prev.segment_ids) else prev.segment_ids[:keep]
        segment_ids = kept + tuple(segments["add"])  # tuple concatenation: a memcpy, not an unpacking loop
        removed = tuple(delta["del"])
        changed = dict(delta["set"])
        variables = {k: v for k, v in prev.variables.items() if k not in removed}
        variables.update(changed)
        table = data["table"]["segments"]
    record = _record(data, segment_ids, variables)
    tail = Tail(
        index=index,
        segment_ids=segment_ids,
        variables=variables,
        table_segments=table,
        digest=body_digest(body),
    )
    added = tuple(name for name in changed if name not in prev.variables)
    entry = RoundEntry(index=index, record=record, changed=changed, removed=removed, added=added, table_segments=table)
    return entry, tail


def decode_tail(session_id: str, bodies: Iterable[tuple[int, str]]) -> tuple[Tail, CorruptRecordError | None]:
    """Check every record and return the state after the last one, without a ``RoundRecord`` per round.

    Linear: the running segment list and variables are updated in place. What a resume and the first
    write after it need. On an unreadable record: the state before it and the error.
    """
    ids: list[str] = []
    variables: dict[str, JsonValue] = {}
    table: int | None = 0
    index, last_body = 0, None
    for position, body in bodies:
        expected = index + 1
        if position != expected:
            return _tail(index, ids, variables, table, last_body), round_error(
                session_id, expected, "the record is missing"
            )
        try:
            data, version = _parse(session_id, position, body, len(ids))
        except CorruptRecordError as exc:
            return _tail(index, ids, variables, table, last_body), exc
        if version == 1:
            ids = list(data.get("segment_ids", ()))
            variables = dict(data.get("variables", {}))
            table = None
        else:
            segments, delta = data["segments"], data["vars"]
            del ids[segments["keep"] :]
            ids.extend(segments["add"])
            for name in delta["del"]:
                variables.pop(name, None)
            variables.update(delta["set"])
            table = data["table"]["segments"]
        index, last_body = position, body
    return _tail(index, ids, variables, table, last_body), None


def _tail(index: int, ids: list[str], variables: dict[str, JsonValue], table: int | None, body: str | None) -> Tail:
    return Tail(
        index=index, segment_ids=tuple(ids), variables=dict(variables), table_segments=table, digest=body_digest(body)
    )


def decode_rounds(session_id: str, bodies: Iterable[tuple[int, str]]) -> RoundsRead:
    """Decode a session's stored records (``(index, body)`` in order) into rounds.

    Never raises for a bad record: the first one becomes ``problem``; ``rounds`` stops before it.
    A gap in the indexes (a missing record) is a problem of the first missing round.
    """
    return decode_rounds_from(session_id, Tail(), bodies)


def decode_rounds_from(session_id: str, start: Tail, bodies: Iterable[tuple[int, str]]) -> RoundsRead:
    """``decode_rounds`` of the records after round ``start.index``, from the state after it."""
    good: list[RoundRecord] = []
    entries: list[RoundEntry] = []
    problem: CorruptRecordError | None = None
    tail = start
    state = tail  # what later records decode against (the last decodable state)
    expected = start.index + 1
    for index, body in bodies:
        if index != expected and problem is None:
            problem = round_error(session_id, expected, "the record is missing")
            entries.append(RoundEntry(index=expected, record=None, problem=problem, trusted=False))
        expected = index + 1
        try:
            # After an unreadable round the state is unknown: decode the rest on their own, leniently.
            entry, state = _decode_one(session_id, index, body, state, lenient=problem is not None)
        except CorruptRecordError as exc:
            problem = problem or exc
            entries.append(RoundEntry(index=index, record=None, problem=exc, trusted=False))
            continue
        if problem is None:
            assert entry.record is not None  # noqa: S101 - _decode_one always sets it
            good.append(entry.record)
            tail = state
            entries.append(entry)
        else:
            entries.append(
                RoundEntry(
                    index=index,
                    record=entry.record,
                    changed=entry.changed,
                    removed=entry.removed,
                    added=entry.added,
                    trusted=False,
                    table_segments=entry.table_segments,
                )
            )
    return RoundsRead(rounds=tuple(good), problem=problem, entries=tuple(entries), tail=tail)


def read_after_tail(session_id: str, index: int, cached: Tail, bodies: Mapping[int, str]) -> RoundsRead | None:
    """Round ``index`` decoded from the cached state after round ``index - 1``, or None if the cache is stale.

    ``bodies`` holds rounds ``index - 1`` and ``index`` as stored; on None decode from round 1 instead.
    """
    if index - 1 != 0 and body_digest(bodies.get(index - 1)) != cached.digest:
        return None
    if index not in bodies:
        return decode_rounds(session_id, [])
    return decode_rounds_from(session_id, cached, [(index, bodies[index])])


def verified_tail(session_id: str, bodies: Iterable[tuple[int, str]]) -> Tail:
    """The state after the last round of ``bodies`` (all of a session's rounds); the first unreadable one raised."""
    tail, problem = decode_tail(session_id, bodies)
    if problem is not None:
        raise problem
    return tail


def pick_round(read: RoundsRead, index: int) -> RoundRecord | None:
    """Round ``index`` out of ``read`` (which starts anywhere before it); its problem raised; None if absent."""
    for record in read.rounds:
        if record.index == index:
            return record
    if read.problem is not None and (read.problem.round or 0) <= index:
        raise read.problem
    return None


def encode_round(
    record: RoundRecord, prev: Tail, *, table_segments: int
) -> tuple[str, Tail, dict[str, str], list[str]]:
    """The stored body of ``record`` (format 2) against the state after the round before.

    Args:
        record: The round (``segment_ids`` and ``variables`` in full, as the loop knows them).
        prev: The state after round ``record.index - 1``.
        table_segments: Segments in the session's segment list once this round's are appended.

    Returns:
        ``(body, tail, set_texts, deleted)``: the JSON text, the state after this round, and the
        variables this round set (name -> JSON text) and deleted, for the variables table.
    """
    session_id = record.session_id
    texts = {
        name: dumps(value, what=f"variable {name!r} of session {session_id!r}")
        for name, value in record.variables.items()
    }
    before = prev.variable_texts()
    set_texts = {name: text for name, text in texts.items() if before.get(name) != text}
    deleted = sorted(name for name in before if name not in texts)
    keep = 0
    old, new = prev.segment_ids, record.segment_ids
    limit = min(len(old), len(new))
    while keep < limit and old[keep] == new[keep]:
        keep += 1
    data = record.to_json()
    del data["segment_ids"], data["variables"]
    data["v"] = FORMAT
    data["segments"] = {"keep": keep, "add": list(new[keep:])}
    data["vars"] = {"set": {name: record.variables[name] for name in set_texts}, "del": deleted}
    data["table"] = {"segments": table_segments}
    body = dumps(data, what=f"round {record.index} of session {session_id!r}")
    tail = Tail(
        index=record.index,
        segment_ids=tuple(new),
        variables=dict(record.variables),
        texts=texts,
        table_segments=table_segments,
        digest=body_digest(body),
    )
    return body, tail, set_texts, deleted


class TailCache:
    """The states after the last rounds a store wrote or read, per session (bounded).

    So a write or a ``round(i)`` read does not decode the whole chain again. Entries are checked against
    the stored record's digest before use, so another process's writes never make a stale entry count.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._data: dict[str, tuple[Tail, Tail]] = {}

    def get(self, session_id: str, index: int) -> Tail | None:
        """The cached state after round ``index`` (not yet verified), or None."""
        for tail in self._data.get(session_id, ()):
            if tail.index == index:
                return tail
        return None

    def put(self, session_id: str, before: Tail, tail: Tail) -> None:
        """Remember the states after two consecutive rounds (the newest last)."""
        self._data.pop(session_id, None)
        self._data[session_id] = (before, tail)
        while len(self._data) > self._size:
            self._data.pop(next(iter(self._data)))

    def drop(self, session_id: str) -> None:
        """Forget the session (after a conflict, a truncate or a delete)."""
        self._data.pop(session_id, None)
