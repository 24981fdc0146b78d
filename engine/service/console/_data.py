"""What the console's pages show, read from the store (the same reads as ``codeact sessions show``).

Every value here is plain data (strings, numbers, lists); the templates escape all of it. Values the
model or its code produced are shown as JSON, or as Python shows them when JSON cannot hold them (a tuple
as ``('A', 4)``, a date as ``datetime.date(2026, 1, 2)``; never the codec's ``$type`` tags), trimmed for the page.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from codeact.engine.events import error_summary, without_frame_error
from codeact.engine.service.console._highlight import CodeLine, highlight
from codeact.engine.store import CorruptRecordError, RoundEntry, RoundRecord, SessionMeta, Store
from codeact.sandbox.runtime.codec import has_tags, python_repr

__all__ = [
    "ArtifactView",
    "CallView",
    "RoundView",
    "SessionRow",
    "SessionView",
    "VariableChange",
    "artifact_bytes",
    "child_links",
    "list_rows",
    "read_session",
    "round_view",
    "user_messages",
]

_TEXT_HEAD = 40  # stdout/stderr lines shown before "show all"
_TEXT_CAP = 200_000  # characters of stdout/stderr sent at all
_VALUE_CAP = 4_000  # characters of one argument, result or variable value
_TITLE_CHARS = 80  # characters of a session's title in the list
_SCAN_LIMIT = 10_000  # sessions read for the list (filtering and paging happen over these)
_APPROVAL_DENIED = -32008
_FENCE = re.compile(r"```[^\n]*\n.*?(?:```|\Z)", re.S)
_IMAGE_MIMES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def _json(value: Any, *, cap: int = _VALUE_CAP) -> str:
    """Plain data as indented JSON; a value JSON cannot hold as Python shows it (``('A', 4)``), never as its tag."""
    if has_tags(value):
        return python_repr(value, limit=cap)
    text = json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return text if len(text) <= cap else text[: cap - 1] + "…"


def when(timestamp: float | None) -> str:
    """``YYYY-MM-DD HH:MM:SS`` (UTC) for a Unix time, or ``-``."""
    if not timestamp:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(timestamp))


def duration(seconds: float | None) -> str:
    """A short human duration: ``850 ms``, ``12.3 s``, ``4 min 05 s``, ``2 h 03 min``."""
    if seconds is None or seconds < 0:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


@dataclass(frozen=True, kw_only=True)
class SessionRow:
    """One line of the sessions list."""

    session_id: str
    title: str
    blueprint: str
    model: str
    status: str
    rounds: int
    started: str
    duration: str
    created_at: float
    tokens: int | None = None
    cost: float | None = None
    problem: str | None = None


@dataclass(frozen=True, kw_only=True)
class CallView:
    """One toolkit call of a round."""

    name: str
    arguments: list[tuple[str, str]]
    result: str | None
    error: str | None
    duration: str
    approval: str | None
    pending: bool = False


@dataclass(frozen=True, kw_only=True)
class VariableChange:
    """A variable a round set or deleted: ``kind`` is ``added``, ``changed`` or ``removed``."""

    name: str
    kind: str
    before: str | None
    after: str | None


@dataclass(frozen=True, kw_only=True)
class ArtifactView:
    """A file a round wrote into ``outputs/``."""

    number: int
    name: str
    mime: str
    size: int
    image: bool
    refused: str | None


@dataclass(frozen=True, kw_only=True)
class RoundView:
    """One round as the session page shows it."""

    index: int
    status: str
    ok: bool
    started: str
    duration: str
    tokens: int | None
    cost: float | None
    timings: str
    thought: str
    code: Sequence[CodeLine]
    no_code: str | None
    error: str | None
    traceback: str
    calls: list[CallView]
    stdout: str
    stdout_lines: int
    stderr: str
    stderr_lines: int
    control: str | None
    control_label: str = "Control"
    variables: list[VariableChange]
    uncaptured: list[str]
    artifacts: list[ArtifactView]
    unreadable: str | None = None
    asked: tuple[str, ...] = ()


def _labels(extra: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The session's run labels for its page: tags, metadata (compact JSON, trimmed) and the latest run's trace."""
    out: list[tuple[str, str]] = []
    tags = extra.get("tags")
    if isinstance(tags, list) and tags:
        out.append(("tags", ", ".join(str(t) for t in tags)))
    metadata = extra.get("metadata")
    if isinstance(metadata, Mapping) and metadata:
        text = json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), default=str)
        out.append(("metadata", text if len(text) <= 300 else text[:299] + "…"))
    if isinstance(extra.get("trace_id"), str) and extra["trace_id"]:
        out.append(("trace", extra["trace_id"]))
    return out


@dataclass(frozen=True, kw_only=True)
class SessionView:
    """A session page: metadata, rounds, parent and children."""

    meta: SessionMeta | None
    session_id: str
    rounds: list[RoundView]
    problems: list[str]
    parent: str | None
    children: list[str]
    started: str
    updated: str
    duration: str
    tokens: int | None
    cost: float | None
    info: list[tuple[str, str]] = field(default_factory=list)
    question: str | None = None
    waiting: tuple[str, ...] = ()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _round_usage(usage: Mapping[str, Any]) -> tuple[int | None, float | None]:
    """A round's tokens and cost.

    Top-level ``total_tokens``/``cost``, else summed per model call (``{"thought": {...}, "code":
    {...}}``, as the CodeAct loop records them).
    """
    parts = (
        [usage] if "total_tokens" in usage or "cost" in usage else [v for v in usage.values() if isinstance(v, Mapping)]
    )
    tokens: int | None = None
    cost: float | None = None
    for part in parts:
        t, c = _number(part.get("total_tokens")), _number(part.get("cost"))
        if t is not None:
            tokens = (tokens or 0) + int(t)
        if c is not None:
            cost = (cost or 0.0) + c
    return tokens, cost


def _usage(records: Sequence[RoundRecord]) -> tuple[int | None, float | None]:
    tokens: int | None = None
    cost: float | None = None
    for record in records:
        t, c = _round_usage(record.usage)
        if t is not None:
            tokens = (tokens or 0) + t
        if c is not None:
            cost = (cost or 0.0) + c
    return tokens, cost


class _UsageCache:
    """Tokens and cost per session, recomputed only when the session was updated."""

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[float, int | None, float | None]] = {}

    async def get(self, store: Store, meta: SessionMeta) -> tuple[int | None, float | None]:
        hit = self._by_id.get(meta.session_id)
        if hit is not None and hit[0] == meta.updated_at:
            return hit[1], hit[2]
        read = await store.read_rounds(meta.session_id)
        tokens, cost = _usage(read.rounds)
        if len(self._by_id) > 5_000:
            self._by_id.clear()
        self._by_id[meta.session_id] = (meta.updated_at, tokens, cost)
        return tokens, cost


USAGE = _UsageCache()


async def list_rows(
    store: Store,
    *,
    status: str | None,
    blueprint: str | None,
    page: int,
    per_page: int,
    show: Callable[[SessionMeta], bool] = lambda meta: True,
) -> tuple[list[SessionRow], int, list[str]]:
    """The sessions on ``page`` (1-based), newest first, filtered; the total matching; the blueprint ids seen.

    ``show`` says which sessions the reader may see (a token scoped to runners: their sessions);
    sessions with unreadable metadata are listed only to readers who may see every session.
    """
    items = await store.scan_sessions(limit=_SCAN_LIMIT)
    metas = [m for m in items if isinstance(m, SessionMeta) and show(m)]
    every = len(metas) == sum(isinstance(m, SessionMeta) for m in items)
    blueprints = sorted({m.blueprint_id for m in metas})
    picked = [m for m in metas if status in (None, m.status) and blueprint in (None, m.blueprint_id)]
    picked.sort(key=lambda m: (m.created_at, m.session_id), reverse=True)
    chosen: list[SessionMeta | CorruptRecordError] = list(picked)
    if status in (None, "unreadable") and blueprint is None and every:  # unreadable metadata: listed last
        chosen.extend(p for p in items if isinstance(p, CorruptRecordError))
    total = len(chosen)
    out: list[SessionRow] = []
    for item in chosen[(page - 1) * per_page : page * per_page]:
        if isinstance(item, CorruptRecordError):
            out.append(_unreadable_row(item))
            continue
        try:
            tokens, cost = await USAGE.get(store, item)
        except CorruptRecordError:
            tokens, cost = None, None
        out.append(
            SessionRow(
                session_id=item.session_id,
                title=_title(item),
                blueprint=item.blueprint_id,
                model=item.model,
                status=item.status,
                rounds=item.rounds,
                started=when(item.created_at),
                duration=duration(item.updated_at - item.created_at),
                created_at=item.created_at,
                tokens=tokens,
                cost=cost,
            )
        )
    return out, total, blueprints


def _title(meta: SessionMeta) -> str:
    """The list's title: the session's title, else its first user message, on one line."""
    text = " ".join((meta.title or meta.input or "").split())
    return text if len(text) <= _TITLE_CHARS else text[: _TITLE_CHARS - 1] + "…"


def user_messages(segments: Sequence[Mapping[str, Any]]) -> dict[int, list[str]]:
    """The user's messages of a conversation by the round each started, in order.

    A message recorded when ``n`` rounds were done (its ``round_index``) starts round ``n + 1``.
    """
    out: dict[int, list[str]] = {}
    for seg in segments:
        if seg.get("kind") == "User" and isinstance(seg.get("content"), str):
            index = seg.get("round_index")
            out.setdefault((index if isinstance(index, int) else 0) + 1, []).append(seg["content"])
    return out


def _unreadable_row(problem: CorruptRecordError) -> SessionRow:
    return SessionRow(
        session_id=problem.session_id,
        title="",
        blueprint="?",
        model="?",
        status="unreadable",
        rounds=0,
        started="-",
        duration="-",
        created_at=0.0,
        problem=problem.message,
    )


def _thought(reply: str) -> str:
    """The reply's prose: the text around its fenced code blocks (its ``Thought:`` label dropped: the page has one)."""
    text = re.sub(r"\n\s*\n+", "\n\n", _FENCE.sub("", reply)).strip()
    return _THOUGHT_LABEL.sub("", text, count=1)


_THOUGHT_LABEL = re.compile(r"^\s*(?:\*\*)?thought(?:\*\*)?\s*:\s*(?:\*\*)?\s*", re.I)
_CONTROL_LABELS = {"finish": "Answer", "ask_user": "Question"}


def _control_text(control: Mapping[str, Any]) -> str:
    """What a control signal said, as a person reads it: the answer, the question, else the signal as JSON."""
    kind = control.get("kind")
    if kind == "finish":
        return _json(control.get("answer"))
    if kind == "ask_user":
        question = control.get("question")
        return question if isinstance(question, str) else _json(question)
    return _json(control)


def _result_text(result: Any) -> str:
    """A call's result as the page shows it: a control signal (``system.finish``) as what it said."""
    if isinstance(result, Mapping) and isinstance(result.get("$control"), Mapping) and len(result) == 1:
        control = result["$control"]
        label = {"finish": "finished the run with", "ask_user": "asked"}.get(str(control.get("kind")))
        if label is not None:
            return f"{label}: {_control_text(control)}"
    return _json(result)


def _approval(call: Mapping[str, Any]) -> str | None:
    approval = call.get("approval")
    if isinstance(approval, str):
        return approval
    error = call.get("error")
    if isinstance(error, Mapping) and error.get("code") == _APPROVAL_DENIED:
        return "denied"
    return None


def call_view(call: Mapping[str, Any], *, pending: bool = False) -> CallView:
    """A toolkit call record (stored, or pending while its round runs) as the page shows it."""
    arguments = call.get("arguments")
    args = [(str(k), _json(v)) for k, v in arguments.items()] if isinstance(arguments, Mapping) else []
    error = call.get("error")
    error_text: str | None = None
    if error is not None:
        message = error.get("message", error) if isinstance(error, Mapping) else error
        name = error.get("name") if isinstance(error, Mapping) else None
        error_text = f"{name}: {_json(message)}" if name else _json(message)
    seconds = call.get("duration_s")
    return CallView(
        name=f"{call.get('toolkit')}.{call.get('operation')}",
        arguments=args,
        result=None if error is not None or pending else _result_text(call.get("result")),
        error=error_text,
        duration=duration(seconds) if isinstance(seconds, int | float) else "-",
        approval=_approval(call),
        pending=pending,
    )


def _trim(text: str) -> tuple[str, int]:
    text = text[:_TEXT_CAP]
    return text, text.count("\n") + (0 if text.endswith("\n") or not text else 1)


def _changes(entry: RoundEntry, before: Mapping[str, Any]) -> list[VariableChange]:
    assert entry.record is not None  # noqa: S101 - the caller checks
    after = entry.record.variables
    out = [
        VariableChange(
            name=name,
            kind="added" if name in entry.added else "changed",
            before=None if name in entry.added or name not in before else _json(before[name]),
            after=_json(after.get(name, entry.changed[name])),
        )
        for name in sorted(entry.changed)
    ]
    out.extend(
        VariableChange(name=n, kind="removed", before=_json(before[n]) if n in before else None, after=None)
        for n in sorted(entry.removed)
    )
    return out


def round_view(entry: RoundEntry, before: Mapping[str, Any], asked: Sequence[str] = ()) -> RoundView:
    """One stored round as the page shows it.

    ``before`` holds the variables after the round before; ``asked``, the user's messages that started it.
    """
    record = entry.record
    if record is None:
        return replace(_unreadable(entry), asked=tuple(asked))
    error = record.error
    line = error.get("line") if isinstance(error, Mapping) else None
    stdout = without_frame_error(record.stdout, record.error) if record.error else record.stdout
    stdout, stdout_lines = _trim(stdout)
    stderr, stderr_lines = _trim(record.stderr)
    tokens, cost = _usage([record])
    no_code = None
    if record.code is None:
        no_code = record.parse_error or "the reply held no code"
    return RoundView(
        index=record.index,
        status=record.status,
        ok=record.status == "ok",
        started=when(record.started_at),
        duration=duration(record.duration_s),
        tokens=tokens,
        cost=cost,
        timings=", ".join(f"{k} {duration(v)}" for k, v in record.timings.items() if isinstance(v, int | float)),
        thought=_thought(record.reply) if record.code is not None else record.reply.strip(),
        code=highlight(record.code, error_line=line if isinstance(line, int) else None) if record.code else [],
        no_code=no_code,
        error=error_summary(error) if isinstance(error, Mapping) else None,
        traceback=str(error.get("traceback") or "") if isinstance(error, Mapping) else "",
        calls=[call_view(c) for c in record.calls if isinstance(c, Mapping)],
        stdout=stdout,
        stdout_lines=stdout_lines,
        stderr=stderr,
        stderr_lines=stderr_lines,
        control=_control_text(record.control) if record.control else None,
        control_label=_CONTROL_LABELS.get(str(record.control.get("kind")), "Control") if record.control else "Control",
        variables=_changes(entry, before),
        uncaptured=[f"{u.get('name')} ({u.get('type')}): {u.get('reason')}" for u in record.uncaptured],
        artifacts=[
            ArtifactView(
                number=i,
                name=str(a.get("name")),
                mime=str(a.get("mime") or "application/octet-stream"),
                size=int(a.get("size") or 0),
                image=str(a.get("mime")) in _IMAGE_MIMES and a.get("refused") is None,
                refused=str(a["refused"]) if a.get("refused") is not None else None,
            )
            for i, a in enumerate(record.artifacts)
        ],
        asked=tuple(asked),
    )


def _unreadable(entry: RoundEntry) -> RoundView:
    return RoundView(
        index=entry.index,
        status="unreadable",
        ok=False,
        started="-",
        duration="-",
        tokens=None,
        cost=None,
        timings="",
        thought="",
        code=[],
        no_code=None,
        error=None,
        traceback="",
        calls=[],
        stdout="",
        stdout_lines=0,
        stderr="",
        stderr_lines=0,
        control=None,
        variables=[],
        uncaptured=[],
        artifacts=[],
        unreadable=entry.problem.message if entry.problem is not None else "unreadable",
    )


def parent_of(session_id: str, meta: SessionMeta | None) -> str | None:
    """The parent session: ``extra.parent_session_id`` or the ``<parent>.<name>.<n>`` sub-agent id."""
    if meta is not None:
        for key in ("parent_session_id", "parent_session", "parent"):
            value = meta.extra.get(key)
            if isinstance(value, str) and value:
                return value
    parts = session_id.rsplit(".", 2)
    if len(parts) == 3 and parts[2].isdigit():
        return parts[0]
    return None


async def child_links(store: Store, session_id: str) -> list[str]:
    """Sessions that name ``session_id`` as their parent (sub-agents, flow steps)."""
    items = await store.scan_sessions(limit=_SCAN_LIMIT)
    return sorted(
        m.session_id
        for m in items
        if isinstance(m, SessionMeta) and m.session_id != session_id and parent_of(m.session_id, m) == session_id
    )


async def read_session(store: Store, session_id: str, *, after: int = 0) -> SessionView | None:
    """The whole session page's data, or None when no such session; ``after`` skips the first rounds."""
    problems: list[str] = []
    try:
        meta = await store.get_session(session_id)
    except CorruptRecordError as exc:
        meta, problems = None, [exc.message]
    else:
        if meta is None:
            return None
    read = await store.read_rounds(session_id)
    if read.problem is not None:
        problems.append(read.problem.message)
    rounds: list[RoundView] = []
    before: Mapping[str, Any] = {}
    asked = user_messages(await store.segments(session_id)) if meta is not None else {}
    last_index = read.entries[-1].index if read.entries else 0
    for entry in read.entries:
        if entry.index > after:
            rounds.append(round_view(entry, before, asked.get(entry.index, ())))
        if entry.record is not None:
            before = entry.record.variables
    tokens, cost = _usage(read.rounds)
    parent = parent_of(session_id, meta)
    question = None
    last = read.rounds[-1] if read.rounds else None
    if meta is not None and meta.status == "paused" and last is not None and last.control:
        if last.control.get("kind") == "ask_user":
            question = str(last.control.get("question") or "")
    info: list[tuple[str, str]] = []
    if meta is not None:
        info = [("blueprint", meta.blueprint_id), ("model", meta.model), ("status", meta.status)]
        if meta.title:
            info.append(("title", meta.title))
        info.extend(_labels(meta.extra))
    return SessionView(
        meta=meta,
        session_id=session_id,
        rounds=rounds,
        problems=problems,
        parent=parent if parent is not None and await store.get_session(parent) is not None else None,
        children=await child_links(store, session_id),
        started=when(meta.created_at if meta else None),
        updated=when(meta.updated_at if meta else None),
        duration=duration(meta.updated_at - meta.created_at) if meta else "-",
        tokens=tokens,
        cost=cost,
        info=info,
        question=question,
        waiting=tuple(m for index in sorted(asked) if index > last_index for m in asked[index]),
    )


async def artifact_bytes(store: Store, session_id: str, index: int, number: int) -> tuple[str, str, bytes] | None:
    """(name, mime, content) of artifact ``number`` of round ``index``, or None."""
    record = await store.round(session_id, index)
    if record is None or not 0 <= number < len(record.artifacts):
        return None
    art = record.artifacts[number]
    data = art.get("data_b64")
    if art.get("refused") is not None or not isinstance(data, str):
        return None
    try:
        content = base64.b64decode(data, validate=True)
    except ValueError:
        return None
    return str(art.get("name") or "artifact"), str(art.get("mime") or "application/octet-stream"), content
