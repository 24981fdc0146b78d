"""The console's plumbing: templates, the state it reads, access (token -> HTTP-only cookie), headers."""

from __future__ import annotations

import hmac
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response

from codeact.engine.store import SessionMeta, Store

if TYPE_CHECKING:
    from codeact.engine.service.console._data import SessionView

__all__ = [
    "COOKIE",
    "ConsoleState",
    "authorized",
    "guard",
    "page",
    "render",
    "safe_next",
    "templates",
    "visible",
    "visible_links",
]

COOKIE = "codeact_token"
_HERE = Path(__file__).parent
_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEAD_LINES = 40


class _Tokens(Protocol):
    def check(self, presented: str) -> object | None: ...


class _Runs(Protocol):
    def by_session(self, session_id: str) -> object: ...

    def events(self, run_id: str, after: int = 0) -> AsyncIterator[Any]: ...

    def interact(self, run_id: str, data: dict[str, object]) -> object: ...


class ConsoleState(Protocol):
    """What the console reads from ``codeact.engine.service.ServiceState``."""

    @property
    def store(self) -> Store: ...

    @property
    def tokens(self) -> _Tokens: ...

    @property
    def runs(self) -> _Runs | None: ...


def _money(value: float | None) -> str:
    if value is None:
        return "-"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def _first_lines(text: str, count: int) -> str:
    return "\n".join(text.split("\n")[:count])


_DIFF = re.compile(r"(?s)(.*?): recorded (.*), replayed (.*)")


def _diff_lines(text: str) -> list[tuple[str, str]]:
    """A replay difference (``what: recorded X, replayed Y``) as lines classed ``ctx``, ``del`` and ``add``."""
    match = _DIFF.fullmatch(str(text))
    if match is None:
        return [("ctx", str(text))]
    what, recorded, replayed = match.groups()
    return [("ctx", f"{what}:"), ("del", f"- recorded  {recorded}"), ("add", f"+ replayed  {replayed}")]


@lru_cache(maxsize=1)
def templates() -> jinja2.Environment:
    """The console's Jinja2 environment (autoescape on for every template)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(
        static=lambda name: f"/console/static/{name}?v={_static_version()}",
        money=_money,
        first_lines=_first_lines,
        diff_lines=_diff_lines,
        head=HEAD_LINES,
    )
    return env


@lru_cache(maxsize=1)
def _static_version() -> str:
    import hashlib

    digest = hashlib.sha256()
    for name in sorted((_HERE / "static").iterdir()):
        digest.update(name.read_bytes())
    return digest.hexdigest()[:10]


def _headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


def render(name: str, *, status_code: int = 200, **context: object) -> HTMLResponse:
    """Render template ``name`` to an HTML response with the console's security headers."""
    context.setdefault("authed", True)
    html = templates().get_template(name).render(**context)
    response = HTMLResponse(html, status_code=status_code)
    _headers(response)
    return response


def _presented(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    return request.cookies.get(COOKIE) or None


def valid(state: ConsoleState, token: str | None) -> bool:
    """Whether ``token`` is one of the service's tokens."""
    if not token or len(token) > 4096:
        return False
    return state.tokens.check(token) is not None


def authorized(request: Request, state: ConsoleState) -> bool:
    """Whether the request carries a valid bearer token or ``codeact_token`` cookie (its scope is kept)."""
    token = _presented(request)
    if not token or len(token) > 4096:
        return False
    scope = state.tokens.check(token)
    request.state.console_scope = scope
    return scope is not None


def visible(request: Request, state: ConsoleState, meta: SessionMeta | None) -> bool:
    """Whether the request's token may see ``meta``'s session (a token scoped to runners: their sessions only)."""
    runners = getattr(getattr(request.state, "console_scope", None), "runners", None)
    if runners is None:
        return True
    if meta is None:
        return False
    try:
        from codeact.engine.service._sessions import session_runner
    except ImportError:  # pragma: no cover - the service is part of the package
        return False
    runner_id = session_runner(state, meta)  # type: ignore[arg-type]
    return runner_id is not None and runner_id in runners


async def visible_links(request: Request, state: ConsoleState, view: SessionView) -> SessionView:
    """``view`` without links to sessions the request's token may not see."""
    children = [c for c in view.children if visible(request, state, await state.store.get_session(c))]
    parent = view.parent
    if parent is not None and not visible(request, state, await state.store.get_session(parent)):
        parent = None
    return replace(view, children=children, parent=parent)


def safe_next(value: str | None) -> str:
    """A local path to go back to after logging in (never another site)."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value or "\n" in value:
        return "/"
    return value


def set_cookie(response: Response, request: Request, token: str) -> None:
    """Store ``token`` in the HTTP-only, same-site cookie the console and the API accept."""
    response.set_cookie(
        COOKIE,
        token,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path="/",
    )


def _without_token(request: Request) -> str:
    query = [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True) if k != "token"]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def login_page(*, next_url: str, message: str | None = None, status_code: int = 200) -> HTMLResponse:
    """The login form."""
    return render("login.html.j2", status_code=status_code, next=next_url, message=message, authed=False)


Handler = Callable[[Request], Awaitable[Response]]


def page(state: ConsoleState, handler: Handler) -> Handler:
    """Wrap a page: ``?token=T`` becomes a cookie and a redirect; without access, the login form."""

    async def wrapped(request: Request) -> Response:
        if "token" in request.query_params:
            target = _without_token(request)
            if not valid(state, request.query_params["token"]):
                return login_page(next_url=safe_next(target), message="That token is not valid.", status_code=401)
            response = RedirectResponse(target, status_code=303)
            set_cookie(response, request, request.query_params["token"])
            return _headers(response)
        if not authorized(request, state):
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return login_page(next_url=safe_next(target), status_code=401)
        return await handler(request)

    return wrapped


def guard(state: ConsoleState, handler: Handler) -> Handler:
    """Wrap an endpoint that is not a page (SSE, actions, files): 401 without access, 403 cross-site."""

    async def wrapped(request: Request) -> Response:
        if not authorized(request, state):
            return _headers(PlainTextResponse("log in first: /login", status_code=401))
        if request.method == "POST" and not same_origin(request):
            return _headers(PlainTextResponse("cross-site request refused", status_code=403))
        return await handler(request)

    return wrapped


def same_origin(request: Request) -> bool:
    """A POST's ``Origin`` (when the browser sends one) names this host."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return hmac.compare_digest(origin.split("://", 1)[-1], host)


async def form(request: Request, *, limit: int = 64 * 1024) -> Mapping[str, str]:
    """An ``application/x-www-form-urlencoded`` body (no multipart), at most ``limit`` bytes."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return {}
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def no_store(response: Response) -> Response:
    """Add the console's security headers to ``response``."""
    return _headers(response)
