"""``codeact serve``: the HTTP service running blueprints as AgentRunner protocol runners.

``create_app(ServiceState(...))`` is a Starlette app; ``RunManager`` runs each run as an asyncio task
apart from the request that started it (re-attach with ``Last-Event-ID``, cancel, interactions).
The API is documented in docs/service.md. Starlette is imported by this package only (``pip install
codeact[serve]``): nothing on ``codeact validate``'s path imports it.
"""

from __future__ import annotations

from codeact.engine.service._app import create_app, parse_context
from codeact.engine.service._auth import TOKEN_COOKIE, TOKENS_ENV, Tokens, TokenScope
from codeact.engine.service._http import authenticate, read_json, service_state
from codeact.engine.service._log import configure_logging, log_event
from codeact.engine.service._run_artifacts import ArtifactPolicy
from codeact.engine.service._run_store import AuditLog
from codeact.engine.service._runs import TERMINAL_TYPES, RunInfo, RunManager, Runs, RunStatus
from codeact.engine.service._state import MAX_BODY_BYTES, ServiceState
from codeact.engine.service.errors import ServiceError

__all__ = [
    "MAX_BODY_BYTES",
    "TERMINAL_TYPES",
    "TOKENS_ENV",
    "TOKEN_COOKIE",
    "ArtifactPolicy",
    "AuditLog",
    "RunInfo",
    "RunManager",
    "RunStatus",
    "Runs",
    "ServiceError",
    "ServiceState",
    "TokenScope",
    "Tokens",
    "authenticate",
    "configure_logging",
    "create_app",
    "log_event",
    "parse_context",
    "read_json",
    "service_state",
]
