"""The console's pages: the sessions list, a session, its artifacts, login and logout, static files."""

from __future__ import annotations

import math
from pathlib import Path
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from codeact.engine.errors import StoreError
from codeact.engine.service.console import _web
from codeact.engine.service.console._data import artifact_bytes, list_rows, read_session
from codeact.engine.service.console._live import live_context
from codeact.engine.store import SESSION_STATUSES, check_session_id

__all__ = ["Pages"]

_PER_PAGE = 50
_STATIC = Path(__file__).parent / "static"
_STATIC_TYPES = {
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


class Pages:
    """The page handlers over one service state."""

    def __init__(self, state: _web.ConsoleState) -> None:
        self.state = state

    async def sessions(self, request: Request) -> Response:
        """``/``: the sessions, newest first, filtered by status and blueprint, paged."""
        status = request.query_params.get("status") or None
        blueprint = request.query_params.get("blueprint") or None
        if status is not None and status not in (*SESSION_STATUSES, "unreadable"):
            status = None
        try:
            page = max(1, int(request.query_params.get("page", "1")))
        except ValueError:
            page = 1
        rows, total, blueprints = await list_rows(
            self.state.store,
            status=status,
            blueprint=blueprint,
            page=page,
            per_page=_PER_PAGE,
            show=lambda meta: _web.visible(request, self.state, meta),
        )

        def page_url(number: int) -> str:
            query = {k: v for k, v in (("status", status), ("blueprint", blueprint)) if v}
            return "/?" + urlencode({**query, "page": number})

        return _web.render(
            "sessions.html.j2",
            rows=rows,
            total=total,
            page=page,
            pages=max(1, math.ceil(total / _PER_PAGE)),
            status=status,
            blueprint=blueprint,
            statuses=SESSION_STATUSES,
            blueprints=blueprints,
            page_url=page_url,
        )

    async def session(self, request: Request) -> Response:
        """``/sessions/{id}``: every round of the session; live while it runs."""
        session_id = request.path_params["session_id"]
        try:
            check_session_id(session_id)
        except StoreError:
            return _not_found(session_id)
        view = await read_session(self.state.store, session_id)
        if view is None or not _web.visible(request, self.state, view.meta):
            return _not_found(session_id)
        view = await _web.visible_links(request, self.state, view)
        live = await live_context(self.state, view)
        return _web.render("session.html.j2", s=view, replay=None, can_replay=bool(view.rounds), **live)

    async def artifact(self, request: Request) -> Response:
        """An artifact's bytes: images inline (for ``<img>``), anything else as a download."""
        session_id = request.path_params["session_id"]
        try:
            check_session_id(session_id)
        except StoreError:
            return _not_found(session_id)
        if not _web.visible(request, self.state, await self.state.store.get_session(session_id)):
            return _not_found(session_id)
        found = await artifact_bytes(
            self.state.store, session_id, request.path_params["index"], request.path_params["number"]
        )
        if found is None:
            return _web.no_store(PlainTextResponse("no such artifact", status_code=404))
        name, mime, content = found
        image = mime in ("image/png", "image/jpeg", "image/gif", "image/webp")
        inline = image and "download" not in request.query_params
        safe_name = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in Path(name).name)[:120] or "artifact"
        response = Response(
            content,
            media_type=mime if image else "application/octet-stream",
            headers={"Content-Disposition": f'{"inline" if inline else "attachment"}; filename="{safe_name}"'},
        )
        _web.no_store(response)
        response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
        return response

    async def login_form(self, request: Request) -> Response:
        """``GET /login``."""
        return _web.login_page(next_url=_web.safe_next(request.query_params.get("next")))

    async def login(self, request: Request) -> Response:
        """``POST /login``: a valid token becomes the HTTP-only cookie."""
        if not _web.same_origin(request):
            return _web.no_store(PlainTextResponse("cross-site request refused", status_code=403))
        data = await _web.form(request)
        next_url = _web.safe_next(data.get("next"))
        token = data.get("token", "").strip()
        if not _web.valid(self.state, token):
            return _web.login_page(next_url=next_url, message="That token is not valid.", status_code=401)
        response = RedirectResponse(next_url, status_code=303)
        _web.set_cookie(response, request, token)
        return _web.no_store(response)

    async def logout(self, request: Request) -> Response:
        """``POST /logout``: drop the cookie."""
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(_web.COOKIE, path="/", httponly=True, samesite="strict")
        return _web.no_store(response)

    async def static(self, request: Request) -> Response:
        """The console's own CSS and JS (vendored in the package; nothing from a CDN)."""
        name = request.path_params["name"]
        path = _STATIC / name
        if "/" in name or path.suffix not in _STATIC_TYPES or not path.is_file():
            return PlainTextResponse("not found", status_code=404)
        response = Response(path.read_bytes(), media_type=_STATIC_TYPES[path.suffix])
        response.headers["Cache-Control"] = "public, max-age=86400"
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


async def favicon(request: Request) -> Response:
    """``/favicon.ico``, which browsers ask for on every page: the console's icon (no 404, no warning logged)."""
    return RedirectResponse("/console/static/favicon.svg", status_code=301)


def _not_found(session_id: str) -> Response:
    return _web.render(
        "notfound.html.j2",
        status_code=404,
        what=f"session {session_id}",
    )
