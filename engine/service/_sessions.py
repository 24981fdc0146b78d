"""The sessions API: list, show (rounds, calls, variables, artifacts), an artifact's bytes, replay.

A token scoped to some runners sees the sessions of those runners only (a session belongs to the
runner whose blueprint it ran, or the one its metadata names); a token for every runner sees every
session of the store, including those ``codeact run`` recorded.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from codeact.engine.service._http import authenticate, read_json, service_state
from codeact.engine.service.errors import ServiceError

if TYPE_CHECKING:
    from starlette.requests import Request

    from codeact.engine.service._auth import TokenScope
    from codeact.engine.service._state import ServiceState
    from codeact.engine.store import RoundRecord, SessionMeta

__all__ = ["round_json", "session_routes"]

# Artifacts are served with their own type only when a browser cannot run them; anything else is a download.
_INLINE_MIMES = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp", "text/plain", "text/csv", "application/json"}
)
_MAX_LIMIT = 500


def session_routes() -> list[Route]:
    """The ``/v1/sessions`` routes."""
    return [
        Route("/v1/sessions", list_sessions, methods=["GET"]),
        Route("/v1/sessions/{session_id}", show_session, methods=["GET"]),
        Route("/v1/sessions/{session_id}/artifacts/{round:int}/{name}", get_artifact, methods=["GET"]),
        Route("/v1/sessions/{session_id}/replay", replay, methods=["POST"]),
    ]


def session_runner(state: ServiceState, meta: SessionMeta) -> str | None:
    """The id of the served runner a session belongs to, or None."""
    named = meta.extra.get("runner_id")
    if isinstance(named, str) and named in state.runners:
        return named
    for runner_id, runner in state.runners.items():
        if getattr(runner, "blueprint_id", runner_id) == meta.blueprint_id or runner_id == meta.blueprint_id:
            return runner_id
    return None


def _visible(state: ServiceState, scope: TokenScope, meta: SessionMeta) -> bool:
    if scope.runners is None:
        return True
    runner_id = session_runner(state, meta)
    return runner_id is not None and scope.allows(runner_id)


async def _session(request: Request) -> tuple[ServiceState, SessionMeta]:
    scope = authenticate(request)
    state = service_state(request)
    session_id = request.path_params["session_id"]
    meta = await state.store.get_session(session_id)
    if meta is None or not _visible(state, scope, meta):
        raise ServiceError(
            f"session {session_id!r} not found (or not visible to this token); GET /v1/sessions lists them",
            code="service.session_not_found",
            status=404,
        )
    if meta.status == "active":
        meta = await state.store.repair_status(session_id) or meta
    return state, meta


def round_json(record: RoundRecord) -> dict[str, object]:
    """A round as the API shows it: everything but the prompt, per-round variables and artifact bytes."""
    data = record.to_json()
    for heavy in ("prompt", "segment_ids", "variables"):
        data.pop(heavy, None)
    data["artifacts"] = [{k: v for k, v in a.items() if k != "data_b64"} for a in record.artifacts]
    return data


async def list_sessions(request: Request) -> Response:
    """``GET /v1/sessions[?limit=N]``: ``{"sessions": [meta, ...]}``, most recently updated first."""
    scope = authenticate(request)
    state = service_state(request)
    raw = request.query_params.get("limit", "50")
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_LIMIT:
        raise ServiceError(
            f"limit must be a whole number from 1 to {_MAX_LIMIT}, got {raw!r}",
            code="service.invalid_request",
            status=422,
        )
    metas = [m for m in await state.store.list_sessions(limit=int(raw)) if _visible(state, scope, m)]
    sessions = []
    for meta in metas:
        run = await state.runs.by_session(meta.session_id)
        sessions.append({**meta.to_json(), "run": run.to_json() if run is not None else None})
    return JSONResponse({"sessions": sessions})


async def show_session(request: Request) -> Response:
    """``GET /v1/sessions/{id}``: the session, its rounds (with calls), variables, artifacts and run."""
    state, meta = await _session(request)
    read = await state.store.read_rounds(meta.session_id)
    rounds = [round_json(r) for r in read.rounds]
    artifacts = [
        {"round": r.index, **{k: v for k, v in a.items() if k != "data_b64"}} for r in read.rounds for a in r.artifacts
    ]
    run = await state.runs.by_session(meta.session_id)
    body: dict[str, object] = {
        "session": meta.to_json(),
        "rounds": rounds,
        "variables": await state.store.variables(meta.session_id),
        "artifacts": artifacts,
        "run": run.to_json() if run is not None else None,
    }
    if read.problem is not None:
        body["problem"] = read.problem.message
    return JSONResponse(body)


async def get_artifact(request: Request) -> Response:
    """``GET /v1/sessions/{id}/artifacts/{round}/{name}``: a file the round's code wrote into ``outputs/``."""
    state, meta = await _session(request)
    index: int = request.path_params["round"]
    name: str = request.path_params["name"]
    record = await state.store.round(meta.session_id, index)
    found = next((a for a in (record.artifacts if record else ()) if a.get("name") == name), None)
    if found is None or not isinstance(found.get("data_b64"), str):
        raise ServiceError(
            f"no artifact {name!r} in round {index} of session {meta.session_id!r} (or it was refused: too large)",
            code="service.artifact_not_found",
            status=404,
        )
    try:
        content = base64.b64decode(found["data_b64"], validate=True)
    except (binascii.Error, ValueError):
        raise ServiceError(
            f"artifact {name!r} of round {index} is unreadable in the store",
            code="service.artifact_unreadable",
            status=500,
        ) from None
    mime = str(found.get("mime") or "")
    headers = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "sandbox"}
    if mime not in _INLINE_MIMES:
        mime = "application/octet-stream"
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
        headers["Content-Disposition"] = f'attachment; filename="{safe}"'
    return Response(content, media_type=mime, headers=headers)


async def replay(request: Request) -> Response:
    """``POST /v1/sessions/{id}/replay``: re-execute the recorded rounds in a fresh sandbox (``ReplayReport``)."""
    state, meta = await _session(request)
    if request.headers.get("content-length", "0") != "0" or "transfer-encoding" in request.headers:
        body = await read_json(request)
        if not isinstance(body, dict) or set(body) - {"live"} or body.get("live", False) is not False:
            raise ServiceError(
                "a replay over HTTP answers toolkit calls from the record only; send no body (or {})",
                code="service.invalid_request",
                status=422,
            )
    run = await state.runs.by_session(meta.session_id)
    if run is not None and not run.done:
        raise ServiceError(
            f"session {meta.session_id!r} is being run by {run.run_id!r}; replay it once that run ends",
            code="service.session_busy",
            status=409,
        )
    from codeact.engine.replay import replay_session

    report = await replay_session(state.store, meta.session_id, registry=state.registry)
    return JSONResponse(report.to_json())
