"""HTTP helpers shared by the API's routes and the console's: auth, JSON bodies, JSON errors.

``authenticate(request)`` is the one place a request's token is checked (``Authorization: Bearer``
first, then the ``codeact_token`` cookie). A request authenticated by the cookie and sent by a page of
another origin (``Origin`` differs from the request's host) is refused for anything but GET/HEAD, so a
logged-in browser cannot be made to start or cancel runs by a foreign page.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from starlette.responses import JSONResponse

from codeact.engine.errors import CodeactError
from codeact.engine.service._auth import TOKEN_COOKIE, TokenScope
from codeact.engine.service.errors import ServiceError

if TYPE_CHECKING:
    from starlette.requests import Request

    from codeact.engine.service._state import ServiceState

__all__ = ["authenticate", "error_response", "read_json", "service_state", "status_of"]

_STATUS_BY_CODE = {
    "runner.interaction_not_found": 404,
    "runner.invalid_interaction": 422,
    "store.not_found": 404,
    "store.notFound": 404,
    "store.invalid_session_id": 400,
    "store.session_busy": 409,
}


def service_state(request: Request) -> ServiceState:
    """The ``ServiceState`` the app was created with."""
    state: ServiceState = request.app.state.codeact
    return state


def status_of(exc: CodeactError) -> int:
    """The HTTP status for an error raised below the service."""
    if isinstance(exc, ServiceError):
        return exc.status
    if exc.code in _STATUS_BY_CODE:
        return _STATUS_BY_CODE[exc.code]
    if exc.code.endswith((".invalid_argument", ".invalid_request")):
        return 422
    return 500


def error_response(exc: CodeactError) -> JSONResponse:
    """``{"error": {"code", "message"}}`` with the error's status."""
    if isinstance(exc, ServiceError):
        return JSONResponse(exc.to_json(), status_code=exc.status, headers=exc.headers)
    return JSONResponse({"error": exc.info().to_dict()}, status_code=status_of(exc))


def authenticate(request: Request) -> TokenScope:
    """The scope of the request's token.

    Raises:
        ServiceError: no token (401 ``service.unauthorized``), an unknown token (401), or a cookie-authenticated
            unsafe request from another origin (403 ``service.forbidden``).
    """
    tokens = service_state(request).tokens
    header = request.headers.get("authorization")
    from_cookie = False
    if header is not None:
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            raise _unauthorized("the Authorization header must be 'Bearer TOKEN'", "invalid_request")
        presented = presented.strip()
    else:
        cookie = request.cookies.get(TOKEN_COOKIE)
        if not cookie:
            raise _unauthorized(
                "missing API token: send 'Authorization: Bearer TOKEN' (tokens come from $CODEACT_API_TOKENS "
                "or --tokens-file of codeact serve)",
                None,
            )
        presented, from_cookie = cookie, True
    scope = tokens.check(presented)
    if scope is None:
        raise _unauthorized("invalid API token: it is not one of the server's tokens", "invalid_token")
    if from_cookie and request.method not in ("GET", "HEAD") and not _same_origin(request):
        raise ServiceError(
            "a request authenticated by the codeact_token cookie must come from this server's own pages "
            "(its Origin header names another site); API clients send 'Authorization: Bearer TOKEN'",
            code="service.forbidden",
            status=403,
        )
    return scope


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None:
        return True  # not a browser's cross-site request (browsers send Origin on POST)
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc == host


def _unauthorized(message: str, error: str | None) -> ServiceError:
    challenge = "Bearer" if error is None else f'Bearer error="{error}"'
    return ServiceError(message, code="service.unauthorized", status=401, headers={"WWW-Authenticate": challenge})


async def read_json(request: Request) -> object:
    """The request's JSON body, read up to the server's size limit.

    Raises:
        ServiceError: a body over the limit (413 ``service.payload_too_large``), not UTF-8 JSON (400
            ``service.invalid_json``).
    """
    limit = service_state(request).max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _too_large(limit)
    try:
        return json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "not UTF-8"
        raise ServiceError(
            f"the request body is not valid JSON ({reason}{where}); send one JSON object",
            code="service.invalid_json",
            status=400,
        ) from None


def _too_large(limit: int) -> ServiceError:
    return ServiceError(
        f"the request body is over the server's limit of {limit} bytes; send large inputs as attachments "
        "held by the host, or start the server with a higher `codeact serve --max-body-bytes`",
        code="service.payload_too_large",
        status=413,
    )
