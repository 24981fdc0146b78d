"""``create_app(state)``: the Starlette app of ``codeact serve`` (docs/service.md lists its API).

An app is a list of routes; each handler is a small async function that authenticates, reads and
validates its input, calls the run manager or the store, and answers JSON (or SSE). Every error is
answered as ``{"error": {"code", "message"}}`` with its status, including Starlette's own 404/405 and
an unexpected exception (500, whose details go to the server log only).
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from codeact.engine.errors import CodeactError
from codeact.engine.service._host_state import seed_state, state_snapshot
from codeact.engine.service._http import authenticate, error_response, read_json, service_state, status_of
from codeact.engine.service._log import AccessLog, log_event
from codeact.engine.service._run_api import run_api_routes
from codeact.engine.service._sessions import session_routes
from codeact.engine.service._sse import SSE_HEADERS, envelope_json, parse_last_event_id, sse_stream
from codeact.engine.service.errors import ServiceError

if TYPE_CHECKING:
    from starlette.requests import Request

    from codeact.engine.agent import RunConfig
    from codeact.engine.runner import RunnerContext
    from codeact.engine.service._auth import TokenScope
    from codeact.engine.service._runs import RunInfo
    from codeact.engine.service._state import ServiceState

__all__ = ["create_app", "parse_config", "parse_context"]

_RUN_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")


def create_app(state: ServiceState) -> Starlette:
    """The HTTP app serving ``state``: the ``/v1`` API, then ``state.extra_routes`` (the console).

    The app's lifespan closes the run manager on shutdown (running runs are cancelled, their sessions
    left resumable).
    """

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await state.runs.close()
            state.audit.close()

    routes = [
        Route("/v1/health", health, methods=["GET"]),
        Route("/v1/runners", list_runners, methods=["GET"]),
        Route("/v1/runs", start_run, methods=["POST"]),
        Route("/v1/runs", list_runs, methods=["GET"]),
        Route("/v1/runs/{run_id}", get_run, methods=["GET"]),
        Route("/v1/runs/{run_id}/events", run_events, methods=["GET"]),
        Route("/v1/runs/{run_id}/cancel", cancel_run, methods=["POST"]),
        Route("/v1/runs/{run_id}/interactions", interact, methods=["POST"]),
        *run_api_routes(),
        *session_routes(),
        *state.extra_routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(AccessLog)],
        exception_handlers={CodeactError: _codeact_error, HTTPException: _http_error, Exception: _unexpected},
    )
    app.state.codeact = state
    return app


async def _codeact_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, CodeactError):  # pragma: no cover - registered for CodeactError only
        raise exc
    _log_error(request, exc.code, status_of(exc), exc.message)
    return error_response(exc)


def _log_error(request: Request, code: str, status: int, message: str) -> None:
    level = logging.ERROR if status >= 500 else logging.WARNING
    log_event(
        "error", level=level, code=code, status=status, method=request.method, path=request.url.path, message=message
    )


async def _http_error(request: Request, exc: Exception) -> Response:
    if not isinstance(exc, HTTPException):  # pragma: no cover - registered for HTTPException only
        raise exc
    code = {404: "service.not_found", 405: "service.method_not_allowed"}.get(exc.status_code, "service.http_error")
    message = f"{request.method} {request.url.path}: {exc.detail}"
    if exc.status_code == 404:
        message += "; the API is under /v1 (docs/service.md)"
    _log_error(request, code, exc.status_code, message)
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=exc.status_code)


async def _unexpected(request: Request, exc: Exception) -> Response:
    log_event(
        "error",
        level=logging.ERROR,
        exc_info=True,
        code="service.internal",
        status=500,
        method=request.method,
        path=request.url.path,
        message=f"{type(exc).__name__}: {exc}",
    )
    return JSONResponse(
        {"error": {"code": "service.internal", "message": "internal server error; the server log has the details"}},
        status_code=500,
    )


def _runner_allowed(scope: TokenScope, runner_id: str) -> None:
    if not scope.allows(runner_id):
        raise ServiceError(
            f"this token may not use runner {runner_id!r}; ask for a token scoped to it",
            code="service.forbidden",
            status=403,
        )


def parse_context(data: Any) -> RunnerContext:
    """Validate a run context (``RunnerContext``); pydantic's errors become a 422 with their paths.

    A context without ``run_id`` gets a fresh one (``run-<32 hex digits>``), so the same request can be
    sent twice (a host that wants to name its runs sends its own; the stream's envelopes carry it).

    Raises:
        ServiceError: ``service.invalid_context`` with ``errors`` (``loc`` starts with ``context``).
    """
    from codeact.engine.runner import RunnerContext

    if isinstance(data, dict) and "run_id" not in data:
        data = {**data, "run_id": f"run-{uuid.uuid4().hex}"}
    run_id = data.get("run_id") if isinstance(data, dict) else None
    if isinstance(run_id, str) and run_id and not _RUN_ID.fullmatch(run_id):
        raise ServiceError(
            f"invalid run context: context.run_id {run_id[:140]!r} must be 1-128 letters, digits or '._:-' "
            "(it names the run in URLs)",
            code="service.invalid_context",
            status=422,
            errors=[{"loc": ["context", "run_id"], "msg": "use 1-128 letters, digits or '._:-'", "type": "pattern"}],
        )
    try:
        return RunnerContext.model_validate(data)
    except ValidationError as exc:
        errors = [
            {"loc": ["context", *error["loc"]], "msg": error["msg"], "type": error["type"]}
            for error in exc.errors(include_url=False, include_input=False)
        ]
        shown = "; ".join(f"{_path(e['loc'])}: {e['msg']}" for e in errors[:3])
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        raise ServiceError(
            f"invalid run context: {shown}{more}", code="service.invalid_context", status=422, errors=errors
        ) from None


def parse_config(tags: Any, metadata: Any) -> RunConfig | None:
    """The run's labels from the body's ``tags`` (a list of strings) and ``metadata`` (an object), or None.

    Raises:
        ServiceError: ``service.invalid_config`` (422) naming the field: a wrong type, more than 64 tags
            or one over 128 characters, metadata over 8 KB as JSON.
    """
    from codeact.engine.agent import RunConfig
    from codeact.engine.errors import CodeactError

    if tags is None and metadata is None:
        return None

    def invalid(field: str, message: str) -> ServiceError:
        return ServiceError(
            f"invalid run {message}; see docs/service.md (run labels)",
            code="service.invalid_config",
            status=422,
            errors=[{"loc": [field], "msg": message, "type": "value_error"}],
        )

    if tags is not None and (not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags)):
        raise invalid("tags", f"tags: a list of non-empty strings, not {json.dumps(tags)[:100]}")
    if metadata is not None and not isinstance(metadata, dict):
        raise invalid("metadata", f"metadata: a JSON object, not {type(metadata).__name__}")
    try:
        return RunConfig(tags=tags or (), metadata=metadata or {})
    except CodeactError as exc:
        field = "tags" if exc.message.startswith("RunConfig.tags") else "metadata"
        raise invalid(field, exc.message.removeprefix("RunConfig.")) from None


def _path(loc: Sequence[Any]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")


async def health(request: Request) -> Response:
    """``GET /v1/health``: ``{"status": "ok"}`` (no token needed)."""
    return JSONResponse({"status": "ok"})


async def list_runners(request: Request) -> Response:
    """``GET /v1/runners``: ``{"runners": [manifest, ...]}``, the runners the token may use."""
    scope = authenticate(request)
    state = service_state(request)
    manifests = [
        runner.manifest.model_dump(mode="json", exclude_none=True)
        for runner_id, runner in sorted(state.runners.items())
        if scope.allows(runner_id)
    ]
    return JSONResponse({"runners": manifests})


def _wants_sse(request: Request) -> bool:
    return "text/event-stream" in request.headers.get("accept", "")


async def start_run(request: Request) -> Response:
    """``POST /v1/runs``: start a run; SSE of its results (``Accept: text/event-stream``) or all of them as JSON."""
    scope = authenticate(request)
    state = service_state(request)
    body = await read_json(request)
    if not isinstance(body, dict) or not isinstance(body.get("runner_id"), str) or "context" not in body:
        raise ServiceError(
            'the body must be a JSON object {"runner_id": "<id from GET /v1/runners>", "context": {<run context>}}',
            code="service.invalid_request",
            status=422,
        )
    unknown = sorted(set(body) - {"runner_id", "context", "tags", "metadata"})
    if unknown:
        raise ServiceError(
            f"unknown field(s) {unknown} in the body; it holds runner_id, context and optional tags and metadata",
            code="service.invalid_request",
            status=422,
        )
    runner_id: str = body["runner_id"]
    if runner_id in state.runners:
        _runner_allowed(scope, runner_id)
    context = parse_context(body["context"])
    config = parse_config(body.get("tags"), body.get("metadata"))
    snapshot = _state_snapshot(runner_id, context) if runner_id in state.runners else []
    info = await state.runs.start(runner_id, context, config=config)
    await seed_state(state.store, snapshot)
    log_event("run.accepted", run_id=info.run_id, runner_id=runner_id, token=scope.fingerprint)
    return await _results(request, info, after=0)


def _state_snapshot(runner_id: str, context: RunnerContext) -> list[tuple[str, str, bytes]]:
    """The writes of the context's ``state`` snapshot, checked before the run starts (docs/service.md).

    The state the run-scoped API serves is kept in the store; a client that sends ``context.state`` sets
    those values (each replaces the stored one) once its run is accepted. A continuation (an answer) does
    not send it again.

    Raises:
        ServiceError: ``service.invalid_context`` (422) for a scope the context has no owner for, a bad key or
            a value too large; the run is not started, nothing is written.
    """
    from codeact.engine.runner import RunnerAPIError

    try:
        return state_snapshot(runner_id=runner_id, context=context)
    except RunnerAPIError as exc:
        raise ServiceError(
            f"invalid run context: context.state: {exc.message}", code="service.invalid_context", status=422
        ) from None


async def _results(request: Request, info: RunInfo, *, after: int) -> Response:
    state = service_state(request)
    headers = {"Location": f"/v1/runs/{info.run_id}", "X-Run-Id": info.run_id}
    if _wants_sse(request):
        stream = sse_stream(state.runs.events(info.run_id, after=after))
        return StreamingResponse(stream, media_type="text/event-stream", headers={**SSE_HEADERS, **headers})
    results = [envelope_json(e) async for e in state.runs.events(info.run_id, after=after)]
    final = await state.runs.get(info.run_id)
    return JSONResponse({"run": (final or info).to_json(), "results": results}, headers=headers)


async def _run_for(request: Request) -> RunInfo:
    scope = authenticate(request)
    run_id = request.path_params["run_id"]
    info = await service_state(request).runs.get(run_id)
    if info is None:
        raise ServiceError(
            f"run {run_id!r} not found (finished runs are kept for a while, then forgotten); "
            "GET /v1/runs lists the known runs",
            code="service.run_not_found",
            status=404,
        )
    _runner_allowed(scope, info.runner_id)
    return info


async def list_runs(request: Request) -> Response:
    """``GET /v1/runs``: ``{"runs": [run, ...]}``, the known runs of the runners the token may use."""
    scope = authenticate(request)
    runs = await service_state(request).runs.list()
    return JSONResponse({"runs": [r.to_json() for r in runs if scope.allows(r.runner_id)]})


async def get_run(request: Request) -> Response:
    """``GET /v1/runs/{run_id}``: the run's state (``RunInfo``)."""
    return JSONResponse((await _run_for(request)).to_json())


async def run_events(request: Request) -> Response:
    """``GET /v1/runs/{run_id}/events``: re-attach; the envelopes after ``Last-Event-ID`` (or ``?after=``)."""
    info = await _run_for(request)
    after = parse_last_event_id(request.headers.get("last-event-id") or request.query_params.get("after"))
    return await _results(request, info, after=after)


async def cancel_run(request: Request) -> Response:
    """``POST /v1/runs/{run_id}/cancel``: cancel the run; answers its state once the sandbox is gone."""
    info = await _run_for(request)
    return JSONResponse((await service_state(request).runs.cancel(info.run_id)).to_json())


async def interact(request: Request) -> Response:
    """``POST /v1/runs/{run_id}/interactions``: answer a pending request (``{"request_id", "data"}``).

    An approval answers 200 with the run; a question's answer starts the continuation run and
    answers 201 with that run (``Location`` names it).
    """
    info = await _run_for(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ServiceError(
            'an interaction is a JSON object {"request_id": "<id from action.requested>", "data": {...}}',
            code="service.invalid_request",
            status=422,
        )
    answered = await service_state(request).runs.interact(info.run_id, body)
    if answered.run_id != info.run_id:  # a question's answer started the continuation run
        log_event("run.continued", run_id=answered.run_id, continues=info.run_id)
        headers = {"Location": f"/v1/runs/{answered.run_id}", "X-Run-Id": answered.run_id}
        return JSONResponse(answered.to_json(), status_code=201, headers=headers)
    return JSONResponse(answered.to_json())
