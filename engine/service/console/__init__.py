"""The web console: ``console_routes(state)`` serves the sessions list and session pages of ``codeact serve``.

Pages are rendered on the server from Jinja2 templates (autoescape on: everything the model or its
code produced is escaped), with a small vendored script for live updates (Server-Sent Events) and no
file from a CDN. Access takes the API's bearer tokens: a login form, or ``?token=T`` on any page,
exchanged once for the HTTP-only ``codeact_token`` cookie and a redirect to the URL without it.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from codeact.engine.service.console._live import Live
from codeact.engine.service.console._pages import Pages, favicon
from codeact.engine.service.console._web import COOKIE, ConsoleState, guard, page

__all__ = ["COOKIE", "ConsoleState", "console_routes"]


def console_routes(state: ConsoleState) -> list[BaseRoute]:
    """The console's routes over ``state`` (an ``codeact.engine.service.ServiceState``).

    ``/`` (sessions), ``/sessions/{id}`` (a session, live while it runs), its artifacts, SSE stream,
    interaction and replay endpoints, ``/login``, ``/logout`` and ``/console/static/{name}``.
    """
    pages, live = Pages(state), Live(state)
    sid = "/sessions/{session_id:str}"
    return [
        Route("/", page(state, pages.sessions), methods=["GET"], name="console.sessions"),
        Route(sid, page(state, pages.session), methods=["GET"], name="console.session"),
        Route(
            sid + "/rounds/{index:int}/artifacts/{number:int}",
            guard(state, pages.artifact),
            methods=["GET"],
            name="console.artifact",
        ),
        Route(sid + "/live", guard(state, live.stream), methods=["GET"], name="console.live"),
        Route(sid + "/interact", guard(state, live.interact), methods=["POST"], name="console.interact"),
        Route(sid + "/replay", guard(state, live.replay), methods=["POST"], name="console.replay"),
        Route("/login", pages.login_form, methods=["GET"], name="console.login_form"),
        Route("/login", pages.login, methods=["POST"], name="console.login"),
        Route("/logout", pages.logout, methods=["POST"], name="console.logout"),
        Route("/console/static/{name:str}", pages.static, methods=["GET"], name="console.static"),
        Route("/favicon.ico", favicon, methods=["GET"], name="console.favicon"),
    ]
