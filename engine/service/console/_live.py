"""The live part of a session page: SSE updates, pending interactions, replay.

A running session's page opens ``/sessions/{id}/live`` (Server-Sent Events). The stream reads the
store (new rounds; the calls of the round in progress, from the store's pending list) and the
service's run manager (the run's status and open interaction requests) each time the run reports an
event, and at least once a second, and sends server-rendered, escaped HTML fragments. It ends when the
session is no longer active and its run (if any) has finished.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse

from codeact.engine.errors import CodeactError, StoreError
from codeact.engine.service.console import _web
from codeact.engine.service.console._data import (
    CallView,
    SessionView,
    call_view,
    read_session,
    round_view,
    user_messages,
)
from codeact.engine.service.console._highlight import CodeLine, highlight
from codeact.engine.store import check_session_id
from codeact.sandbox.aio import wait_for

__all__ = ["Live", "live_context"]

_TICK_S = 1.0
_TERMINAL = frozenset({"completed", "failed", "cancelled", "canceled", "interrupted", "error", "finished"})
_REPLAY_TIMEOUT_S = 300.0


@dataclass(frozen=True, kw_only=True)
class _Interaction:
    request_id: str
    kind: str  # "approval" or "question"
    title: str
    detail: str


@dataclass(frozen=True, kw_only=True)
class _Progress:
    index: int
    code: Sequence[CodeLine]
    calls: list[CallView]


async def _run_of(state: _web.ConsoleState, session_id: str) -> Any:
    """The service's latest run of the session (``RunInfo``), or None."""
    runs = state.runs
    if runs is None:
        return None
    found = runs.by_session(session_id)
    return await found if inspect.isawaitable(found) else found


def _run_live(run: Any) -> bool:
    return run is not None and str(getattr(run, "status", "")).lower() not in _TERMINAL


def _interactions(run: Any) -> list[_Interaction]:
    """The run's open interaction requests (``InteractionRequest`` payloads) as the page shows them."""
    out: list[_Interaction] = []
    for item in getattr(run, "pending", None) or ():
        if not isinstance(item, Mapping):
            continue
        request_id = item.get("interaction_id") or item.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            continue
        kind = "approval" if item.get("kind") == "confirmation" else "question"
        title = str(item.get("title") or ("Allow this call?" if kind == "approval" else "The agent asks"))
        detail = str(item.get("description") or item.get("fallback_text") or "")
        out.append(_Interaction(request_id=request_id, kind=kind, title=title[:1000], detail=detail[:10000]))
    return out


async def _progress(state: _web.ConsoleState, session_id: str, after: int) -> _Progress | None:
    """The round in progress: its code and the calls it made so far (the store's pending list)."""
    try:
        entries = await state.store.pending(session_id)
    except CodeactError:
        return None
    index, code = 0, ""
    calls: list[CallView] = []
    for entry in entries:
        round_index = entry.get("round")
        if not isinstance(round_index, int) or round_index <= after:
            continue
        if round_index != index:
            index, code, calls = round_index, "", []
        if entry.get("kind") == "code" and isinstance(entry.get("code"), str):
            code = entry["code"]
        elif entry.get("kind") == "call" and isinstance(entry.get("call"), Mapping):
            calls.append(call_view(entry["call"]))
    if not index:
        return None
    return _Progress(index=index, code=highlight(code) if code else [], calls=calls)


def _fragment(name: str, **context: Any) -> str:
    return _web.templates().get_template(name).render(**context)


def _status_text(status: str, run: Any, waiting: int) -> str:
    if waiting:
        return f"Waiting for you: {waiting} request{'s' if waiting != 1 else ''} below."
    if _run_live(run) or status == "active":
        return "Running: new rounds appear as they are recorded."
    return ""


async def live_context(state: _web.ConsoleState, view: SessionView) -> dict[str, Any]:
    """What the session template needs for the live part (first render, before the stream)."""
    run = await _run_of(state, view.session_id)
    status = view.meta.status if view.meta is not None else "unreadable"
    live = status == "active" or _run_live(run)
    after = max((r.index for r in view.rounds), default=0)
    items = _interactions(run) if run is not None else []
    progress = await _progress(state, view.session_id, after) if live else None
    return {
        "live": live,
        "after": after,
        "live_text": _status_text(status, run, len(items)) if live else "",
        "answerable": any(item.kind == "question" for item in items),
        "interactions_html": Markup(_fragment("_interactions.html.j2", items=items, sid=view.session_id)),
        "progress_html": Markup(_fragment("_progress.html.j2", progress=progress)),
    }


def _sse(event: str, data: Mapping[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


class Live:
    """The live endpoints over one service state."""

    def __init__(self, state: _web.ConsoleState) -> None:
        self.state = state
        self._replays: asyncio.Semaphore | None = None  # one replay at a time (made on the app's loop)

    async def stream(self, request: Request) -> Response:
        """``GET /sessions/{id}/live?after=N``: Server-Sent Events until the run is over."""
        session_id = request.path_params["session_id"]
        try:
            check_session_id(session_id)
            after = max(0, int(request.query_params.get("after", "0")))
        except (StoreError, ValueError):
            return PlainTextResponse("bad session id or 'after'", status_code=400)
        if not _web.visible(request, self.state, await self.state.store.get_session(session_id)):
            return PlainTextResponse("no such session", status_code=404)
        response = StreamingResponse(self._events(session_id, after), media_type="text/event-stream")
        response.headers["Cache-Control"] = "no-store"
        response.headers["X-Accel-Buffering"] = "no"
        return response

    async def _events(self, session_id: str, after: int) -> AsyncIterator[str]:
        store = self.state.store
        wake = asyncio.Event()
        watcher: asyncio.Task[None] | None = None
        watched: str | None = None
        sent: dict[str, str] = {}
        render_round = _web.templates().get_template("_round.html.j2").module.render_round  # type: ignore[attr-defined]
        yield ": live\n\n"
        try:
            while True:
                run = await _run_of(self.state, session_id)
                run_id = getattr(run, "run_id", None)
                if isinstance(run_id, str) and run_id != watched and self.state.runs is not None:
                    if watcher is not None:
                        watcher.cancel()
                    watcher, watched = asyncio.create_task(self._watch(run_id, wake)), run_id
                meta = await store.get_session(session_id)
                if meta is None:
                    yield _sse("end", {"reason": "deleted"})
                    return
                if meta.rounds > after:
                    read = await store.read_rounds(session_id)
                    asked = user_messages(await store.segments(session_id))
                    before: Mapping[str, Any] = {}
                    for entry in read.entries:
                        if entry.index > after:
                            view = round_view(entry, before, asked.get(entry.index, ()))
                            html = str(render_round(view, session_id))
                            yield _sse("round", {"index": entry.index, "html": html})
                            after = entry.index
                        if entry.record is not None:
                            before = entry.record.variables
                progress = await _progress(self.state, session_id, after)
                items = _interactions(run) if run is not None else []
                for name, payload in (
                    ("progress", {"html": _fragment("_progress.html.j2", progress=progress)}),
                    (
                        "interactions",
                        {"html": _fragment("_interactions.html.j2", items=items, sid=session_id), "count": len(items)},
                    ),
                    ("status", {"status": meta.status, "text": _status_text(meta.status, run, len(items))}),
                ):
                    text = _sse(name, payload)
                    if sent.get(name) != text:
                        sent[name] = text
                        yield text
                if meta.status != "active" and not _run_live(run):
                    yield _sse("end", {"status": meta.status})
                    return
                try:
                    await wait_for(wake.wait(), _TICK_S)
                except TimeoutError:
                    yield ": tick\n\n"
                wake.clear()
        finally:
            if watcher is not None:
                watcher.cancel()

    async def _watch(self, run_id: str, wake: asyncio.Event) -> None:
        """Wake the stream at each event of the run (the store and run manager say what changed)."""
        runs = self.state.runs
        if runs is None:
            return
        try:
            async for _ in runs.events(run_id, after=0):
                wake.set()
        except CodeactError:
            pass
        wake.set()

    async def interact(self, request: Request) -> Response:
        """``POST /sessions/{id}/interact``: allow / deny a pending call, or answer a question."""
        session_id = request.path_params["session_id"]
        data = await _web.form(request)
        back = f"/sessions/{session_id}"
        try:
            check_session_id(session_id)
        except StoreError:
            return PlainTextResponse("bad session id", status_code=400)
        if not _web.visible(request, self.state, await self.state.store.get_session(session_id)):
            return PlainTextResponse("no such session", status_code=404)
        run = await _run_of(self.state, session_id)
        request_id = data.get("request_id", "")
        if run is None or self.state.runs is None or not request_id:
            return _web.no_store(PlainTextResponse("no run of this session waits for an answer", status_code=409))
        decision = data.get("decision", "")
        payload: dict[str, Any]
        if decision in ("allow", "deny"):
            action = "approve" if decision == "allow" else "deny"
            payload = {"interaction_id": request_id, "action_id": action, "values": {}}
        elif decision == "answer":
            payload = {
                "interaction_id": request_id,
                "action_id": "submit",
                "values": {"answer": data.get("answer", "")[:20_000]},
            }
        else:
            return _web.no_store(PlainTextResponse("decision must be allow, deny or answer", status_code=400))
        try:
            result = self.state.runs.interact(run.run_id, payload)
            if inspect.isawaitable(result):
                await result
        except CodeactError as exc:
            return _web.no_store(PlainTextResponse(f"not submitted: {exc.message}", status_code=409))
        return _web.no_store(RedirectResponse(back, status_code=303))

    async def replay(self, request: Request) -> Response:
        """``POST /sessions/{id}/replay``: re-execute the session from the record, match/mismatch per round."""
        from codeact.engine.replay import replay_session

        session_id = request.path_params["session_id"]
        try:
            check_session_id(session_id)
        except StoreError:
            return PlainTextResponse("bad session id", status_code=400)
        view = await read_session(self.state.store, session_id)
        if view is None or not _web.visible(request, self.state, view.meta):
            return PlainTextResponse("no such session", status_code=404)
        report: dict[str, Any]
        try:
            if self._replays is None:
                self._replays = asyncio.Semaphore(1)
            async with self._replays:
                registry = getattr(self.state, "registry", None)
                done = await wait_for(
                    replay_session(self.state.store, session_id, registry=registry), _REPLAY_TIMEOUT_S
                )
            report = {
                "ok": done.ok,
                "problem": done.problem,
                "error": None,
                "rounds": done.rounds,
            }
        except (CodeactError, TimeoutError) as exc:
            message = exc.message if isinstance(exc, CodeactError) else f"replay took over {_REPLAY_TIMEOUT_S:.0f} s"
            report = {"ok": False, "problem": None, "error": f"replay failed: {message}", "rounds": ()}
        view = await _web.visible_links(request, self.state, view)
        live = await live_context(self.state, view)
        return _web.render("session.html.j2", s=view, replay=report, can_replay=True, **live)
