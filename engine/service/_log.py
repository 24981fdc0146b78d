"""The service's structured log: one line per event, plain ``key=value`` text or JSON lines.

Events (logger ``codeact.service``, written to stderr by ``codeact serve``; docs/service.md):

- ``access``: one per HTTP request, when its answer is complete (an SSE stream: when it ends):
  ``request_id``, ``method``, ``path`` (never the query string: the console's ``?token=`` stays
  out), ``status``, ``duration_ms``, ``client``.
- ``run.started`` / ``run.ended``: ``run_id``, ``runner_id``, ``session_id``; the end adds
  ``status``, ``duration_ms``, ``events`` and the error's ``code`` of a failed run.
- ``error``: an error answer with its ``code``, ``status`` and ``message`` (500s with the traceback).

Every line of a request carries its ``request_id`` (the client's ``X-Request-Id`` when it is a
plain id, else a new one; echoed in the answer's ``X-Request-Id``), and so do the lines of the runs
it started. No token is ever logged: only a token's fingerprint (``sha256:...``).

This module imports no web framework: ``AccessLog`` is a plain ASGI middleware.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal, TextIO

__all__ = ["LOGGER", "AccessLog", "LogFormat", "configure_logging", "log_event", "request_id"]

LOGGER = "codeact.service"
LogFormat = Literal["plain", "json"]

request_id: ContextVar[str | None] = ContextVar("codeact_request_id", default=None)
"""The id of the request being served (inherited by the run tasks it starts)."""

_log = logging.getLogger(LOGGER)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:\-]{1,128}")
_PLAIN_VALUE = re.compile(r"[^\s\"=]+")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def log_event(event: str, *, level: int = logging.INFO, exc_info: bool = False, **fields: Any) -> None:
    """Log ``event`` with ``fields`` (None values left out) and the current request id."""
    if not _log.isEnabledFor(level):
        return
    shown = {"request_id": request_id.get(), **fields}
    _log.log(
        level, event, exc_info=exc_info, extra={"codeact_fields": {k: v for k, v in shown.items() if v is not None}}
    )


def _timestamp(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _plain(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if _PLAIN_VALUE.fullmatch(text) else json.dumps(text)


class _PlainFormatter(logging.Formatter):
    """``2026-11-26T14:30:00.123Z INFO access request_id=req-... method=GET path=/v1/runs status=200 ...``."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "codeact_fields", {})
        parts = [_timestamp(record.created), record.levelname, record.getMessage()]
        parts += [f"{key}={_plain(value)}" for key, value in fields.items()]
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class _JsonFormatter(logging.Formatter):
    """``{"time": ..., "at": ..., "level": "info", "event": "access", "request_id": ..., ...}``, one a line."""

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, Any] = getattr(record, "codeact_fields", {})
        data: dict[str, Any] = {
            "time": _timestamp(record.created),
            # the service's one machine time (the stream's envelopes, GET /v1/runs): joins a line to them
            "at": int(record.created * 1000) / 1000,  # the millisecond `time` shows (truncated, not rounded)
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            **fields,
        }
        if record.name != LOGGER:
            data["logger"] = record.name
        if record.exc_info:
            data["traceback"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def configure_logging(log_format: LogFormat = "plain", *, stream: TextIO | None = None) -> None:
    """Send the service's log (``codeact.service``) to ``stream`` (stderr) in ``log_format``, at INFO."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_JsonFormatter() if log_format == "json" else _PlainFormatter())
    for old in list(_log.handlers):
        _log.removeHandler(old)
    _log.addHandler(handler)
    _log.setLevel(logging.INFO)
    _log.propagate = False


class AccessLog:
    """ASGI middleware: a request id for each HTTP request and one ``access`` line when it is answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or ()).get(b"x-request-id", b"").decode("latin-1")
        rid = given if _REQUEST_ID.fullmatch(given) else f"req-{uuid.uuid4().hex[:16]}"
        token = request_id.set(rid)
        started = time.perf_counter()
        status = 500  # an app that raises before answering

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            client = scope.get("client")
            log_event(
                "access",
                method=scope.get("method"),
                path=scope.get("path"),
                status=status,
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
                client=f"{client[0]}:{client[1]}" if client else None,
            )
            request_id.reset(token)
