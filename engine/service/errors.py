"""The service's errors: each carries the HTTP status and the stable code of the JSON error body.

Every error the HTTP API answers is ``{"error": {"code", "message"}}`` (plus ``"errors"``, the
pydantic errors with their paths, for an invalid request body); ``ServiceError`` is what the handlers
raise to produce one. Errors raised below the service (a ``CodeactError`` from the runner or the
store) are mapped to a status by their code in ``codeact.engine.service._app``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from codeact.prompts.errors import CodeactError, ErrorInfo

__all__ = ["ServiceError", "served_runner"]

_R = TypeVar("_R")


class ServiceError(CodeactError):
    """An HTTP API error: a status, a stable code and a message saying what to do.

    Args:
        message: What failed and what to do about it.
        code: A stable dotted code (``service.unauthorized``, ``service.run_not_found``, ...).
        status: The HTTP status of the answer.
        errors: Validation errors (``{"loc", "msg", "type"}``), for ``service.invalid_request``.
        headers: Extra response headers (``WWW-Authenticate`` on a 401).
    """

    code = "service.error"

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int,
        errors: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.errors = errors
        self.headers = headers or {}

    def to_json(self) -> dict[str, Any]:
        """The response body: ``{"error": {"code", "message"[, "errors"]}}``."""
        details = {} if self.errors is None else {"errors": self.errors}
        return {"error": ErrorInfo(code=self.code, message=self.message, details=details).to_dict()}


def served_runner(runners: Mapping[str, _R], runner_id: str) -> _R:
    """The runner served under ``runner_id``.

    Raises:
        ServiceError: ``service.runner_not_found`` (404), naming the runners that are served.
    """
    runner = runners.get(runner_id)
    if runner is None:
        raise ServiceError(
            f"runner {runner_id!r} not found; GET /v1/runners lists the runners served "
            f"({', '.join(sorted(runners)) or 'none'})",
            code="service.runner_not_found",
            status=404,
        )
    return runner
